"""`trl-rankreward eval-genrm`: the rationale-aware GenRM benchmark (R-Align Sec. 3.3; docs/ralign.md).

The GenRM's and the MetaRM's settings are the judge-server settings prefixed `genrm_` and `metarm_`; the
MetaRM decodes as in training (`RAlignGenRMConfig`'s defaults). `--r_align_release DIR` (a checkout of
github.com/lyn22333/R-Align) follows the authors' release in every step (`rewards.ralign_release`)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..judging.server_settings import GENRM, METARM, GenRMFields, MetaRMFields, build_backend
from ..user_errors import UsageError

HELP = "Rationale-aware GenRM benchmark: L-Acc, S-Corr, F-Score per dataset with denominators"
CONFIG_FILE = True


@dataclass
class EvalGenRMArguments:
    dataset_name: str = field(metadata={"help": "pairwise set with golden rationales (file, folder or Hub id)"})
    output_file: str = field(metadata={"help": "JSON file for metrics and per-pair records"})
    dataset_split: str = field(default="train", metadata={"help": "split to read from a Hub id or files"})
    limit: int | None = field(default=None, metadata={"help": "evaluate only the first N pairs"})
    r_align_release: str | None = field(
        default=None,
        metadata={
            "help": "checkout of github.com/lyn22333/R-Align: prompt, layout, verdict and MetaRM parse as the "
            "authors released them (prompts read from their scripts); default: ours",
            "metavar": "DIR",
        },
    )


@dataclass
class GenRMArguments(GenRMFields):
    _argument_group_name = "GenRM (one of: server or local)"

    genrm_local: str | None = field(
        default=None, metadata={"help": "local model path, run in-process (TransformersBackend)"}
    )


@dataclass
class MetaRMArguments(MetaRMFields):
    _argument_group_name = "MetaRM"

    no_metarm: bool = field(default=False, metadata={"help": "skip meta-judging: L-Acc only"})


def arguments():
    return (EvalGenRMArguments, GenRMArguments, MetaRMArguments)


def make_genrm_backend(args: GenRMArguments):
    settings = GENRM.settings(args)
    if bool(settings.base_urls) == bool(args.genrm_local):
        raise UsageError("give exactly one GenRM: --genrm_base_urls with --genrm_model, or --genrm_local PATH")
    if args.genrm_local:
        from ..judging.backends.transformers_backend import TransformersBackend

        return TransformersBackend(args.genrm_local)
    return build_backend(settings)


def make_meta_judge(args: MetaRMArguments, release=None):
    """The MetaRM over its server (the authors' prompt and parse with `release`), or None with --no_metarm."""
    if args.no_metarm:
        return None
    if not args.metarm_base_urls:
        raise UsageError("give --metarm_base_urls and --metarm_model, or --no_metarm for L-Acc only")
    from ..rewards.ralign_release import build_meta_judge

    return build_meta_judge(METARM.settings(args), release)


def run(args: EvalGenRMArguments, genrm: GenRMArguments, metarm: MetaRMArguments) -> int:
    from ..data.sources import load_source
    from ..evaluation.genrm_eval import NothingJudgedError, evaluate_genrm, format_table
    from ..rewards.ralign_release import RAlignRelease
    from ..rewards.ralign_reward import OWN_PROTOCOL

    rows = load_source(args.dataset_name, split=args.dataset_split)  # a bad file fails before any server is asked
    if args.limit is not None:
        rows = rows.select(range(min(args.limit, len(rows))))
    release = RAlignRelease.load(args.r_align_release) if args.r_align_release else None
    backend, meta_judge = make_genrm_backend(genrm), make_meta_judge(metarm, release)
    decoding = GENRM.settings(genrm)
    report = asyncio.run(
        evaluate_genrm(
            rows,
            backend,
            meta_judge,
            seed=decoding.seed,
            temperature=decoding.temperature,
            max_tokens=decoding.max_tokens,
            concurrency=decoding.max_concurrency,
            protocol=release or OWN_PROTOCOL,
        )
    )
    print(format_table(report.metrics))
    window = report.window
    if any(window.values()):
        print(
            f"GenRM window: {window['truncated_requests']} prompt(s) cut to fit ({window['truncated_chars']:,} "
            f"characters), {window['too_long']} pair(s) too long to send, {window['context_refusals']} refused "
            "by the server as over its window"
        )
    output = Path(args.output_file)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    print(f"wrote {output}")
    failure = report.total_failure()
    if failure:  # a score over nothing is no score: exit 1, with the reason the records hold
        raise NothingJudgedError(f"{failure}; no score was measured (the records: {output}). Check the server's URL, "
                                 "model name and credentials, then run again")  # fmt: skip
    return 0
