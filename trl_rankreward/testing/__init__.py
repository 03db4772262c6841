"""Fakes and tiny offline models for tests and examples: nothing here downloads anything.

Each export's docstring says what it stands in for: a tiny chat model, a `transformers serve`
server, judge servers with scripted verdicts, a vLLM replica's limits or a weak judge's misbehaviour, a proxy that breaks
chosen requests, a scripted chat server with a request log, and in-process fakes (`fakes`: a scripted
chat backend, a noiseless `OracleJudge`, a stateful reward method, a fake R-Align release). Every fake
the tests use lives here; so does `run_in_group`, which runs a command (a multi-process launch) so that
none of its processes outlives it. The simulated judges of the benchmarks (`SimulatedJudge`,
`KeywordMetaJudge`) are part of `trl_rankreward.evaluation`.
"""

from .._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "..tiny": ("build_tiny_model", "train_tiny_tokenizer"),  # trl_rankreward.tiny, here for the tests
        ".chat_servers": ("serve_transformers", "Reply", "serve_chat_script"),
        ".process_group": ("kill_session", "run_in_group", "session_survivors"),
        ".scripted_judge": ("serve_scripted_judge",),
        ".judge_replica": ("serve_judge_replica",),
        ".hostile_judges": ("serve_hostile_judge",),
        ".fault_proxy": ("FaultProxy",),
        ".fakes": ("ScriptedBackend", "OracleJudge", "OracleRecipe", "LengthJudge", "CountingMethod", "write_fake_release"),
    },
)
