"""`trl-rankreward rubrics generate|rationales`: offline generation through an OpenAI-compatible server.

Resumable: a rerun skips finished ids. Exit status 1 when some ids still failed (see the failures JSONL)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..judging.server_settings import RUBRIC_GENERATOR, GeneratorServerFields, build_backend

HELP = "Generate query-specific rubrics or R-Align golden rationales with an LLM (resumable)"
CONFIG_FILE = True


@dataclass
class GenerationArguments(GeneratorServerFields):
    """The dataset, the server (`judging.server_settings.RUBRIC_GENERATOR`, no prefix) and the request settings."""

    dataset_name: str = field(metadata={"help": "prepared dataset: save_to_disk folder, file or Hub id"})
    output_file: str = field(metadata={"help": "results JSONL (appended; a rerun resumes)"})
    dataset_split: str = field(default="train", metadata={"help": "split when the dataset is a Hub id or files"})
    failures_file: str | None = field(
        default=None, metadata={"help": "failures JSONL (default: OUTPUT_FILE with .failures before .jsonl)"}
    )
    json_mode: bool = field(default=False, metadata={"help": 'send response_format={"type": "json_object"}'})


@dataclass
class RubricTemplateArguments:
    template: str = field(
        default="rankbuffer",
        metadata={
            "help": "'rankbuffer' (seven Nectar answers, weights 1-5), 'matrixreward' (four scored answers, "
            "weights 1-3), or a YAML/.py file overriding one of them"
        },
    )


@dataclass
class RationaleTemplateArguments:
    label_template: str = field(default="label", metadata={"help": "template for label-only pairs (or a file)"})
    review_template: str = field(default="meta_review", metadata={"help": "template for reviewed pairs (or a file)"})


def arguments():
    return {
        "generate": (
            "3-5 weighted rubrics per query (RankBuffer App. D / MatrixReward A.1)",
            (GenerationArguments, RubricTemplateArguments),
        ),
        "rationales": (
            "golden rationales for a pairwise preference dataset (R-Align)",
            (GenerationArguments, RationaleTemplateArguments),
        ),
    }


def make_backend(args: GenerationArguments):
    return build_backend(RUBRIC_GENERATOR.settings(args))


def run(command: str, args: GenerationArguments, templates_args) -> int:
    from ..data import load_source
    from ..rubrics import RUBRIC_TEMPLATES, load_template

    dataset = load_source(args.dataset_name, split=args.dataset_split)
    options = dict(
        failures_path=args.failures_file,
        max_concurrency=args.max_concurrency,
        max_attempts=args.max_attempts,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        response_format={"type": "json_object"} if args.json_mode else None,
    )
    backend = make_backend(args)
    if command == "generate":
        from ..rubrics.generate import generate_rubrics

        template = load_template(templates_args.template, RUBRIC_TEMPLATES)
        summary = generate_rubrics(dataset, backend, args.output_file, template=template, **options)
    else:
        from ..rubrics.rationales import RATIONALE_TEMPLATES, generate_rationales

        summary = generate_rationales(
            dataset, backend, args.output_file,
            label_template=load_template(templates_args.label_template, RATIONALE_TEMPLATES),
            review_template=load_template(templates_args.review_template, RATIONALE_TEMPLATES),
            **options,
        )  # fmt: skip
    print(summary)
    return 1 if summary.failed else 0
