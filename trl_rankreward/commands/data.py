"""`trl-rankreward data SOURCE ...`: build the papers' datasets from upstream data.

trl-rankreward data nectar --output_dir data/nectar-1k                # 1,000 queries, seed 42
trl-rankreward data ultrafeedback --output_dir data/uf-2560           # 2,560 queries
trl-rankreward data helpsteer3 --split validation --output_dir data/hs3-val
trl-rankreward data attach-rubrics data/nectar-1k rubrics.jsonl --output_dir data/nectar-1k-rubrics
"""

from __future__ import annotations

import argparse

HELP = "Prepare Nectar / UltraFeedback / preference datasets, or join generated rubrics or rationales into one"

# name -> (default Hub id, its config, default split, prepare function name, count option, default count)
SOURCES = {
    "nectar": ("berkeley-nest/Nectar", None, "train", "prepare_nectar", "num_queries", 1000),
    "ultrafeedback": ("openbmb/UltraFeedback", None, "train", "prepare_ultrafeedback", "num_queries", 2560),
    "helpsteer3": ("nvidia/HelpSteer3", "preference", "train", "prepare_helpsteer3", "num_pairs", None),
    "rewardbench2": ("allenai/reward-bench-2", None, "test", "prepare_rewardbench2", "num_pairs", None),
    "ppe": ("lmarena-ai/PPE-Human-Preference-V1", None, "test", "prepare_ppe", "num_pairs", None),
}
_JOINS = {"attach-rubrics": "attach_rubrics", "attach-rationales": "attach_rationales"}


def _add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output_dir", help="save_to_disk folder for the result")
    parser.add_argument("--push_to_hub", metavar="REPO", help="also (or only) push the result to this Hub dataset repo")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_command", metavar="SOURCE", required=True)
    for name, (hub_id, config, split, _, count, default) in SOURCES.items():
        p = sub.add_parser(name, help=f"{hub_id} in the upstream schema -> prepared dataset")
        p.add_argument("--source", default=hub_id, help=f"Hub id or local JSONL/parquet file/folder (default {hub_id})")
        p.add_argument("--split", default=split, help=f"split to read (default {split})")
        p.add_argument(
            "--config", default=config, help=f"Hub dataset config (default {config}; ignored for local files)"
        )
        p.add_argument("--seed", type=int, default=42, help="sampling seed (default 42, as in the papers)")
        p.add_argument(
            f"--{count}", type=lambda v: None if v == "all" else int(v), default=default,
            help=f"how many to sample ('all' for every eligible row; default {default or 'all'})",
        )  # fmt: skip
        if count == "num_queries":
            p.add_argument("--rubrics", help="rubric JSONL (from `rubrics generate`) to join into the result")
        _add_output(p)
    for name in _JOINS:
        p = sub.add_parser(name, help=f"join a generated JSONL into a prepared dataset ({name.split('-')[1]})")
        p.add_argument("dataset", help="prepared dataset (save_to_disk folder or Hub id)")
        p.add_argument("jsonl", help="results JSONL written by `trl-rankreward rubrics ...`")
        p.add_argument("--missing", choices=("error", "drop", "keep"), default="error", help="rows with no result")
        _add_output(p)


def run(args: argparse.Namespace) -> int:
    from .. import data

    if not args.output_dir and not args.push_to_hub:
        raise SystemExit("Give --output_dir, --push_to_hub REPO, or both: the result has to go somewhere")
    if args.data_command in _JOINS:
        dataset = getattr(data, _JOINS[args.data_command])(
            data.load_source(args.dataset), args.jsonl, missing=args.missing
        )
    else:
        *_, function, count, _ = SOURCES[args.data_command]
        source = data.load_source(args.source, split=args.split, config=args.config)
        dataset, report = getattr(data, function)(source, **{count: getattr(args, count)}, seed=args.seed)
        print(f"{args.data_command}: {report}")
        if getattr(args, "rubrics", None):
            dataset = data.attach_rubrics(dataset, args.rubrics)
    data.save_dataset(dataset, args.output_dir, args.push_to_hub)
    print(f"wrote {len(dataset)} rows with columns {dataset.column_names} to {args.output_dir or args.push_to_hub}")
    return 0
