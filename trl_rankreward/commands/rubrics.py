"""`trl-rankreward rubrics generate|rationales`: offline generation through an OpenAI-compatible server.

    trl-rankreward rubrics generate data/nectar-1k --output rubrics.jsonl \\
        --base_url http://localhost:8000/v1 --model deepseek-ai/DeepSeek-V4-Flash
    trl-rankreward rubrics rationales data/hs3 --output rationales.jsonl --base_url ... --model ...

Results are appended as they arrive; rerunning the same command skips finished ids. Exit
status 1 when some ids still failed after all attempts (listed in the failures JSONL).
"""

from __future__ import annotations

import argparse

HELP = "Generate query-specific rubrics or R-Align golden rationales with an LLM (resumable)"


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help="prepared dataset: save_to_disk folder, local file or Hub id")
    parser.add_argument("--split", default="train", help="split when the dataset is a Hub id or files")
    parser.add_argument("--output", required=True, help="results JSONL (appended; a rerun resumes)")
    parser.add_argument(
        "--failures", default=None, help="failures JSONL (default: OUTPUT with .failures before .jsonl)"
    )
    parser.add_argument("--base_url", action="append", required=True, help="OpenAI-compatible base URL (repeatable)")
    parser.add_argument("--model", required=True, help="model name the server serves")
    parser.add_argument("--api_key_env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    parser.add_argument("--max_concurrency", type=int, default=32, help="requests in flight at once")
    parser.add_argument("--max_attempts", type=int, default=3, help="tries per id (invalid answers and errors)")
    parser.add_argument("--temperature", type=float, default=None, help="override the template's temperature")
    parser.add_argument("--max_tokens", type=int, default=None, help="override the template's max output tokens")
    parser.add_argument("--json_mode", action="store_true", help='send response_format={"type": "json_object"}')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="rubrics_command", metavar="COMMAND", required=True)
    generate = sub.add_parser("generate", help="3-5 weighted rubrics per query (RankBuffer App. D / MatrixReward A.1)")
    _add_common(generate)
    generate.add_argument(
        "--template", default="rankbuffer",
        help="'rankbuffer' (seven Nectar answers, weights 1-5), 'matrixreward' (four scored answers, weights 1-3), "
        "or a YAML/.py file overriding one of them",
    )  # fmt: skip
    rationales = sub.add_parser("rationales", help="golden rationales for a pairwise preference dataset (R-Align)")
    _add_common(rationales)
    rationales.add_argument("--label_template", default="label", help="template for label-only pairs (or a file)")
    rationales.add_argument("--review_template", default="meta_review", help="template for reviewed pairs (or a file)")


def make_backend(args: argparse.Namespace):
    """The judging layer's OpenAI-compatible backend for `--base_url`/`--model`."""
    from ..judging import OpenAICompatibleBackend

    return OpenAICompatibleBackend(
        args.base_url, args.model, api_key_env=args.api_key_env, max_concurrency=args.max_concurrency
    )


def run(args: argparse.Namespace) -> int:
    from ..data import load_source
    from ..rubrics import templates

    dataset = load_source(args.dataset, split=args.split)
    options = dict(
        failures_path=args.failures,
        max_concurrency=args.max_concurrency,
        max_attempts=args.max_attempts,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        response_format={"type": "json_object"} if args.json_mode else None,
    )
    backend = make_backend(args)
    if args.rubrics_command == "generate":
        from ..rubrics.generate import generate_rubrics

        template = templates.load_template(args.template, templates.RUBRIC_TEMPLATES)
        summary = generate_rubrics(dataset, backend, args.output, template=template, **options)
    else:
        from ..rubrics.rationales import RATIONALE_TEMPLATES, generate_rationales

        summary = generate_rationales(
            dataset, backend, args.output,
            label_template=templates.load_template(args.label_template, RATIONALE_TEMPLATES),
            review_template=templates.load_template(args.review_template, RATIONALE_TEMPLATES),
            **options,
        )  # fmt: skip
    print(summary)
    return 1 if summary.failed else 0
