"""Fakes and tiny offline models for tests and examples: nothing here downloads anything.

Each export's docstring says what it stands in for: a tiny chat model, a `transformers serve`
server, judge servers with scripted verdicts or a vLLM replica's limits, a proxy that breaks
chosen requests, a scripted chat server with a request log, a fake R-Align release; and
`run_in_group`, which runs a command (a multi-process launch) so that none of its processes
outlives it. The simulated judges (`SimulatedJudge`, `OracleJudge`, `KeywordMetaJudge`) are part
of `trl_rankreward.evaluation`.
"""

from .._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "..tiny.models": ("build_tiny_model", "train_tiny_tokenizer"),  # trl_rankreward.tiny, here for the tests
        ".server": ("serve_transformers",),
        ".process_group": ("kill_session", "run_in_group", "session_survivors"),
        ".scripted_judge": ("serve_scripted_judge",),
        ".judge_replica": ("serve_judge_replica",),
        ".fault_proxy": ("FaultProxy",),
        ".chat_script_server": ("Reply", "serve_chat_script"),
        ".fake_release": ("write_fake_release",),
    },
)
