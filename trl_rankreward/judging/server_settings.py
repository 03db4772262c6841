"""Judge-server settings: one dataclass, `JudgeServerSettings`, and the config fields of every role.

Each setting, its default and its help (naming the role's `{server}` and flag prefix `{p}`) are declared once, in
`JudgeServerSettings`. A role (`TRAINING_JUDGE`, `EVAL_JUDGE`, `METARM`, `GENRM`, `RUBRIC_GENERATOR`) is a place
that configures a judge server: a prefix, the settings it exposes, its own defaults and notes. `role.fields(...)`
makes its config fields (mixins of a TRL config or a command's arguments, so YAML keys and flags are these names);
`role.settings(config)` reads them back as checked `JudgeServerSettings`, which `build_judge` and `build_backend`
turn into a judge or a chat backend.
"""

from __future__ import annotations

import dataclasses
import typing
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


def _setting(default: Any, help: str) -> Any:
    if isinstance(default, list):
        return field(default_factory=list, metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class JudgeServerSettings:
    """How to reach a judge server and decode with it: every setting, its default and its help template."""

    base_urls: list[str] = _setting(
        [], "Base URL(s) of the {server}'s OpenAI-compatible servers, e.g. http://localhost:8000/v1; several URLs "
        "share the load."
    )  # fmt: skip
    model: str | None = _setting(None, "Model name served at {p}base_urls (required with them).")
    api_key_env: str = _setting(DEFAULT_API_KEY_ENV, "Environment variable holding the {server} server's API key.")
    max_concurrency: int = _setting(DEFAULT_MAX_CONCURRENCY, "Most {server} requests in flight at once.")
    max_concurrency_per_replica: int | None = _setting(
        None, "Most {server} requests in flight at once on one of {p}base_urls (None: {p}max_concurrency). Each "
        "request goes to the replica with the fewest in flight; set this to a replica's batch size (vLLM's "
        "--max-num-seqs) so that a slow replica's queue stays with the client, where a faster one can take it."
    )  # fmt: skip
    max_model_len: int | None = _setting(
        None, "The {server}'s context window in tokens, prompt and answer together, for servers that do not list "
        "max_model_len at /models (vLLM does). Prompts are fitted to it: shown texts are cut to an equal share "
        "when they would not fit (docs/judging.md). None: the listed window, or none."
    )  # fmt: skip
    timeout_s: float = _setting(DEFAULT_TIMEOUT_S, "Timeout of one {server} HTTP request, in seconds.")
    max_attempts: int = _setting(
        RetryPolicy.max_attempts, "HTTP requests per {server} request in all: an invalid answer is asked again at "
        "once; a timeout, transport error, malformed response, 408, 429 or 5xx after exponential backoff with "
        "jitter (or the server's Retry-After)."
    )  # fmt: skip
    require_listed_model: bool = _setting(
        True, "At start, {p}model must be among the models each server lists at /models (else nothing starts). "
        "Turn off for gateways that route models they do not list."
    )  # fmt: skip
    max_tokens: int | None = _setting(
        DEFAULT_MAX_TOKENS, "Most tokens the {server} may generate per call (its answer, and reasoning if any)."
    )
    temperature: float | None = _setting(DEFAULT_TEMPERATURE, "Sampling temperature of the {server}.")
    structured_output: bool = _setting(
        True, "Ask the {server} server for structured output: each request carries its kind's JSON schema as "
        "response_format (vLLM and SGLang decode to it), so the answer is one verdict. A server that refuses "
        "response_format (HTTP 400 naming it) is asked without it from then on, with a logged note. Answers are "
        "validated either way; rationale-first prompts are never sent a schema."
    )  # fmt: skip
    templates: str | None = _setting(
        None, "YAML file overriding the {server}'s prompt templates (keys as in docs/judging.md)."
    )
    seed: int = _setting(0, "Seed of the {server}'s display-order shuffles and of its retry jitter.")
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

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(max_attempts=self.max_attempts, seed=self.seed)


SETTINGS = tuple(f.name for f in dataclasses.fields(JudgeServerSettings) if f.name != "prefix")
_TYPES = typing.get_type_hints(JudgeServerSettings)


@dataclass(frozen=True)
class JudgeRole:
    """One place a judge server is configured: the `prefix` of its fields and flags, what the help calls its
    `server`, the settings it exposes (`names`), its own `defaults` (`MISSING`: a required flag) and `notes` it adds
    to a setting's help."""

    prefix: str
    server: str
    names: tuple[str, ...] = SETTINGS
    defaults: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def settings(self, config) -> JudgeServerSettings:
        values = {name: getattr(config, self.prefix + name) for name in self.names}
        return JudgeServerSettings(**values, prefix=self.prefix)

    def check(self, config) -> None:
        """Checks `settings(config)` and writes the URLs back to `config` as a list (a comma-separated string split)."""
        setattr(config, self.prefix + "base_urls", self.settings(config).base_urls)

    def fields(self, class_name: str, doc: str) -> type:
        """The role's config fields: a keyword-only dataclass mixin, one field per exposed setting."""
        shared = {f.name: f for f in dataclasses.fields(JudgeServerSettings)}
        specs = []
        for name in self.names:
            default = self.defaults.get(name, shared[name].default)
            help = shared[name].metadata["help"].format(server=self.server, p=self.prefix)
            help = f"{help} {self.notes[name]}" if name in self.notes else help
            # a list: one per instance (unless the role overrides it: MISSING there is a required flag)
            factory = shared[name].default_factory if default is MISSING and name not in self.defaults else MISSING
            spec = field(default=default, default_factory=factory, metadata={"help": help})
            specs.append((self.prefix + name, _TYPES[name], spec))
        namespace = {"ROLE": self, "__doc__": doc, "__module__": __name__}
        cls = dataclasses.make_dataclass(class_name, specs, bases=(_RoleFields,), namespace=namespace, kw_only=True)
        cls.__annotations__["ROLE"] = ClassVar[JudgeRole]
        return cls


class _RoleFields:
    """Runs `ROLE.check` after the other bases' `__post_init__` (TRL's), so a bad value is refused when the config
    or the command's arguments are built."""

    ROLE: ClassVar[JudgeRole]

    def __post_init__(self):
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:
            parent()
        self.ROLE.check(self)


_FREE_FORM = ("templates", "structured_output")  # roles whose answers are not a request kind's JSON verdict

TRAINING_JUDGE = JudgeRole(
    "judge_",
    "judge",
    notes={
        "base_urls": "Empty: the embedded EmbeddingJudge.",
        "model": "With the embedded judge: an optional local sentence-transformers model path.",
        "timeout_s": "The other processes wait for the judging in a collective, so keep judge_max_attempts x "
        "judge_timeout_s (plus backoff) below ddp_timeout (a warning says so).",
        "templates": "The embedded judge uses them to count the tokens an LLM judge would read.",
    },
)
"""The judge of `JudgeRewardGRPOTrainer` and its subclasses (`TrainingJudgeFields`)."""

EVAL_JUDGE = JudgeRole(
    "eval_judge_",
    "evaluation judge",
    notes={
        "base_urls": "Empty: the training judge's settings (judge_*), as a separate judge with its own ledger, so "
        "evaluation calls never count toward the training judge's cost.",
        "max_concurrency": "Only the main process judges the evaluation.",
    },
)
"""The win-rate judge during training (`trainers.judge_eval`, `EvalJudgeFields`)."""

METARM = JudgeRole(
    "metarm_",
    "MetaRM",
    names=tuple(name for name in SETTINGS if name != "seed"),  # A and B are shown as given
    defaults={"max_tokens": 16384, "temperature": 0.4, "structured_output": False},
    notes={
        "max_concurrency": "In training: per process (each meta-judges its own samples).",
        "max_tokens": "The R-Align authors' release: 16K.",
        "temperature": "The R-Align authors' release: 0.4.",
        "structured_output": "Off by default: the R-Align authors' MetaRM answers in free form.",
        "templates": "Key `meta`; answers may be our JSON or the authors' "
        "<final_verdict>Correct|Incorrect</final_verdict>.",
    },
)
"""R-Align's MetaRM, in training and in `eval-genrm` alike (`MetaRMFields`)."""

GENRM = JudgeRole(
    "genrm_",
    "GenRM",
    names=tuple(name for name in SETTINGS if name not in ("max_attempts", *_FREE_FORM)),
    defaults={"max_concurrency": 32, "max_tokens": GENRM_MAX_TOKENS},
    notes={"seed": "It decides which response the GenRM sees as A."},
)
"""The GenRM under evaluation (`eval-genrm`, `GenRMFields`): asked once per pair (three tries)."""

RUBRIC_GENERATOR = JudgeRole(
    "",
    "generator",
    names=tuple(name for name in SETTINGS if name not in ("seed", *_FREE_FORM)),
    defaults={"base_urls": MISSING, "model": MISSING, "max_concurrency": 32, "max_tokens": None, "temperature": None},
    notes={"max_tokens": "None: the template's.", "temperature": "None: the template's."},
)
"""The rubric and rationale generator (`trl-rankreward rubrics`, `GeneratorServerFields`)."""


def build_backend(settings: JudgeServerSettings):
    """`OpenAICompatibleBackend` over the settings' servers, checked now."""
    from .backends.openai_compatible import OpenAICompatibleBackend

    options = ("api_key_env", "max_concurrency", "max_concurrency_per_replica", "max_model_len", "timeout_s",
               "require_listed_model")  # fmt: skip
    return OpenAICompatibleBackend(settings.base_urls, settings.model, **{k: getattr(settings, k) for k in options})


def build_judge(settings: JudgeServerSettings, *, embedded_without_urls: bool = False):
    """An `LLMJudge` over the settings' servers, checked now; without URLs, the offline `EmbeddingJudge` where the
    caller allows it (the training judge does), else a `ValueError`."""
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


TrainingJudgeFields = TRAINING_JUDGE.fields(
    "TrainingJudgeFields", "The training judge of `JudgeRewardGRPOConfig` (`judge_*`)."
)
EvalJudgeFields = EVAL_JUDGE.fields("EvalJudgeFields", "The win-rate judge of `JudgeEvalConfig` (`eval_judge_*`).")
MetaRMFields = METARM.fields("MetaRMFields", "R-Align's MetaRM in `RAlignGenRMConfig` and `eval-genrm` (`metarm_*`).")
GenRMFields = GENRM.fields("GenRMFields", "The GenRM under evaluation in `eval-genrm` (`genrm_*`).")
GeneratorServerFields = RUBRIC_GENERATOR.fields(
    "GeneratorServerFields", "The rubric and rationale generator of `trl-rankreward rubrics` (no prefix)."
)
