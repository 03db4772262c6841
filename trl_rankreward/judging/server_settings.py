"""Judge-server settings: one dataclass, `JudgeServerSettings`, read from a role's prefixed fields.

Each place that configures a judge server is a role (`TRAINING_JUDGE`, `METARM`, ... below), whose
fields are written out in `server_fields` with `setting`. `role.settings(config)` reads them back as
checked `JudgeServerSettings`, `role.check(config)` also writes the URLs back as a list; `build_judge`
and `build_backend` turn those into a judge or a chat backend.

Example:
    settings = JudgeServerSettings(base_urls=["http://localhost:8000/v1"], model="Qwen/Qwen3-8B")
    judge = build_judge(settings)  # an LLMJudge; the server is checked now

The judge servers' config fields, written out per role (`server_settings.TRAINING_JUDGE`, ...): each class
is a mixin of a TRL config or a command's argument group, so YAML keys and flags are these names.

The training judge's help explains each setting in full; the other roles' help says what the setting
is in a short phrase and what differs (docs/judging.md has the details). Defaults the roles share
are `JudgeServerSettings`', which also checks the values when a role reads its fields back: each class's
`__post_init__` runs `ROLE.check` (a config whose own `__post_init__` does not chain to it calls that itself).
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING, dataclass, field
from typing import Any, ClassVar

from .backends.base import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    DEFAULT_TIMEOUT_S,
    GENRM_MAX_TOKENS,
)
from .calls import RetryPolicy


@dataclass(frozen=True)
class JudgeServerSettings:
    """How to reach a judge server and decode with it: the defaults the roles share (`setting`)."""

    base_urls: list[str] = field(default_factory=list)  # several URLs share the load
    model: str | None = None  # served at base_urls (required with them)
    api_key_env: str = DEFAULT_API_KEY_ENV  # the environment variable holding the API key
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY  # requests in flight at once
    max_concurrency_per_replica: int | None = None  # ... on one replica (None: max_concurrency)
    max_model_len: int | None = None  # the context window where the server does not list it
    timeout_s: float = DEFAULT_TIMEOUT_S  # of one HTTP request
    max_attempts: int = RetryPolicy.max_attempts  # HTTP requests per judge request in all
    require_listed_model: bool = True  # at start, `model` must be listed at /models
    max_tokens: int | None = DEFAULT_MAX_TOKENS
    temperature: float | None = DEFAULT_TEMPERATURE
    structured_output: bool = True  # ask for the request kind's JSON schema (`response_format`)
    templates: str | None = None  # YAML file overriding the prompt templates
    seed: int = 0  # of the display-order shuffles
    prefix: str = field(default="", compare=False)  # of the flags the settings were read from; errors name them

    def __post_init__(self):
        if isinstance(self.base_urls, str):  # "http://a/v1,http://b/v1" from an environment variable or YAML
            object.__setattr__(self, "base_urls", [url for url in self.base_urls.split(",") if url])
        p = self.prefix
        if self.base_urls and not self.model:
            raise ValueError(
                f"{p}base_urls={self.base_urls} needs {p}model, the model name the server serves "
                f"(e.g. {p}model=Qwen/Qwen3-30B-A3B-Instruct-2507)"
            )
        for name in ("max_concurrency", "max_concurrency_per_replica", "max_model_len", "max_attempts", "max_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{p}{name} must be >= 1, got {value}")
        if not self.timeout_s > 0:
            raise ValueError(f"{p}timeout_s must be > 0, got {self.timeout_s}")
        if self.temperature is not None and self.temperature < 0:
            raise ValueError(f"{p}temperature must be >= 0, got {self.temperature}")

    def server_options(self) -> dict[str, Any]:
        """The keywords of `OpenAICompatibleBackend` besides the URLs and the model."""
        return {"api_key_env": self.api_key_env, "max_concurrency": self.max_concurrency,
                "max_concurrency_per_replica": self.max_concurrency_per_replica,
                "max_model_len": self.max_model_len, "timeout_s": self.timeout_s,
                "require_listed_model": self.require_listed_model}  # fmt: skip

    def retry_policy(self) -> RetryPolicy:
        """Retries with `max_attempts` tries, their jitter seeded from `seed`."""
        return RetryPolicy(max_attempts=self.max_attempts, seed=self.seed)


SETTINGS = tuple(f.name for f in dataclasses.fields(JudgeServerSettings) if f.name != "prefix")
_SHARED = object()


def setting(name: str, help: str, default: Any = _SHARED) -> Any:
    """A role's config field for the setting `name`, with `help` for `--help`: `JudgeServerSettings`' default
    unless the role gives its own (`default=dataclasses.MISSING`: a required flag)."""
    if default is not _SHARED:
        return field(default=default, metadata={"help": help})
    shared = next(f for f in dataclasses.fields(JudgeServerSettings) if f.name == name)
    return field(default=shared.default, default_factory=shared.default_factory, metadata={"help": help})


@dataclass(frozen=True)
class JudgeRole:
    """One place a judge server is configured: the prefix of its fields and the settings it exposes.

    Args:
        prefix: of every field and flag (`"metarm_"` -> `metarm_model`).
        names: the settings the role exposes; the others keep `JudgeServerSettings`' defaults.
    """

    prefix: str
    names: tuple[str, ...] = SETTINGS

    def settings(self, config) -> JudgeServerSettings:
        """The role's settings read from `config`'s prefixed fields (checked, named by their flags)."""
        values = {name: getattr(config, self.prefix + name) for name in self.names}
        return JudgeServerSettings(**values, prefix=self.prefix)

    def check(self, config) -> JudgeServerSettings:
        """`settings(config)`, with the URLs written back to `config` as a list (a comma-separated string is
        split): the check a config runs in its `__post_init__` (the role's fields run it themselves)."""
        settings = self.settings(config)
        setattr(config, self.prefix + "base_urls", settings.base_urls)
        return settings


TRAINING_JUDGE = JudgeRole("judge_")
"""The judge of `JudgeRewardGRPOTrainer` and its subclasses (`TrainingJudgeFields`)."""

METARM = JudgeRole("metarm_", names=tuple(name for name in SETTINGS if name != "seed"))  # A and B shown as given
"""R-Align's MetaRM, in training and in `eval-genrm` alike (`MetaRMFields`)."""

_FREE_FORM = ("templates", "structured_output")  # roles whose answers are not a request kind's JSON verdict
GENRM = JudgeRole("genrm_", names=tuple(name for name in SETTINGS if name not in ("max_attempts", *_FREE_FORM)))
"""The GenRM under evaluation (`eval-genrm`, `GenRMFields`): asked once per pair (three tries)."""

EVAL_JUDGE = JudgeRole("eval_judge_")
"""The win-rate judge during training (`trainers.judge_eval`, `EvalJudgeFields`)."""

RUBRIC_GENERATOR = JudgeRole("", names=tuple(name for name in SETTINGS if name not in ("seed", *_FREE_FORM)))
"""The rubric and rationale generator (`trl-rankreward rubrics`, `GeneratorServerFields`)."""


def build_backend(settings: JudgeServerSettings):
    """`OpenAICompatibleBackend` over the settings' servers, checked now (they answer and serve the model)."""
    from .backends.openai_compatible import OpenAICompatibleBackend

    return OpenAICompatibleBackend(settings.base_urls, settings.model, **settings.server_options())


def build_judge(settings: JudgeServerSettings, *, embedded_without_urls: bool = False):
    """The judge the settings describe: an `LLMJudge` over their servers, checked now (a server that does
    not answer, or does not serve the model, raises `BackendError` naming the URL, the model and what
    is served). Without URLs: the offline `EmbeddingJudge` where the caller allows it (the training
    judge does), else a `ValueError`."""
    from .rendering import JudgeTemplates

    templates = JudgeTemplates.from_yaml(settings.templates) if settings.templates else None
    if not settings.base_urls:
        if not embedded_without_urls:
            raise ValueError(f"{settings.prefix}base_urls is empty; give the URL(s) of the server(s)")
        from .quality_judge import EmbeddingJudge

        return EmbeddingJudge(settings.model, seed=settings.seed, templates=templates)
    from .llm_judge import LLMJudge

    return LLMJudge(
        build_backend(settings),
        templates,
        seed=settings.seed,
        retry=settings.retry_policy(),
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
        structured_output=settings.structured_output,
    )


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
