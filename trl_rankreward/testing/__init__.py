"""Fakes and tiny offline models for tests and examples (nothing here downloads anything): a tiny chat model,
a `transformers serve` server, scripted, vLLM-like and misbehaving judge servers, a fault-injecting proxy,
in-process fakes, and `run_in_group` (no process of a launched command outlives it). The benchmarks'
simulated judges live in `trl_rankreward.evaluation`."""

from .._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "..tiny": ("build_tiny_model", "train_tiny_tokenizer"),  # trl_rankreward.tiny, here for the tests
        ".chat_servers": ("serve_transformers", "Reply", "serve_chat_script", "kill_session", "run_in_group",
                          "session_survivors"),
        ".scripted_judge": ("serve_scripted_judge", "serve_hostile_judge"),
        ".judge_replica": ("serve_judge_replica",),
        ".fault_proxy": ("FaultProxy",),
        ".fakes": ("ScriptedBackend", "OracleJudge", "OracleRecipe", "LengthJudge", "CountingMethod", "write_fake_release"),
    },
)
