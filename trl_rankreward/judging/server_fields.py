"""The judge servers' config fields, written out per role (`server_settings.TRAINING_JUDGE`, ...): each class
is a mixin of a TRL config or a command's argument group, so YAML keys and flags are these names.

The training judge's help explains each setting in full; the other roles' help says what the setting
is in a short phrase and what differs (docs/judging.md has the details). Defaults the roles share
are `JudgeServerSettings`', which also checks the values when a role reads its fields back: each class's
`__post_init__` runs `ROLE.check` (a config whose own `__post_init__` does not chain to it calls that itself).
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass
from typing import ClassVar

from .backends.base import GENRM_MAX_TOKENS
from .server_settings import EVAL_JUDGE, GENRM, METARM, RUBRIC_GENERATOR, TRAINING_JUDGE, JudgeRole, setting


class _RoleFields:
    """The base of the role field classes: after the other bases' `__post_init__` (TRL's, where mixed into a
    TRL config), `ROLE.check(self)` checks the settings and writes the URLs back as a list, so a bad value is
    refused when the config or the command's arguments are built."""

    ROLE: ClassVar[JudgeRole]

    def __post_init__(self):
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:
            parent()
        self.ROLE.check(self)


@dataclass(kw_only=True)
class TrainingJudgeFields(_RoleFields):
    """The training judge of `JudgeRewardGRPOConfig` (`judge_*`); `TRAINING_JUDGE.check(config)` checks them."""

    ROLE: ClassVar[JudgeRole] = TRAINING_JUDGE

    judge_base_urls: list[str] = setting(
        "base_urls",
        "Base URL(s) of OpenAI-compatible judge servers, e.g. http://localhost:8000/v1; several URLs share the "
        "load. Empty: the embedded EmbeddingJudge.",
    )
    judge_model: str | None = setting(
        "model",
        "Model name served at judge_base_urls (required with them). With the embedded judge: an optional local "
        "sentence-transformers model path.",
    )
    judge_api_key_env: str = setting("api_key_env", "Environment variable holding the judge server's API key.")
    judge_max_concurrency: int = setting("max_concurrency", "Most judge requests in flight at once.")
    judge_max_concurrency_per_replica: int | None = setting(
        "max_concurrency_per_replica",
        "Most judge requests in flight at once on one of judge_base_urls (None: judge_max_concurrency). Each "
        "request goes to the replica with the fewest in flight; set this to a replica's batch size (vLLM's "
        "--max-num-seqs) so that a slow replica's queue stays with the client, where a faster one can take it.",
    )
    judge_max_model_len: int | None = setting(
        "max_model_len",
        "The judge's context window in tokens, prompt and answer together, for servers that do not list "
        "max_model_len at /models (vLLM does). Prompts are fitted to it: shown texts are cut to an equal share "
        "when they would not fit (docs/judging.md). None: the listed window, or none.",
    )
    judge_timeout_s: float = setting(
        "timeout_s",
        "Timeout of one judge HTTP request, in seconds. The other processes wait for the judging in a "
        "collective, so keep judge_max_attempts x judge_timeout_s (plus backoff) below ddp_timeout (a warning "
        "says so).",
    )
    judge_max_attempts: int = setting(
        "max_attempts",
        "HTTP requests per judge request in all: an invalid answer is asked again at once; a timeout, transport "
        "error, malformed response, 408, 429 or 5xx after exponential backoff with jitter (or the server's "
        "Retry-After).",
    )
    judge_require_listed_model: bool = setting(
        "require_listed_model",
        "At start, judge_model must be among the models each judge server lists at /models (else nothing "
        "starts). Turn off for gateways that route models they do not list.",
    )
    judge_max_tokens: int | None = setting(
        "max_tokens", "Most tokens the judge may generate per call (its answer, and reasoning if any)."
    )
    judge_temperature: float | None = setting("temperature", "Sampling temperature of the judge.")
    judge_structured_output: bool = setting(
        "structured_output",
        "Ask the judge server for structured output: each request carries its kind's JSON schema as "
        "response_format (vLLM and SGLang decode to it), so the answer is one verdict. A server that refuses "
        "response_format (HTTP 400 naming it) is asked without it from then on, with a logged note. Answers are "
        "validated either way; rationale-first prompts are never sent a schema.",
    )
    judge_templates: str | None = setting(
        "templates",
        "YAML file overriding the judge's prompt templates (keys as in docs/judging.md). The embedded judge uses "
        "them to count the tokens an LLM judge would read.",
    )
    judge_seed: int = setting("seed", "Seed of the judge's display-order shuffles and of its retry jitter.")


@dataclass(kw_only=True)
class EvalJudgeFields(_RoleFields):
    """The win-rate judge of `JudgeEvalConfig` (`eval_judge_*`); `EVAL_JUDGE.check(config)` checks them."""

    ROLE: ClassVar[JudgeRole] = EVAL_JUDGE

    eval_judge_base_urls: list[str] = setting(
        "base_urls",
        "Base URL(s) of the evaluation judge's OpenAI-compatible servers; several share the load. Empty: the "
        "training judge's settings (judge_*), as a separate judge with its own ledger, so evaluation calls never "
        "count toward the training judge's cost.",
    )
    eval_judge_model: str | None = setting("model", "Model name served at eval_judge_base_urls (required with them).")
    eval_judge_api_key_env: str = setting(
        "api_key_env", "Environment variable holding the evaluation judge server's API key."
    )
    eval_judge_max_concurrency: int = setting(
        "max_concurrency",
        "Most evaluation judge requests in flight at once. Only the main process judges the evaluation.",
    )
    eval_judge_max_concurrency_per_replica: int | None = setting(
        "max_concurrency_per_replica",
        "Most evaluation judge requests in flight on one replica (None: eval_judge_max_concurrency); set it to a "
        "replica's batch size (vLLM's --max-num-seqs).",
    )
    eval_judge_max_model_len: int | None = setting(
        "max_model_len",
        "The evaluation judge's context window in tokens where /models lists none; shown texts are cut to fit.",
    )
    eval_judge_timeout_s: float = setting("timeout_s", "Timeout of one evaluation judge HTTP request, in seconds.")
    eval_judge_max_attempts: int = setting(
        "max_attempts",
        "HTTP requests per evaluation judge request in all; invalid answers and transient errors are retried.",
    )
    eval_judge_require_listed_model: bool = setting(
        "require_listed_model",
        "At start, eval_judge_model must be listed at /models by each server; turn off for gateways that do not "
        "list the models they route.",
    )
    eval_judge_max_tokens: int | None = setting(
        "max_tokens", "Most tokens the evaluation judge may generate per call, reasoning included."
    )
    eval_judge_temperature: float | None = setting("temperature", "Sampling temperature of the evaluation judge.")
    eval_judge_structured_output: bool = setting(
        "structured_output",
        "Ask the evaluation judge server for its request kind's JSON schema (response_format), as "
        "judge_structured_output.",
    )
    eval_judge_templates: str | None = setting(
        "templates", "YAML file overriding the evaluation judge's prompt templates (keys as in docs/judging.md)."
    )
    eval_judge_seed: int = setting("seed", "Seed of the evaluation judge's display-order shuffles.")


@dataclass(kw_only=True)
class MetaRMFields(_RoleFields):
    """R-Align's MetaRM in `RAlignGenRMConfig` and `eval-genrm` (`metarm_*`); `METARM.check(config)` checks them."""

    ROLE: ClassVar[JudgeRole] = METARM

    metarm_base_urls: list[str] = setting(
        "base_urls", "Base URL(s) of the MetaRM's OpenAI-compatible servers; several share the load."
    )
    metarm_model: str | None = setting("model", "Model name served at metarm_base_urls (required with them).")
    metarm_api_key_env: str = setting("api_key_env", "Environment variable holding the MetaRM server's API key.")
    metarm_max_concurrency: int = setting(
        "max_concurrency",
        "Most MetaRM requests in flight at once. In training: per process (each meta-judges its own samples).",
    )
    metarm_max_concurrency_per_replica: int | None = setting(
        "max_concurrency_per_replica",
        "Most MetaRM requests in flight on one replica (None: metarm_max_concurrency); set it to a replica's batch "
        "size (vLLM's --max-num-seqs).",
    )
    metarm_max_model_len: int | None = setting(
        "max_model_len", "The MetaRM's context window in tokens where /models lists none; shown texts are cut to fit."
    )
    metarm_timeout_s: float = setting("timeout_s", "Timeout of one MetaRM HTTP request, in seconds.")
    metarm_max_attempts: int = setting(
        "max_attempts", "HTTP requests per MetaRM request in all; invalid answers and transient errors are retried."
    )
    metarm_require_listed_model: bool = setting(
        "require_listed_model",
        "At start, metarm_model must be listed at /models by each server; turn off for gateways that do not list "
        "the models they route.",
    )
    metarm_max_tokens: int | None = setting(
        "max_tokens",
        "Most tokens the MetaRM may generate per call, reasoning included. The R-Align authors' release: 16K.",
        default=16384,
    )
    metarm_temperature: float | None = setting(
        "temperature", "Sampling temperature of the MetaRM. The R-Align authors' release: 0.4.", default=0.4
    )
    metarm_structured_output: bool = setting(
        "structured_output",
        "Ask the MetaRM server for the meta verdict's JSON schema (response_format), as judge_structured_output. "
        "Off by default: the R-Align authors' MetaRM answers in free form.",
        default=False,
    )
    metarm_templates: str | None = setting(
        "templates",
        "YAML file overriding the MetaRM's prompt templates (keys as in docs/judging.md). Key `meta`; answers may "
        "be our JSON or the authors' <final_verdict>Correct|Incorrect</final_verdict>.",
    )


@dataclass(kw_only=True)
class GenRMFields(_RoleFields):
    """The GenRM under evaluation in `eval-genrm` (`genrm_*`); `GENRM.check(config)` checks them."""

    ROLE: ClassVar[JudgeRole] = GENRM

    genrm_base_urls: list[str] = setting(
        "base_urls", "Base URL(s) of the GenRM's OpenAI-compatible servers; several share the load."
    )
    genrm_model: str | None = setting("model", "Model name served at genrm_base_urls (required with them).")
    genrm_api_key_env: str = setting("api_key_env", "Environment variable holding the GenRM server's API key.")
    genrm_max_concurrency: int = setting("max_concurrency", "Most GenRM requests in flight at once.", default=32)
    genrm_max_concurrency_per_replica: int | None = setting(
        "max_concurrency_per_replica",
        "Most GenRM requests in flight on one replica (None: genrm_max_concurrency); set it to a replica's batch "
        "size (vLLM's --max-num-seqs).",
    )
    genrm_max_model_len: int | None = setting(
        "max_model_len", "The GenRM's context window in tokens where /models lists none; the responses are cut to fit."
    )
    genrm_timeout_s: float = setting("timeout_s", "Timeout of one GenRM HTTP request, in seconds.")
    genrm_require_listed_model: bool = setting(
        "require_listed_model",
        "At start, genrm_model must be listed at /models by each server; turn off for gateways that do not list "
        "the models they route.",
    )
    genrm_max_tokens: int | None = setting(
        "max_tokens", "Most tokens the GenRM may generate per call, reasoning included.", default=GENRM_MAX_TOKENS
    )
    genrm_temperature: float | None = setting("temperature", "Sampling temperature of the GenRM.")
    genrm_seed: int = setting(
        "seed", "Seed of the GenRM's display-order shuffles. It decides which response the GenRM sees as A."
    )


@dataclass(kw_only=True)
class GeneratorServerFields(_RoleFields):
    """The rubric and rationale generator of `trl-rankreward rubrics` (no prefix; its template sets the
    decoding); `RUBRIC_GENERATOR.check(config)` checks them."""

    ROLE: ClassVar[JudgeRole] = RUBRIC_GENERATOR

    base_urls: list[str] = setting(
        "base_urls",
        "Base URL(s) of the generator's OpenAI-compatible servers; several share the load.",
        default=MISSING,
    )
    model: str = setting("model", "Model name served at base_urls.", default=MISSING)
    api_key_env: str = setting("api_key_env", "Environment variable holding the generator server's API key.")
    max_concurrency: int = setting("max_concurrency", "Most generator requests in flight at once.", default=32)
    max_concurrency_per_replica: int | None = setting(
        "max_concurrency_per_replica",
        "Most generator requests in flight on one replica (None: max_concurrency); set it to a replica's batch "
        "size (vLLM's --max-num-seqs).",
    )
    max_model_len: int | None = setting(
        "max_model_len", "The generator's window in tokens where /models lists none; shown texts are cut to fit."
    )
    timeout_s: float = setting("timeout_s", "Timeout of one generator HTTP request, in seconds.")
    max_attempts: int = setting(
        "max_attempts", "HTTP requests per generator request in all; invalid answers and transient errors are retried."
    )
    require_listed_model: bool = setting(
        "require_listed_model",
        "At start, model must be listed at /models by each server; turn off for gateways that do not list the "
        "models they route.",
    )
    max_tokens: int | None = setting(
        "max_tokens", "Most tokens the generator may generate per call. None: the template's.", default=None
    )
    temperature: float | None = setting(
        "temperature", "Sampling temperature of the generator. None: the template's.", default=None
    )
