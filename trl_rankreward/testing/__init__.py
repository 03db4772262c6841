"""Deterministic fakes and tiny offline models for tests, examples and benchmarks.

`SimulatedJudge` answers from a known latent quality (seeded noise and biases);
`build_tiny_model` writes a random-weight chat model with a tokenizer trained on the spot;
`serve_scripted_judge` serves predictable verdicts over HTTP, and `FaultProxy` breaks chosen
requests on their way to a server, to test the judge client's failure handling.
Nothing here downloads anything.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # what IDEs and type checkers see; at runtime `__getattr__` imports on first use
    from .fault_proxy import FaultProxy as FaultProxy
    from .meta_judge import KeywordMetaJudge as KeywordMetaJudge
    from .oracle_judge import OracleJudge as OracleJudge
    from .scripted_judge import serve_scripted_judge as serve_scripted_judge
    from .server import serve_transformers as serve_transformers
    from .simulated_judge import SimulatedJudge as SimulatedJudge
    from .tiny_models import build_tiny_model as build_tiny_model
    from .tiny_models import train_tiny_tokenizer as train_tiny_tokenizer

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
