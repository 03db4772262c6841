"""`trl-rankreward eval-genrm`: the rationale-aware GenRM benchmark (R-Align Sec. 3.3).

Examples:
    # GenRM and MetaRM behind OpenAI-compatible servers (e.g. vLLM)
    trl-rankreward eval-genrm --data rb2_with_rationales/ \\
        --genrm-base-urls http://localhost:8000/v1 --genrm-model my-genrm \\
        --metarm-base-urls http://localhost:8001/v1 --metarm-model openai/gpt-oss-120b \\
        --output genrm_eval.json
    # a local GenRM checkpoint, label accuracy only
    trl-rankreward eval-genrm --data pairs.jsonl --genrm-local ./genrm-ckpt --no-metarm --output out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

HELP = "Rationale-aware GenRM benchmark: L-Acc, S-Corr, F-Score per dataset with denominators"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="pairwise set with golden rationales (file, folder or Hub id)")
    parser.add_argument("--split", default="train", help="split to read from a Hub id or files")
    parser.add_argument("--limit", type=int, default=None, help="evaluate only the first N pairs")
    parser.add_argument("--output", required=True, help="JSON file for metrics and per-pair records")
    genrm = parser.add_argument_group("GenRM (one of: server or local)")
    genrm.add_argument("--genrm-base-urls", nargs="+", default=None, help="OpenAI-compatible base URL(s)")
    genrm.add_argument("--genrm-model", default=None, help="model name the GenRM server expects")
    genrm.add_argument("--genrm-api-key-env", default="OPENAI_API_KEY")
    genrm.add_argument("--genrm-local", default=None, help="local model path, run in-process (TransformersBackend)")
    meta = parser.add_argument_group("MetaRM")
    meta.add_argument("--metarm-base-urls", nargs="+", default=None, help="OpenAI-compatible base URL(s)")
    meta.add_argument("--metarm-model", default=None, help="e.g. openai/gpt-oss-120b (the paper: Gemini-3-Pro)")
    meta.add_argument("--metarm-api-key-env", default="OPENAI_API_KEY")
    meta.add_argument("--no-metarm", action="store_true", help="skip meta-judging: L-Acc only")
    parser.add_argument("--seed", type=int, default=0, help="seed of the A/B display order")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-tokens", type=int, default=4096, help="GenRM completion token limit")
    parser.add_argument("--concurrency", type=int, default=32, help="concurrent GenRM requests")


def make_genrm_backend(args):
    """The GenRM's chat backend from the arguments."""
    if bool(args.genrm_base_urls) == bool(args.genrm_local):
        raise SystemExit("Give exactly one GenRM: --genrm-base-urls with --genrm-model, or --genrm-local PATH")
    if args.genrm_local:
        from ..judging.backends.transformers_backend import TransformersBackend

        return TransformersBackend(args.genrm_local)
    if not args.genrm_model:
        raise SystemExit("--genrm-base-urls needs --genrm-model (the name the server serves)")
    from ..judging.backends.openai_compatible import OpenAICompatibleBackend

    return OpenAICompatibleBackend(args.genrm_base_urls, args.genrm_model, api_key_env=args.genrm_api_key_env)


def make_meta_judge(args):
    """An `LLMJudge` over the MetaRM server, or None with --no-metarm."""
    if args.no_metarm:
        return None
    if not (args.metarm_base_urls and args.metarm_model):
        raise SystemExit("Give --metarm-base-urls and --metarm-model, or --no-metarm for L-Acc only")
    from ..judging.backends.openai_compatible import OpenAICompatibleBackend
    from ..judging.llm_judge import LLMJudge

    backend = OpenAICompatibleBackend(args.metarm_base_urls, args.metarm_model, api_key_env=args.metarm_api_key_env)
    return LLMJudge(backend, seed=args.seed)


def run(args: argparse.Namespace) -> int:
    from ..data.sources import load_source
    from ..evaluation.genrm_eval import evaluate_genrm
    from ..evaluation.genrm_metrics import format_table

    rows = load_source(args.data, split=args.split)
    if args.limit is not None:
        rows = rows.select(range(min(args.limit, len(rows))))
    backend, meta_judge = make_genrm_backend(args), make_meta_judge(args)
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
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    print(f"wrote {output}")
    return 0
