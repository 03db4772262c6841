"""The judge servers of training as config fields, written out: `TrainingJudgeFields` (`judge_*`, the
training judge of `JudgeRewardGRPOConfig`), `EvalJudgeFields` (`eval_judge_*`, the win-rate judge of
`JudgeEvalConfig`) and `MetaRMFields` (`metarm_*`, R-Align's MetaRM in `RAlignGenRMConfig` and in
`trl-rankreward eval-genrm`).

Each class is a mixin of a TRL config or an argument group of a command, so YAML keys and flags
are these names. The settings' checks, and the defaults the roles share, live in `server_settings.JudgeServerSettings`;
a role (`server_settings.TRAINING_JUDGE`, ...) reads a config's fields back as checked settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .server_settings import JudgeServerSettings


@dataclass(kw_only=True)
class TrainingJudgeFields:
    """The judge server's settings as `judge_*` fields; `TRAINING_JUDGE.settings(config)` checks them."""

    judge_base_urls: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Base URL(s) of OpenAI-compatible judge servers, e.g. http://localhost:8000/v1; several URLs "
            "share the load. Empty: the embedded EmbeddingJudge."
        },
    )
    judge_model: str | None = field(
        default=JudgeServerSettings.model,
        metadata={
            "help": "Model name served at judge_base_urls (required with them). With the embedded judge: an optional "
            "local sentence-transformers model path."
        },
    )
    judge_api_key_env: str = field(
        default=JudgeServerSettings.api_key_env,
        metadata={"help": "Environment variable holding the judge server's API key."},
    )
    judge_max_concurrency: int = field(
        default=JudgeServerSettings.max_concurrency, metadata={"help": "Most judge requests in flight at once."}
    )
    judge_max_concurrency_per_replica: int | None = field(
        default=JudgeServerSettings.max_concurrency_per_replica,
        metadata={
            "help": "Most judge requests in flight at once on one of judge_base_urls (None: judge_max_concurrency). "
            "Each request goes to the replica with the fewest in flight; set this to a replica's batch size "
            "(vLLM's --max-num-seqs) so that a slow replica's queue stays with the client, where a faster one "
            "can take it."
        },
    )
    judge_max_model_len: int | None = field(
        default=JudgeServerSettings.max_model_len,
        metadata={
            "help": "The judge's context window in tokens, prompt and answer together, for servers that do not list "
            "max_model_len at /models (vLLM does). Prompts are fitted to it: shown texts are cut to an equal "
            "share when they would not fit (docs/judging.md). None: the listed window, or none."
        },
    )
    judge_timeout_s: float = field(
        default=JudgeServerSettings.timeout_s,
        metadata={
            "help": "Timeout of one judge HTTP request, in seconds. The other processes wait for the judging in a "
            "collective, so keep judge_max_attempts x judge_timeout_s (plus backoff) below ddp_timeout (a "
            "warning says so)."
        },
    )
    judge_max_attempts: int = field(
        default=JudgeServerSettings.max_attempts,
        metadata={
            "help": "HTTP requests per judge request in all: an invalid answer is asked again at once; a timeout, "
            "transport error, malformed response, 408, 429 or 5xx after exponential backoff with jitter (or "
            "the server's Retry-After)."
        },
    )
    judge_require_listed_model: bool = field(
        default=JudgeServerSettings.require_listed_model,
        metadata={
            "help": "At start, judge_model must be among the models each judge server lists at /models (else nothing "
            "starts). Turn off for gateways that route models they do not list."
        },
    )
    judge_max_tokens: int | None = field(
        default=JudgeServerSettings.max_tokens,
        metadata={"help": "Most tokens the judge may generate per call (its answer, and reasoning if any)."},
    )
    judge_temperature: float | None = field(
        default=JudgeServerSettings.temperature,
        metadata={"help": "Sampling temperature of the judge."},
    )
    judge_templates: str | None = field(
        default=JudgeServerSettings.templates,
        metadata={
            "help": "YAML file overriding the judge's prompt templates (keys as in docs/judging.md). The embedded "
            "judge uses them to count the tokens an LLM judge would read."
        },
    )
    judge_seed: int = field(
        default=JudgeServerSettings.seed, metadata={"help": "Seed of the judge's display-order shuffles."}
    )


@dataclass(kw_only=True)
class EvalJudgeFields:
    """The evaluation judge server's settings as `eval_judge_*` fields; `EVAL_JUDGE.settings(config)` checks them."""

    eval_judge_base_urls: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Base URL(s) of OpenAI-compatible evaluation judge servers, e.g. http://localhost:8000/v1; "
            "several URLs share the load. Empty: the training judge's settings (judge_*), as a separate judge "
            "with its own ledger, so evaluation calls never count toward the training judge's cost."
        },
    )
    eval_judge_model: str | None = field(
        default=JudgeServerSettings.model,
        metadata={"help": "Model name served at eval_judge_base_urls (required with them)."},
    )
    eval_judge_api_key_env: str = field(
        default=JudgeServerSettings.api_key_env,
        metadata={"help": "Environment variable holding the evaluation judge server's API key."},
    )
    eval_judge_max_concurrency: int = field(
        default=JudgeServerSettings.max_concurrency,
        metadata={
            "help": "Most evaluation judge requests in flight at once. Only the main process judges the evaluation."
        },
    )
    eval_judge_max_concurrency_per_replica: int | None = field(
        default=JudgeServerSettings.max_concurrency_per_replica,
        metadata={
            "help": "Most evaluation judge requests in flight at once on one of eval_judge_base_urls (None: "
            "eval_judge_max_concurrency). Each request goes to the replica with the fewest in flight; set "
            "this to a replica's batch size (vLLM's --max-num-seqs) so that a slow replica's queue stays with "
            "the client, where a faster one can take it."
        },
    )
    eval_judge_max_model_len: int | None = field(
        default=JudgeServerSettings.max_model_len,
        metadata={
            "help": "The evaluation judge's context window in tokens, prompt and answer together, for servers that do "
            "not list max_model_len at /models (vLLM does). Prompts are fitted to it: shown texts are cut to "
            "an equal share when they would not fit (docs/judging.md). None: the listed window, or none."
        },
    )
    eval_judge_timeout_s: float = field(
        default=JudgeServerSettings.timeout_s,
        metadata={"help": "Timeout of one evaluation judge HTTP request, in seconds."},
    )
    eval_judge_max_attempts: int = field(
        default=JudgeServerSettings.max_attempts,
        metadata={
            "help": "HTTP requests per evaluation judge request in all: an invalid answer is asked again at once; a "
            "timeout, transport error, malformed response, 408, 429 or 5xx after exponential backoff with "
            "jitter (or the server's Retry-After)."
        },
    )
    eval_judge_require_listed_model: bool = field(
        default=JudgeServerSettings.require_listed_model,
        metadata={
            "help": "At start, eval_judge_model must be among the models each evaluation judge server lists at "
            "/models (else nothing starts). Turn off for gateways that route models they do not list."
        },
    )
    eval_judge_max_tokens: int | None = field(
        default=JudgeServerSettings.max_tokens,
        metadata={"help": "Most tokens the evaluation judge may generate per call (its answer, and reasoning if any)."},
    )
    eval_judge_temperature: float | None = field(
        default=JudgeServerSettings.temperature,
        metadata={"help": "Sampling temperature of the evaluation judge."},
    )
    eval_judge_templates: str | None = field(
        default=JudgeServerSettings.templates,
        metadata={"help": "YAML file overriding the evaluation judge's prompt templates (keys as in docs/judging.md)."},
    )
    eval_judge_seed: int = field(
        default=JudgeServerSettings.seed, metadata={"help": "Seed of the evaluation judge's display-order shuffles."}
    )


@dataclass(kw_only=True)
class MetaRMFields:
    """The MetaRM server's settings as `metarm_*` fields; `METARM.settings(config)` checks them."""

    metarm_base_urls: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Base URL(s) of OpenAI-compatible MetaRM servers, e.g. http://localhost:8000/v1; several URLs "
            "share the load."
        },
    )
    metarm_model: str | None = field(
        default=JudgeServerSettings.model,
        metadata={"help": "Model name served at metarm_base_urls (required with them)."},
    )
    metarm_api_key_env: str = field(
        default=JudgeServerSettings.api_key_env,
        metadata={"help": "Environment variable holding the MetaRM server's API key."},
    )
    metarm_max_concurrency: int = field(
        default=JudgeServerSettings.max_concurrency,
        metadata={
            "help": "Most MetaRM requests in flight at once. In training: per process (each meta-judges its own "
            "samples)."
        },
    )
    metarm_max_concurrency_per_replica: int | None = field(
        default=JudgeServerSettings.max_concurrency_per_replica,
        metadata={
            "help": "Most MetaRM requests in flight at once on one of metarm_base_urls (None: "
            "metarm_max_concurrency). Each request goes to the replica with the fewest in flight; set this to "
            "a replica's batch size (vLLM's --max-num-seqs) so that a slow replica's queue stays with the "
            "client, where a faster one can take it."
        },
    )
    metarm_max_model_len: int | None = field(
        default=JudgeServerSettings.max_model_len,
        metadata={
            "help": "The MetaRM's context window in tokens, prompt and answer together, for servers that do not list "
            "max_model_len at /models (vLLM does). Prompts are fitted to it: shown texts are cut to an equal "
            "share when they would not fit (docs/judging.md). None: the listed window, or none."
        },
    )
    metarm_timeout_s: float = field(
        default=JudgeServerSettings.timeout_s, metadata={"help": "Timeout of one MetaRM HTTP request, in seconds."}
    )
    metarm_max_attempts: int = field(
        default=JudgeServerSettings.max_attempts,
        metadata={
            "help": "HTTP requests per MetaRM request in all: an invalid answer is asked again at once; a timeout, "
            "transport error, malformed response, 408, 429 or 5xx after exponential backoff with jitter (or "
            "the server's Retry-After)."
        },
    )
    metarm_require_listed_model: bool = field(
        default=JudgeServerSettings.require_listed_model,
        metadata={
            "help": "At start, metarm_model must be among the models each MetaRM server lists at /models (else "
            "nothing starts). Turn off for gateways that route models they do not list."
        },
    )
    metarm_max_tokens: int | None = field(
        default=16384,
        metadata={
            "help": "Most tokens the MetaRM may generate per call (its answer, and reasoning if any). The R-Align "
            "authors' release: 16K."
        },
    )
    metarm_temperature: float | None = field(
        default=0.4,
        metadata={"help": "Sampling temperature of the MetaRM. The R-Align authors' release: 0.4."},
    )
    metarm_templates: str | None = field(
        default=JudgeServerSettings.templates,
        metadata={
            "help": "YAML file overriding the MetaRM's prompt templates (keys as in docs/judging.md). Key `meta`; "
            "answers may be our JSON or the authors' <final_verdict>Correct|Incorrect</final_verdict>."
        },
    )
