"""The servers of two commands as argument fields, written out: `GenRMFields` (`genrm_*`, the GenRM
under evaluation in `trl-rankreward eval-genrm`) and `GeneratorServerFields` (no prefix, the rubric
and rationale generator of `trl-rankreward rubrics`, whose template sets the decoding).

The settings' checks, and the defaults the roles share, live in `server_settings.JudgeServerSettings`; `server_settings.GENRM`
and `server_settings.RUBRIC_GENERATOR` read the fields back as checked settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .backends.base import GENRM_MAX_TOKENS
from .server_settings import JudgeServerSettings


@dataclass(kw_only=True)
class GenRMFields:
    """The GenRM server's settings as `genrm_*` fields; `GENRM.settings(config)` checks them."""

    genrm_base_urls: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Base URL(s) of OpenAI-compatible GenRM servers, e.g. http://localhost:8000/v1; several URLs "
            "share the load."
        },
    )
    genrm_model: str | None = field(
        default=JudgeServerSettings.model,
        metadata={"help": "Model name served at genrm_base_urls (required with them)."},
    )
    genrm_api_key_env: str = field(
        default=JudgeServerSettings.api_key_env,
        metadata={"help": "Environment variable holding the GenRM server's API key."},
    )
    genrm_max_concurrency: int = field(default=32, metadata={"help": "Most GenRM requests in flight at once."})
    genrm_max_concurrency_per_replica: int | None = field(
        default=JudgeServerSettings.max_concurrency_per_replica,
        metadata={
            "help": "Most GenRM requests in flight at once on one of genrm_base_urls (None: genrm_max_concurrency). "
            "Each request goes to the replica with the fewest in flight; set this to a replica's batch size "
            "(vLLM's --max-num-seqs) so that a slow replica's queue stays with the client, where a faster one "
            "can take it."
        },
    )
    genrm_max_model_len: int | None = field(
        default=JudgeServerSettings.max_model_len,
        metadata={
            "help": "The GenRM's context window in tokens, prompt and answer together, for servers that do not list "
            "max_model_len at /models (vLLM does). Prompts are fitted to it: shown texts are cut to an equal "
            "share when they would not fit (docs/judging.md). None: the listed window, or none."
        },
    )
    genrm_timeout_s: float = field(
        default=JudgeServerSettings.timeout_s, metadata={"help": "Timeout of one GenRM HTTP request, in seconds."}
    )
    genrm_require_listed_model: bool = field(
        default=JudgeServerSettings.require_listed_model,
        metadata={
            "help": "At start, genrm_model must be among the models each GenRM server lists at /models (else nothing "
            "starts). Turn off for gateways that route models they do not list."
        },
    )
    genrm_max_tokens: int | None = field(
        default=GENRM_MAX_TOKENS,
        metadata={"help": "Most tokens the GenRM may generate per call (its answer, and reasoning if any)."},
    )
    genrm_temperature: float | None = field(
        default=JudgeServerSettings.temperature,
        metadata={"help": "Sampling temperature of the GenRM."},
    )
    genrm_seed: int = field(
        default=JudgeServerSettings.seed,
        metadata={"help": "Seed of the GenRM's display-order shuffles. It decides which response the GenRM sees as A."},
    )


@dataclass(kw_only=True)
class GeneratorServerFields:
    """The generator server's settings as `*` fields; `RUBRIC_GENERATOR.settings(config)` checks them."""

    base_urls: list[str] = field(
        metadata={
            "help": "Base URL(s) of OpenAI-compatible generator servers, e.g. http://localhost:8000/v1; several URLs "
            "share the load."
        },
    )
    model: str = field(
        metadata={"help": "Model name served at base_urls (required with them)."},
    )
    api_key_env: str = field(
        default=JudgeServerSettings.api_key_env,
        metadata={"help": "Environment variable holding the generator server's API key."},
    )
    max_concurrency: int = field(default=32, metadata={"help": "Most generator requests in flight at once."})
    max_concurrency_per_replica: int | None = field(
        default=JudgeServerSettings.max_concurrency_per_replica,
        metadata={
            "help": "Most generator requests in flight at once on one of base_urls (None: max_concurrency). Each "
            "request goes to the replica with the fewest in flight; set this to a replica's batch size "
            "(vLLM's --max-num-seqs) so that a slow replica's queue stays with the client, where a faster one "
            "can take it."
        },
    )
    max_model_len: int | None = field(
        default=JudgeServerSettings.max_model_len,
        metadata={
            "help": "The generator's context window in tokens, prompt and answer together, for servers that do not "
            "list max_model_len at /models (vLLM does). Prompts are fitted to it: shown texts are cut to an "
            "equal share when they would not fit (docs/judging.md). None: the listed window, or none."
        },
    )
    timeout_s: float = field(
        default=JudgeServerSettings.timeout_s, metadata={"help": "Timeout of one generator HTTP request, in seconds."}
    )
    max_attempts: int = field(
        default=JudgeServerSettings.max_attempts,
        metadata={
            "help": "HTTP requests per generator request in all: an invalid answer is asked again at once; a timeout, "
            "transport error, malformed response, 408, 429 or 5xx after exponential backoff with jitter (or "
            "the server's Retry-After)."
        },
    )
    require_listed_model: bool = field(
        default=JudgeServerSettings.require_listed_model,
        metadata={
            "help": "At start, model must be among the models each generator server lists at /models (else nothing "
            "starts). Turn off for gateways that route models they do not list."
        },
    )
    max_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Most tokens the generator may generate per call (its answer, and reasoning if any). None: the "
            "template's."
        },
    )
    temperature: float | None = field(
        default=None,
        metadata={"help": "Sampling temperature of the generator. None: the template's."},
    )
