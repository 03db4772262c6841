"""Judge-server settings: one dataclass, used with a flag prefix wherever a judge server is configured.

A judge server is configured in five roles: the training judge (`judge_*` fields of
`JudgeRewardGRPOConfig`, a GenRM too in `examples/train_genrm_rlhf.py`), the evaluation judge
(`eval_judge_*`, the win rate during training), R-Align's MetaRM
(`metarm_*`, in `RAlignGenRMConfig` and in `trl-rankreward eval-genrm` alike), the GenRM under
evaluation (`genrm_*`, `eval-genrm`) and the rubric and rationale generator
(`trl-rankreward rubrics`, no prefix). Each role is a `JudgeRole` below: its prefix, the settings
it exposes and its defaults, declared once.

`role.fields()` turns a role into a dataclass of flat prefixed fields (`metarm_max_tokens`), a
mixin of TRL configs and an argument group of the commands alike, so YAML configs and flags keep
their names; `role.settings(config)` reads them back as `JudgeServerSettings`; `build_judge` and
`build_backend` turn those into a judge or a chat backend.

Example:
    settings = JudgeServerSettings(base_urls=["http://localhost:8000/v1"], model="Qwen/Qwen3-8B")
    judge = build_judge(settings)  # an LLMJudge; the server is checked now
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .retry import RetryPolicy

#: a role default meaning "no default: the flag is required"
REQUIRED = dataclasses.MISSING


@dataclass(frozen=True)
class JudgeServerSettings:
    """How to reach a judge server and decode with it. Help texts name the role (`{what}`) and the
    other flags (`{prefix}model`) as `JudgeRole.fields` fills them in."""

    base_urls: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Base URL(s) of OpenAI-compatible {what} servers, e.g. http://localhost:8000/v1; several URLs "
            "share the load."
        },
    )
    model: str | None = field(
        default=None, metadata={"help": "Model name served at {prefix}base_urls (required with them)."}
    )
    api_key_env: str = field(
        default="OPENAI_API_KEY", metadata={"help": "Environment variable holding the {what} server's API key."}
    )
    max_concurrency: int = field(default=64, metadata={"help": "Most {what} requests in flight at once."})
    max_concurrency_per_replica: int | None = field(
        default=None,
        metadata={
            "help": "Most {what} requests in flight at once on one of {prefix}base_urls (None: {prefix}max_concurrency). "
            "Each request goes to the replica with the fewest in flight; set this to a replica's batch size "
            "(vLLM's --max-num-seqs) so that a slow replica's queue stays with the client, where a faster one can "
            "take it."
        },
    )
    max_model_len: int | None = field(
        default=None,
        metadata={
            "help": "The {what}'s context window in tokens, prompt and answer together, for servers that do not list "
            "max_model_len at /models (vLLM does). Prompts are fitted to it: shown texts are cut to an equal share "
            "when they would not fit (docs/judging.md). None: the listed window, or none."
        },
    )
    timeout_s: float = field(default=120.0, metadata={"help": "Timeout of one {what} HTTP request, in seconds."})
    max_attempts: int = field(
        default=3,
        metadata={
            "help": "HTTP requests per {what} request in all: an invalid answer is asked again at once; a timeout, "
            "transport error, malformed response, 408, 429 or 5xx after exponential backoff with jitter (or the "
            "server's Retry-After)."
        },
    )
    require_listed_model: bool = field(
        default=True,
        metadata={
            "help": "At start, {prefix}model must be among the models each {what} server lists at /models (else "
            "nothing starts). Turn off for gateways that route models they do not list."
        },
    )
    max_tokens: int | None = field(
        default=1024,
        metadata={"help": "Most tokens the {what} may generate per call (its answer, and reasoning if any)."},
    )
    temperature: float | None = field(default=0.0, metadata={"help": "Sampling temperature of the {what}."})
    templates: str | None = field(
        default=None,
        metadata={"help": "YAML file overriding the {what}'s prompt templates (keys as in docs/judging.md)."},
    )
    seed: int = field(default=0, metadata={"help": "Seed of the {what}'s display-order shuffles."})
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
        return RetryPolicy(max_attempts=self.max_attempts)


_DECLARED = {f.name: f for f in dataclasses.fields(JudgeServerSettings) if f.name != "prefix"}
SETTINGS = tuple(_DECLARED)


@dataclass(frozen=True)
class JudgeRole:
    """One place a judge server is configured: its flag prefix, its settings and their defaults.

    Args:
        prefix: of every field and flag (`"metarm_"` -> `metarm_model`).
        what: the server's name in help texts ("judge", "MetaRM").
        names: the settings the role exposes, in order; the others keep `JudgeServerSettings`' defaults.
        defaults: the role's own defaults (`REQUIRED`: a required flag).
        notes: a sentence appended to a setting's help, where the role adds to it.
    """

    prefix: str
    what: str
    names: tuple[str, ...] = SETTINGS
    defaults: Mapping[str, Any] = field(default_factory=dict)
    notes: Mapping[str, str] = field(default_factory=dict)

    def default(self, name: str) -> Any:
        if name in self.defaults:
            return self.defaults[name]
        declared = _DECLARED[name]
        return declared.default_factory() if declared.default is dataclasses.MISSING else declared.default

    def help(self, name: str) -> str:
        text = _DECLARED[name].metadata["help"].format(what=self.what, prefix=self.prefix)
        return f"{text} {self.notes[name]}" if name in self.notes else text

    def fields(self) -> type:
        """A dataclass with one field per setting (`<prefix><name>`, TRL's field style), to inherit
        from; its `__post_init__` runs the other bases' first, then checks the settings and writes
        back the URLs as a list (a comma-separated string is split)."""
        hints = typing.get_type_hints(JudgeServerSettings)
        spec = []
        for name in self.names:
            default, metadata = self.default(name), {"help": self.help(name)}
            if isinstance(default, list):
                declared = field(default_factory=lambda d=default: list(d), metadata=metadata)
            else:
                declared = field(default=default, metadata=metadata)
            spec.append((self.prefix + name, hints[name], declared))
        role = self

        def __post_init__(config):
            parent = getattr(super(generated, config), "__post_init__", None)
            if parent is not None:
                parent()
            setattr(config, role.prefix + "base_urls", role.settings(config).base_urls)

        name = "".join(part.capitalize() for part in self.prefix.split("_")) + "ServerFields"
        generated = dataclasses.make_dataclass(name, spec, namespace={"__post_init__": __post_init__}, kw_only=True)
        generated.__module__ = __name__
        generated.__doc__ = f"The {self.what} server's settings as `{self.prefix}*` fields (`judging.server_settings`)."
        return generated

    def settings(self, config) -> JudgeServerSettings:
        """The role's settings read from `config`'s prefixed fields (checked, named by their flags)."""
        values = {name: getattr(config, self.prefix + name) for name in self.names}
        return JudgeServerSettings(**values, prefix=self.prefix)


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
"""The judge of `JudgeRewardGRPOTrainer` (and its subclasses)."""

METARM = JudgeRole(
    "metarm_",
    "MetaRM",
    names=tuple(name for name in SETTINGS if name != "seed"),  # the meta prompt shows A and B as given
    defaults={"temperature": 0.4, "max_tokens": 16384},
    notes={
        "max_concurrency": "In training: per process (each meta-judges its own samples).",
        "temperature": "The R-Align authors' release: 0.4.",
        "max_tokens": "The R-Align authors' release: 16K.",
        "templates": "Key `meta`; answers may be our JSON or the authors' "
        "<final_verdict>Correct|Incorrect</final_verdict>.",
    },
)
"""R-Align's MetaRM, in training (`RAlignGenRMConfig`) and in `eval-genrm` alike. Decoding follows the
authors' public MetaRM script (github.com/lyn22333/R-Align, `metarm_judge.py`; the paper is silent)."""

GENRM = JudgeRole(
    "genrm_",
    "GenRM",
    names=tuple(name for name in SETTINGS if name not in ("max_attempts", "templates")),
    defaults={"max_concurrency": 32, "max_tokens": 4096},
    notes={"seed": "It decides which response the GenRM sees as A."},
)
"""The GenRM under evaluation (`eval-genrm`): its own prompt, asked once per pair (three tries)."""

EVAL_JUDGE = JudgeRole(
    "eval_judge_",
    "evaluation judge",
    notes={
        "base_urls": "Empty: the training judge's settings (judge_*), as a separate judge with its own ledger, so "
        "evaluation calls never count toward the training judge's cost.",
        "max_concurrency": "Only the main process judges the evaluation.",
    },
)
"""The judge of the win-rate evaluation during training (`trainers.judge_eval`): fixed for the whole run,
it compares the policy's answers with baseline answers (docs/evaluation.md)."""

RUBRIC_GENERATOR = JudgeRole(
    "",
    "generator",
    names=tuple(name for name in SETTINGS if name not in ("templates", "seed")),
    defaults={"base_urls": REQUIRED, "model": REQUIRED, "max_concurrency": 32, "temperature": None, "max_tokens": None},
    notes={"temperature": "None: the template's.", "max_tokens": "None: the template's."},
)
"""The rubric and rationale generator (`trl-rankreward rubrics`): its template sets the decoding."""


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
    )
