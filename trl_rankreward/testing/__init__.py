"""Deterministic fakes and tiny offline models for tests, examples and benchmarks.

`SimulatedJudge` answers from a known latent quality (seeded noise and biases);
`build_tiny_model` writes a random-weight chat model with a tokenizer trained on the spot;
`serve_scripted_judge` serves predictable verdicts over HTTP, and `FaultProxy` breaks chosen
requests on their way to a server, to test the judge client's failure handling.
Nothing here downloads anything.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "SimulatedJudge": ".simulated_judge",
    "OracleJudge": ".oracle_judge",
    "build_tiny_model": ".tiny_models",
    "train_tiny_tokenizer": ".tiny_models",
    "serve_transformers": ".server",
    "KeywordMetaJudge": ".meta_judge",
    "serve_scripted_judge": ".scripted_judge",
    "FaultProxy": ".fault_proxy",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
