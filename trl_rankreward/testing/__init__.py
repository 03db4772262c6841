"""Fakes and tiny offline models for tests and examples: nothing here downloads anything.

`build_tiny_model` (from `trl_rankreward.tiny`) writes a random-weight chat model with a trained tokenizer;
`serve_transformers` serves a model with `transformers serve`; `serve_scripted_judge` serves
predictable verdicts over HTTP, `serve_judge_replica` the same with a vLLM replica's capacity,
context window and tokenizer, and `FaultProxy` breaks chosen requests on their way to a
server, to test the judge client's failure handling. `serve_chat_script` answers what a test
scripts per request and logs every request; `write_fake_release` lays out a folder like the
R-Align authors' repository, with prompts of our own. The simulated judges (`SimulatedJudge`,
`OracleJudge`, `KeywordMetaJudge`) are part of `trl_rankreward.evaluation`.
"""

from .._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "..tiny.models": ("build_tiny_model", "train_tiny_tokenizer"),  # trl_rankreward.tiny, here for the tests
        ".server": ("serve_transformers",),
        ".scripted_judge": ("serve_scripted_judge",),
        ".judge_replica": ("serve_judge_replica",),
        ".fault_proxy": ("FaultProxy",),
        ".chat_script_server": ("Reply", "serve_chat_script"),
        ".fake_release": ("write_fake_release",),
    },
)
