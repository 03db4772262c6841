"""Does `probe_judge` recommend what works? The probe on simulated judges, beside what is known to be true.

Two checks, each printing one table:

- **training**: the training-outcome benchmark's judges (`benchmarks/training_outcome.py`, task
  `letter_e`): its tiny starting policy (hidden 64, seed 0) samples G = 4 rollouts for
  `--training_queries` training prompts at temperature 1 (and 4 more for the warm-up), and the probe runs every method the
  data allows against `SimulatedJudge(task.quality, noise=1)` served over HTTP as in training, for a
  judge as sharp in its 0-10 scores as in its comparisons and for one whose scores cluster
  (`pointwise_compression=0.3`, integer scores). Put its recommendation beside the trained quality in
  docs/benchmarks.md.
- **family**: the reward-method benchmark's world (`evaluation.simulation.SimulatedRun`: 100-token
  rollouts of known latent quality, G = 8) and a family of judges: plain, per-text offset, listwise noise
  growth, position bias on shuffled displays and on unshuffled ones, and clustering pointwise scores.
  Here the truth is known: each method's *accuracy* is the Kendall tau-a of its probe rewards with the
  latent quality (the probe's own measure, against the truth instead of another judging). The check: is
  the recommended method's accuracy within noise (2 standard errors of the per-group difference) of the
  most accurate method's, at no more judge tokens per group?

    python benchmarks/probe_validation.py                      # both checks
    python benchmarks/probe_validation.py --check family --queries 6
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time

from trl_rankreward.evaluation import probe_judge
from trl_rankreward.evaluation.judge_probe import order_agreement, standard_error
from trl_rankreward.evaluation.simulation import SimulatedJudge, SimulatedRun

CLUSTERING = {"pointwise_compression": 0.3, "integer_scores": True}
FAMILY = {
    "plain": {},
    "T (text offset 0.3)": {"text_noise": 0.3},
    "G (listwise growth 0.05)": {"listwise_noise_growth": 0.05},
    "P (position bias 0.5, shuffled)": {"position_bias": 0.5},
    "P! (position bias 0.5, unshuffled)": {"position_bias": 0.5, "display_shuffle": False},
    "clustering pointwise (0.3, integers)": CLUSTERING,
    "sharp pointwise (integers)": {"integer_scores": True},
}


def family_check(queries: int, seed: int) -> list[dict]:
    """Per family member: the probe's recommendation and every method's accuracy against the latent truth."""
    sim = SimulatedRun(queries=queries, group_size=8, response_tokens=100, reference_tokens=80, seed=seed)
    groups, warm = [sim.group(q, 0) for q in sim.queries], [sim.group(q, 1) for q in sim.queries]
    truth = [sim.truth(g) for g in groups]
    pairs = [list(itertools.combinations(range(g.size), 2)) for g in groups]
    results = []
    for label, knobs in FAMILY.items():
        judge = SimulatedJudge(sim.quality, rubric_quality=sim.rubric_quality, noise=1.0, seed=seed, **knobs)
        report = probe_judge(judge, groups, warmup_groups=warm, seed=seed)
        accuracy = {}  # method -> per-group tau-a with the truth, averaged over the judgings
        for method, judgings in report.rewards.items():
            if len(judgings) >= 2:
                accuracy[method] = [statistics.fmean(order_agreement(j[i], truth[i], pairs[i]) for j in judgings)
                                    for i in range(len(groups))]  # fmt: skip
        results.append({"judge": label, "report": report, "accuracy": accuracy})
        print(f"family: {label} done ({report.cost['tokens']:,} probe tokens)", file=sys.stderr, flush=True)
    return results


def verdict(report, accuracy: dict[str, list[float]]) -> dict:
    """The recommended method against the most accurate one: within noise, and at no more tokens per group?"""
    rec = report.recommended
    mean = {m: statistics.fmean(v) for m, v in accuracy.items()}
    best = max(mean, key=mean.get)
    diff = [b - r for b, r in zip(accuracy[best], accuracy[rec])]
    se = standard_error(diff) or 0.0
    tokens = {r.method: r.tokens_per_group for r in report.rows}
    # the cheapest method within noise of the best, by the truth (what the probe should have found)
    near = [m for m in mean if _within(accuracy[best], accuracy[m])]
    cheapest = min(near, key=tokens.get)
    return {"recommended": rec, "rec_accuracy": mean[rec], "rec_tokens": tokens[rec], "best": best,
            "best_accuracy": mean[best], "best_tokens": tokens[best], "within_noise": statistics.fmean(diff) <= 2 * se,
            "cheapest_good": cheapest, "cheapest_good_tokens": tokens[cheapest]}  # fmt: skip


def _within(best: list[float], other: list[float]) -> bool:
    diff = [b - o for b, o in zip(best, other)]
    return statistics.fmean(diff) <= 2 * (standard_error(diff) or 0.0)


def training_check(queries: int, seed: int) -> list[dict]:
    """The probe on the training-outcome benchmark's task, policy and judges (served over HTTP)."""
    from datasets import load_dataset
    from training_outcome import TASKS, write_rows

    from trl_rankreward.commands.probe_judge import sample_groups
    from trl_rankreward.judging.server_settings import JudgeServerSettings, build_judge
    from trl_rankreward.testing import build_tiny_model, serve_scripted_judge
    from trl_rankreward.trainers.judge_reward import JudgeRewardGRPOConfig

    task, work = TASKS["letter_e"], tempfile.mkdtemp(prefix="probe_validation-")
    model = str(build_tiny_model(os.path.join(work, "model"), hidden_size=64, seed=seed))
    rows = load_dataset("json", data_files=write_rows(os.path.join(work, "train.jsonl"), task, 0, 32))["train"]
    config = JudgeRewardGRPOConfig(output_dir=work, num_generations=4, per_device_train_batch_size=16,
                                   max_completion_length=16, use_cpu=True, bf16=False, report_to="none")  # fmt: skip
    groups, warm = sample_groups(model, rows, config, queries=queries, seed=seed, warmup=True)
    results = []
    for label, knobs in {"sharp (as trained)": {}, "clustering (0.3, integers)": CLUSTERING}.items():
        with serve_scripted_judge(judge=SimulatedJudge(task.quality, noise=1.0, seed=seed, **knobs)) as url:
            judge = build_judge(JudgeServerSettings(base_urls=[str(url)], model=url.model))
            report = probe_judge(judge, groups, warmup_groups=warm, groups_per_step=4, seed=seed)
        results.append({"judge": label, "report": report})
        print(f"training: {label} done ({report.cost['tokens']:,} probe tokens)", file=sys.stderr, flush=True)
    return results


def print_training(results: list[dict]) -> None:
    print("\n### probe on the training-outcome judges (letter_e, tiny starting policy, G=4)\n")
    methods = [r.method for r in results[0]["report"].rows]
    print("| method | " + " | ".join(f"{r['judge']}: reliability, tied pairs, tokens/group" for r in results) + " |")
    print("|---|" + "---|" * len(results))
    for m in methods:
        cells = []
        for r in results:
            row = r["report"].row(m)
            rel = "n/a" if row.reliability is None else f"{row.reliability:.2f} ± {row.reliability_se or 0:.2f}"
            tied = "" if row.tied_pairs is None else f", {row.tied_pairs:.0%} tied"
            cells.append(f"{rel}{tied}, {row.tokens_per_group:,.0f}")
        print(f"| {m} | " + " | ".join(cells) + " |")
    for r in results:
        print(f"\n{r['judge']}: recommended {r['report'].recommended} -- {r['report'].reason}")


def print_family(results: list[dict]) -> None:
    print("\n### probe on the judge family (reward-benchmark world, G=8); accuracy = tau-a with the latent truth\n")
    print(
        "| judge | recommended | its accuracy | tokens/group | most accurate | accuracy | tokens/group "
        "| within noise | cheapest within noise of the most accurate (by the truth) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        v = verdict(r["report"], r["accuracy"])
        print(f"| {r['judge']} | {v['recommended']} | {v['rec_accuracy']:.2f} | {v['rec_tokens']:,.0f} | {v['best']} "
              f"| {v['best_accuracy']:.2f} | {v['best_tokens']:,.0f} | {'yes' if v['within_noise'] else 'NO'} "
              f"| {v['cheapest_good']} ({v['cheapest_good_tokens']:,.0f}) |")  # fmt: skip
    print("\nper judge, reliability (probe) / accuracy (truth) per method:\n")
    methods = [row.method for row in results[0]["report"].rows]
    print("| judge | " + " | ".join(methods) + " |")
    print("|---|" + "---|" * len(methods))
    for r in results:
        cells = []
        for m in methods:
            rel, acc = r["report"].row(m).reliability, r["accuracy"].get(m)
            cells.append(("n/a" if rel is None else f"{rel:.2f}") + " / " +
                         ("n/a" if acc is None else f"{statistics.fmean(acc):.2f}"))  # fmt: skip
        print(f"| {r['judge']} | " + " | ".join(cells) + " |")
    for r in results:
        print(f"\n{r['judge']}: {r['report'].reason}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", choices=["training", "family", "both"], default="both")
    parser.add_argument("--queries", type=int, default=8, help="probe groups per judge of the family check")
    parser.add_argument("--training_queries", type=int, default=32,
                        help="probe groups of the training check (32: every training prompt of the benchmark)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.check in ("training", "both"):
        print_training(training_check(args.training_queries, args.seed))
    if args.check in ("family", "both"):
        print_family(family_check(args.queries, args.seed))
    print(f"\nwall time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # training_outcome's task and rows
    sys.exit(main())
