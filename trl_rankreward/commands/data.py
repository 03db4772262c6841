"""`trl-rankreward data SOURCE ...`: build the papers' datasets from upstream data (docs/data.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from ..user_errors import UsageError

HELP = "Prepare Nectar / UltraFeedback / preference datasets, or join generated rubrics or rationales into one"

# name -> (default Hub id, its config, default split, prepare function name, count option, default count)
SOURCES = {
    "nectar": ("berkeley-nest/Nectar", None, "train", "prepare_nectar", "num_queries", 1000),
    "ultrafeedback": ("openbmb/UltraFeedback", None, "train", "prepare_ultrafeedback", "num_queries", 2560),
    "helpsteer3": ("nvidia/HelpSteer3", "preference", "train", "prepare_helpsteer3", "num_pairs", None),
    "rewardbench2": ("allenai/reward-bench-2", None, "test", "prepare_rewardbench2", "num_pairs", None),
    "ppe": ("lmarena-ai/PPE-Human-Preference-V1", None, "test", "prepare_ppe", "num_pairs", None),
    "skywork": ("Skywork/Skywork-Reward-Preference-80K-v0.2", None, "train", "prepare_skywork", "num_pairs", None),
    "code-preference-pairs": (
        "Vezora/Code-Preference-Pairs",
        None,
        "train",
        "prepare_code_preference_pairs",
        "num_pairs",
        8000,
    ),
    "math-step-dpo": ("xinlai/Math-Step-DPO-10K", None, "train", "prepare_math_step_dpo", "num_pairs", None),
    "r-align": ("lyn22333/R-Align-BMK", None, "train", "prepare_ralign", "num_pairs", None),
}
_JOINS = {"attach-rubrics": "attach_rubrics", "attach-rationales": "attach_rationales"}


@dataclass
class OutputArguments:
    output_dir: str | None = field(default=None, metadata={"help": "save_to_disk folder for the result"})
    push_to_hub: str | None = field(
        default=None, metadata={"help": "also (or only) push the result to this Hub dataset repo", "metavar": "REPO"}
    )


@dataclass
class JoinArguments:
    dataset_name: str = field(metadata={"help": "prepared dataset (save_to_disk folder or Hub id)"})
    results_file: str = field(metadata={"help": "results JSONL written by `trl-rankreward rubrics ...`"})
    missing: Literal["error", "drop", "keep"] = field(default="error", metadata={"help": "rows with no result"})


def _count(value):
    """'all' -> None (every eligible row), else a positive int."""
    if value is None or str(value).lower() == "all":
        return None
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"expected a positive integer or 'all', got {value!r}")
    return count


@dataclass
class SourceArguments:
    """`data SOURCE`: the upstream data and how to sample it; None takes the source's own (`SOURCES`)."""

    dataset_name: str | None = field(
        default=None, metadata={"help": "Hub id or local JSONL/parquet file/folder (None: the source's Hub id)"}
    )
    dataset_split: str | None = field(default=None, metadata={"help": "split to read (None: the source's)"})
    dataset_config: str | None = field(
        default=None, metadata={"help": "Hub dataset config, ignored for local files (None: the source's)"}
    )
    seed: int = field(default=42, metadata={"help": "sampling seed (42, as in the papers)"})

    count_name: ClassVar[str]

    def __post_init__(self):
        try:
            _count(getattr(self, self.count_name))
        except ValueError as exc:
            raise ValueError(f"argument --{self.count_name}: {exc}") from None


@dataclass
class QuerySourceArguments(SourceArguments):
    count_name: ClassVar[str] = "num_queries"
    num_queries: str | None = field(
        default=None, metadata={"help": "how many queries to sample, or 'all' (None: the source's count)"}
    )
    rubrics_file: str | None = field(
        default=None, metadata={"help": "rubric JSONL (from `rubrics generate`) to join into the result"}
    )


@dataclass
class PairSourceArguments(SourceArguments):
    count_name: ClassVar[str] = "num_pairs"
    num_pairs: str | None = field(
        default=None, metadata={"help": "how many pairs to sample, or 'all' (None: the source's count)"}
    )


@dataclass
class SkyworkArguments(PairSourceArguments):
    drop_sources: str = field(
        default="magpie_ultra",
        metadata={
            "help": "comma-separated upstream `source` values to leave out (RM-R1's cleaning drops magpie_ultra; "
            "'' keeps all)"
        },
    )


def arguments():
    specs = {}
    for name, (hub_id, config, split, _, count, default) in SOURCES.items():
        where = hub_id + (f" ({config})" if config else "") + f", split {split}"
        types = QuerySourceArguments if count == "num_queries" else PairSourceArguments
        specs[name] = (
            f"{where} in the upstream schema -> prepared dataset ({count}: {default or 'all'} by default)",
            (SkyworkArguments if name == "skywork" else types, OutputArguments),
        )
    for name in _JOINS:
        what = f"join a generated JSONL into a prepared dataset ({name.split('-')[1]})"
        specs[name] = (what, (JoinArguments, OutputArguments))
    return specs


def run(command: str, args, output: OutputArguments) -> int:
    if not output.output_dir and not output.push_to_hub:
        raise UsageError("give --output_dir, --push_to_hub REPO, or both: the result has to go somewhere")
    from .. import data

    if command in _JOINS:
        dataset = getattr(data, _JOINS[command])(
            data.load_source(args.dataset_name), args.results_file, missing=args.missing
        )
    else:
        hub_id, config, split, function, count, default = SOURCES[command]
        source = data.load_source(args.dataset_name or hub_id, split=args.dataset_split or split,
                                  config=args.dataset_config or config)  # fmt: skip
        given = getattr(args, count)
        options = {}
        if isinstance(args, SkyworkArguments):  # comma-separated, passed on as a tuple
            options["drop_sources"] = tuple(v.strip() for v in args.drop_sources.split(",") if v.strip())
        number = _count(default if given is None else given)
        dataset, report = getattr(data, function)(source, **{count: number}, seed=args.seed, **options)
        print(f"{command}: {report}")
        if getattr(args, "rubrics_file", None):
            dataset = data.attach_rubrics(dataset, args.rubrics_file)
    data.save_dataset(dataset, output.output_dir, output.push_to_hub)
    print(f"wrote {len(dataset)} rows with columns {dataset.column_names} to {output.output_dir or output.push_to_hub}")
    return 0
