"""Judge-server settings: one dataclass, `JudgeServerSettings`, read from a role's prefixed fields.

Each place that configures a judge server is a role (`TRAINING_JUDGE`, `METARM`, ... below), whose
fields are written out in `server_fields` with `setting`. `role.settings(config)` reads them back as
checked `JudgeServerSettings`, `role.check(config)` also writes the URLs back as a list; `build_judge`
and `build_backend` turn those into a judge or a chat backend.

Example:
    settings = JudgeServerSettings(base_urls=["http://localhost:8000/v1"], model="Qwen/Qwen3-8B")
    judge = build_judge(settings)  # an LLMJudge; the server is checked now
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .backends.base import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    DEFAULT_TIMEOUT_S,
)
from .retry import RetryPolicy


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
    from .templates import JudgeTemplates

    templates = JudgeTemplates.from_yaml(settings.templates) if settings.templates else None
    if not settings.base_urls:
        if not embedded_without_urls:
            raise ValueError(f"{settings.prefix}base_urls is empty; give the URL(s) of the server(s)")
        from .embedding_judge import EmbeddingJudge

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
