"""`trl-rankreward eval-genrm`: the rationale-aware GenRM benchmark (R-Align Sec. 3.3).

Examples:
    # GenRM and MetaRM behind OpenAI-compatible servers (e.g. vLLM)
    trl-rankreward eval-genrm --dataset_name rb2_with_rationales/ \\
        --genrm_base_urls http://localhost:8000/v1 --genrm_model my-genrm \\
        --metarm_base_urls http://localhost:8001/v1 --metarm_model openai/gpt-oss-120b \\
        --output_file genrm_eval.json
    # a local GenRM checkpoint, label accuracy only
    trl-rankreward eval-genrm --dataset_name pairs.jsonl --genrm_local ./genrm-ckpt --no_metarm --output_file out.json
    # the options in a YAML file (keys as the flags), flags on the command line win
    trl-rankreward eval-genrm --config eval.yaml --limit 100
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path

from . import UsageError

HELP = "Rationale-aware GenRM benchmark: L-Acc, S-Corr, F-Score per dataset with denominators"
CONFIG_FILE = True


@dataclass
class EvalGenRMArguments:
    dataset_name: str = field(
        metadata={"help": "pairwise set with golden rationales (file, folder or Hub id)", "aliases": ["--data"]}
    )
    output_file: str = field(metadata={"help": "JSON file for metrics and per-pair records", "aliases": ["--output"]})
    dataset_split: str = field(
        default="train", metadata={"help": "split to read from a Hub id or files", "aliases": ["--split"]}
    )
    limit: int | None = field(default=None, metadata={"help": "evaluate only the first N pairs"})
    seed: int = field(default=0, metadata={"help": "seed of the A/B display order"})
    temperature: float = field(default=0.0, metadata={"help": "GenRM sampling temperature"})
    max_tokens: int = field(default=4096, metadata={"help": "GenRM completion token limit"})
    concurrency: int = field(default=32, metadata={"help": "concurrent GenRM requests"})


@dataclass
class GenRMArguments:
    _argument_group_name = "GenRM (one of: server or local)"

    genrm_base_urls: list[str] | None = field(default=None, metadata={"help": "OpenAI-compatible base URL(s)"})
    genrm_model: str | None = field(default=None, metadata={"help": "model name the GenRM server expects"})
    genrm_api_key_env: str = field(default="OPENAI_API_KEY", metadata={"help": "environment variable of the API key"})
    genrm_local: str | None = field(
        default=None, metadata={"help": "local model path, run in-process (TransformersBackend)"}
    )


@dataclass
class MetaRMArguments:
    _argument_group_name = "MetaRM"

    metarm_base_urls: list[str] | None = field(default=None, metadata={"help": "OpenAI-compatible base URL(s)"})
    metarm_model: str | None = field(
        default=None, metadata={"help": "e.g. openai/gpt-oss-120b (the paper: Gemini-3-Pro)"}
    )
    metarm_api_key_env: str = field(default="OPENAI_API_KEY", metadata={"help": "environment variable of the API key"})
    no_metarm: bool = field(default=False, metadata={"help": "skip meta-judging: L-Acc only"})


def arguments():
    return (EvalGenRMArguments, GenRMArguments, MetaRMArguments)


def make_genrm_backend(args: GenRMArguments):
    """The GenRM's chat backend from the arguments."""
    if bool(args.genrm_base_urls) == bool(args.genrm_local):
        raise UsageError("give exactly one GenRM: --genrm_base_urls with --genrm_model, or --genrm_local PATH")
    if args.genrm_local:
        from ..judging.backends.transformers_backend import TransformersBackend

        return TransformersBackend(args.genrm_local)
    if not args.genrm_model:
        raise UsageError("--genrm_base_urls needs --genrm_model (the name the server serves)")
    from ..judging.backends.openai_compatible import OpenAICompatibleBackend

    return OpenAICompatibleBackend(args.genrm_base_urls, args.genrm_model, api_key_env=args.genrm_api_key_env)


def make_meta_judge(args: MetaRMArguments, seed: int = 0):
    """An `LLMJudge` over the MetaRM server, or None with --no_metarm."""
    if args.no_metarm:
        return None
    if not (args.metarm_base_urls and args.metarm_model):
        raise UsageError("give --metarm_base_urls and --metarm_model, or --no_metarm for L-Acc only")
    from ..judging.backends.openai_compatible import OpenAICompatibleBackend
    from ..judging.llm_judge import LLMJudge

    backend = OpenAICompatibleBackend(args.metarm_base_urls, args.metarm_model, api_key_env=args.metarm_api_key_env)
    return LLMJudge(backend, seed=seed)


def run(args: EvalGenRMArguments, genrm: GenRMArguments, metarm: MetaRMArguments) -> int:
    backend, meta_judge = make_genrm_backend(genrm), make_meta_judge(metarm, seed=args.seed)
    from ..data.sources import load_source
    from ..evaluation.genrm_eval import evaluate_genrm
    from ..evaluation.genrm_metrics import format_table

    rows = load_source(args.dataset_name, split=args.dataset_split)
    if args.limit is not None:
        rows = rows.select(range(min(args.limit, len(rows))))
    report = asyncio.run(
        evaluate_genrm(
            rows,
            backend,
            meta_judge,
            seed=args.seed,
            temperature=args.temperature,
            max_tokens=args.max_tokens,
            concurrency=args.concurrency,
        )
    )
    print(format_table(report.metrics))
    output = Path(args.output_file)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    print(f"wrote {output}")
    return 0
