"""Training outcome: the latent quality a tiny policy reaches per judge token, per reward method and PPO.

Every registered reward method (`JudgeRewardGRPOTrainer`, `reward_method=NAME`, GRPO's group
advantage) and PPO (`advantage_estimator="gae"`, the pointwise reward, one rollout per prompt)
train the same tiny random policy on CPU, judged over HTTP by the scripted judge server serving
an `evaluation.simulation.SimulatedJudge` (latent quality + Gaussian noise per call). Two tasks whose latent
quality (0..10) is read from the answer text:

- `letter_e`: 10 x the share of the answer's non-space characters that are "e" (every prompt alike);
- `echo_letters`: 10 x the share that are letters of the word the prompt names ("sea" or "dog"),
  so the best answer depends on the prompt.

Each run evaluates at step 0 and every `--eval_steps`: the latent quality of answers sampled at
temperature 1 to fixed evaluation prompts (what training raises), and the win-rate evaluation
(`JudgeWinRateCallback`: greedy answers against the starting policy's, judged by the same server
in both orders) with the latent quality of those greedy answers beside it. Reported per method:
start and final latent quality (mean +- standard error over seeds), the quality at an equal
training-judge budget, the final eval win rate, the training judge's calls and tokens; a PNG of
quality against cumulative training judge tokens; and, per task, the correlation over checkpoints
between the eval win rate and the latent quality. `genrm`'s trainer judge is the plain pairwise
judge over HTTP (the simulated judge answers it), as `JudgeRewardGRPOTrainer` builds it.

    python benchmarks/training_outcome.py --out outputs/training_outcome.json \\
        --figure docs/figures/benchmarks/training_outcome.png --write_docs docs/benchmarks.md --markdown
    python benchmarks/training_outcome.py --report outputs/training_outcome.json --markdown  # no training

`--pointwise_compression 0.3 --integer_scores` makes the judge's 0-10 scores cluster (comparisons
unchanged): the clustering judge of docs/benchmarks.md's judge-probe section.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass

WORDS = ("sea", "dog")  # echo_letters' prompt words: no letter in common
FILLER = "xkqz"  # in no target: pads the references


@dataclass(frozen=True)
class Task:
    """A prompt per index, the latent quality of an answer given its prompt, 4 references best first."""

    name: str
    template: str  # formatted with i (question number) and word

    def prompt(self, i: int) -> str:
        return self.template.format(i=i, word=WORDS[i % len(WORDS)])

    def targets(self, prompt: str) -> str:
        if self.name == "letter_e":
            return "e"
        return re.search(r"letters of the word (\w+)", prompt).group(1)

    def quality(self, prompt: str, answer: str) -> float:
        """10 x the share of `answer`'s non-space characters among the targets (0 for an empty answer)."""
        chars = [c for c in answer.lower() if not c.isspace()]
        targets = self.targets(prompt)
        return 10.0 * sum(c in targets for c in chars) / len(chars) if chars else 0.0

    def references(self, prompt: str) -> list[str]:
        """Texts of latent quality 3, 2, 1, 0 (best first): 20 characters, that many tenths targets."""
        targets = self.targets(prompt)
        texts = []
        for n in (6, 4, 2, 0):
            chars = [targets[j % len(targets)] for j in range(n)] + [FILLER[j % 4] for j in range(20 - n)]
            texts.append(" ".join("".join(chars[j : j + 5]) for j in range(0, 20, 5)))
        return texts


TASKS = {
    "letter_e": Task("letter_e", "Question {i}: write a short sentence."),
    "echo_letters": Task("echo_letters", "Question {i}: write with the letters of the word {word}."),
}
PPO = "ppo (gae, pointwise)"


def methods(only: list[str] | None) -> list[str]:
    from trl_rankreward.rewards.registry import REWARD_METHODS

    every = [*REWARD_METHODS, PPO]
    return [m for m in every if only is None or m in only]


def write_rows(path: str, task: Task, first: int, n: int) -> str:
    rubrics = [{"text": "Uses the letters the prompt asks for", "weight": 2.0}, {"text": "Is short", "weight": 1.0}]
    with open(path, "w") as f:
        for i in range(first, first + n):
            prompt = task.prompt(i)
            row = {"prompt": [{"role": "user", "content": prompt}], "query_id": f"q{i}", "rubrics": rubrics,
                   "references": task.references(prompt)}  # fmt: skip
            f.write(json.dumps(row) + "\n")
    return path


# ---- one training run ------------------------------------------------------------------------


def train_one(method: str, task: Task, seed: int, url: str, model_name: str, args, work: str) -> dict:
    """Train one (method, task, seed); return its checkpoints (step, latent quality, win rate, judge totals)."""
    from datasets import load_dataset
    from transformers import TrainerCallback

    from trl_rankreward.testing import build_tiny_model
    from trl_rankreward.trainers.judge_eval import JudgeWinRateCallback
    from trl_rankreward.trainers.judge_reward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer

    model = str(build_tiny_model(os.path.join(work, f"model-{seed}"), hidden_size=args.hidden, seed=seed))
    train = write_rows(os.path.join(work, f"{task.name}-train.jsonl"), task, 0, 32)
    evals = write_rows(os.path.join(work, f"{task.name}-eval.jsonl"), task, 1000, args.eval_prompts)
    ppo = method == PPO
    config = JudgeRewardGRPOConfig(
        output_dir=os.path.join(work, "out"), reward_method="pointwise" if ppo else method,
        advantage_estimator="gae" if ppo else "group", num_generations=1 if ppo else args.group,
        per_device_train_batch_size=args.batch, max_completion_length=args.completion_tokens,
        max_steps=args.steps, learning_rate=args.lr, beta=0.0, logging_steps=1, save_strategy="no",
        report_to="none", use_cpu=True, bf16=False, activation_checkpointing=False, seed=seed,
        judge_base_urls=[url], judge_model=model_name, eval_prompts=evals, eval_steps=args.eval_steps,
        per_device_eval_batch_size=args.eval_prompts, disable_tqdm=True,
        hacking_monitor_steps=0,  # the methods' own judge budgets, without the hacking monitor's calls
    )  # fmt: skip
    trainer = JudgeRewardGRPOTrainer(model, args=config, train_dataset=load_dataset("json", data_files=train)["train"])
    (evaluation,) = [c for c in trainer.callback_handler.callbacks if isinstance(c, JudgeWinRateCallback)]
    prompts = [p.query for p in evaluation.prompts]

    def latent(answers: list[str], per_prompt: int = 1) -> float:
        paired = [p for p in prompts for _ in range(per_prompt)]
        return sum(task.quality(p, a) for p, a in zip(paired, answers, strict=True)) / len(answers)

    qualities: dict[int, tuple[float, float]] = {}  # step -> (sampled answers' quality, greedy answers')

    def measure(greedy: list[str]) -> tuple[float, float]:
        sampled = sample_answers(trainer, prompts, args.samples, args.completion_tokens)
        return latent(sampled, args.samples), latent(greedy)

    class LatentQuality(TrainerCallback):  # runs after the evaluation's on_step_end: scores its answers
        def on_train_begin(self, *_, **__):
            qualities[0] = measure(evaluation.baselines)

        def on_step_end(self, _args, state, *_, **__):
            if evaluation.evaluations and evaluation.evaluations[-1]["step"] == state.global_step:
                qualities[state.global_step] = measure(evaluation.answers)

    trainer.add_callback(LatentQuality())
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    totals = {e["step"]: e for e in trainer.state.log_history if "judge/calls_total" in e}
    wins = {e["step"]: e for e in evaluation.evaluations}
    # step 0 is not judged: the starting policy is its own baseline
    checkpoints = [{"step": 0, "quality": qualities[0][0], "greedy_quality": qualities[0][1], "win_rate": None,
                    "calls": 0, "tokens": 0}]  # fmt: skip
    for step in sorted(s for s in qualities if s):
        t = totals[step]
        checkpoints.append({
            "step": step, "quality": qualities[step][0], "greedy_quality": qualities[step][1],
            "win_rate": wins[step].get("eval/win_rate"),
            "calls": t["judge/calls_total"], "tokens": t["judge/prompt_tokens_total"] + t["judge/completion_tokens_total"],
        })  # fmt: skip
    return {"method": method, "task": task.name, "seed": seed, "wall_s": wall, "checkpoints": checkpoints}


def sample_answers(trainer, prompts: list[str], samples: int, max_new_tokens: int) -> list[str]:
    """`samples` answers per prompt (prompt-major), sampled at temperature 1 with a fixed seed: the policy's
    answers as it trains on them, so their mean latent quality is what the training raises."""
    import torch

    tokenizer = trainer.processing_class
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                           add_generation_prompt=True) for p in prompts]  # fmt: skip
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    tokenizer.padding_side = side
    model, was_training = trainer.model, trainer.model.training
    model.eval()
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(0)
        output = model.generate(**batch, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                num_return_sequences=samples, max_new_tokens=max_new_tokens,
                                pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    model.train(was_training)
    return tokenizer.batch_decode(output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)


SETTINGS = ("tasks", "methods", "seeds", "steps", "eval_steps", "eval_prompts", "samples", "batch", "group",
            "completion_tokens", "hidden", "lr", "noise", "threads", "pointwise_compression",
            "integer_scores")  # fmt: skip
#: settings added later, with the value every earlier results file was run with
LATER_SETTINGS = {"pointwise_compression": 1.0, "integer_scores": False}


def run_all(args) -> dict:
    """Train every (seed, task, method); the record: command, settings, wall time and the runs, saved to
    `args.out` after each run. Runs already in `args.out` (same settings) are kept, not trained again."""
    import torch

    from trl_rankreward.evaluation.simulation import SimulatedJudge
    from trl_rankreward.testing import serve_scripted_judge

    torch.set_num_threads(args.threads)
    settings = {k: getattr(args, k) for k in SETTINGS}
    record = {"command": " ".join(["python benchmarks/training_outcome.py", *sys.argv[1:]]), "settings": settings,
              "wall_s": 0.0, "runs": []}  # fmt: skip
    if args.out and os.path.exists(args.out):
        record = load(args.out)
        record["settings"] = {**LATER_SETTINGS, **record["settings"]}
        if record["settings"] != settings:
            raise SystemExit(f"{args.out} holds runs with other settings ({record['settings']}); use another --out")
    done = {(r["method"], r["task"], r["seed"]) for r in record["runs"]}
    work, start, before = tempfile.mkdtemp(prefix="training_outcome-"), time.perf_counter(), record["wall_s"]
    for seed in args.seeds:  # seed-major: a run cut short still has whole seeds
        for task_name in args.tasks:
            task = TASKS[task_name]
            # the judge reads the prompt from the judge prompt it is given (`serve_scripted_judge(judge=...)`)
            judge = SimulatedJudge(task.quality, noise=args.noise, seed=seed, integer_scores=args.integer_scores,
                                   pointwise_compression=args.pointwise_compression)  # fmt: skip
            with serve_scripted_judge(judge=judge) as url:
                for method in methods(args.methods):
                    if (method, task_name, seed) in done:
                        continue
                    result = train_one(method, task, seed, url, url.model, args, work)
                    record["runs"].append(result)
                    record["wall_s"] = before + time.perf_counter() - start
                    first, last = result["checkpoints"][0], result["checkpoints"][-1]
                    print(f"{task_name} seed {seed} {method}: quality {first['quality']:.2f} -> {last['quality']:.2f}, "
                          f"win rate {last['win_rate']}, {last['tokens']:.0f} judge tokens, {result['wall_s']:.0f} s",
                          flush=True)  # fmt: skip
                    if args.out:
                        with open(args.out, "w") as f:
                            json.dump(record, f, indent=1)
    return record


def load(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


# ---- the report -------------------------------------------------------------------------------


def mean_se(values: list[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def at_budget(checkpoints: list[dict], tokens: float) -> float:
    """Latent quality at `tokens` training judge tokens, linear between the checkpoints around it."""
    for a, b in zip(checkpoints, checkpoints[1:]):
        if a["tokens"] <= tokens <= b["tokens"]:
            w = (tokens - a["tokens"]) / (b["tokens"] - a["tokens"]) if b["tokens"] > a["tokens"] else 1.0
            return a["quality"] + w * (b["quality"] - a["quality"])
    return checkpoints[-1]["quality"]


def pearson(xs: list[float], ys: list[float]) -> float:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx, syy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else float("nan")


def ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=xs.__getitem__)
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2
        i = j + 1
    return out


def corr(r: float) -> str:
    return "n/a (a constant series)" if math.isnan(r) else f"{r:.2f}"


def fmt(mean: float, se: float, digits: int = 2) -> str:
    return f"{mean:.{digits}f}" + ("" if math.isnan(se) else f" ± {se:.{digits}f}")


def report(record: dict, markdown: bool) -> str:
    """Per task: the table of methods (mean +- standard error over seeds) and the win-rate correlations."""
    results, lines = record["runs"], []
    for task in dict.fromkeys(r["task"] for r in results):
        runs = [r for r in results if r["task"] == task]
        names = list(dict.fromkeys(r["method"] for r in runs))
        budget = min(r["checkpoints"][-1]["tokens"] for r in runs if r["checkpoints"][-1]["tokens"] > 0)
        seeds = sorted({r["seed"] for r in runs})
        title = f"{task}: {len(runs)} runs, seeds {seeds}; equal budget = {budget:,.0f} training judge tokens"
        lines += ["", f"**{title}**", ""] if markdown else ["", title]
        header = ["method", "start quality", "final quality", f"quality at {budget:,.0f} tok", "final win rate",
                  "judge calls", "judge tokens", "s/run"]  # fmt: skip
        rows = []
        for name in names:
            mine = [r for r in runs if r["method"] == name]
            last = [r["checkpoints"][-1] for r in mine]
            win = [c["win_rate"] for c in last if c["win_rate"] is not None]
            rows.append([
                name, fmt(*mean_se([r["checkpoints"][0]["quality"] for r in mine])),
                fmt(*mean_se([c["quality"] for c in last])),
                fmt(*mean_se([at_budget(r["checkpoints"], budget) for r in mine])),
                fmt(*mean_se(win)) if win else "n/a", f"{mean_se([c['calls'] for c in last])[0]:,.0f}",
                f"{mean_se([c['tokens'] for c in last])[0]:,.0f}", f"{mean_se([r['wall_s'] for r in mine])[0]:.0f}",
            ])  # fmt: skip
        lines += table(header, rows, markdown)
        final = {n: mean_se([r["checkpoints"][-1]["quality"] for r in runs if r["method"] == n])[0] for n in names}
        equal = {n: mean_se([at_budget(r["checkpoints"], budget) for r in runs if r["method"] == n])[0] for n in names}
        best, cheap = max(final, key=final.get), max(equal, key=equal.get)
        lines += ["", f"Highest mean final latent quality: {best} ({final[best]:.2f}); highest at "
                      f"{budget:,.0f} training judge tokens: {cheap} ({equal[cheap]:.2f})."]  # fmt: skip
        judged = [c for r in runs for c in r["checkpoints"][1:] if c["win_rate"] is not None]
        wins = [c["win_rate"] for c in judged]
        r_sampled = pearson(wins, [c["quality"] for c in judged])
        rho_sampled = pearson(ranks(wins), ranks([c["quality"] for c in judged]))
        r_greedy = pearson(wins, [c["greedy_quality"] for c in judged])
        lines += [""] if markdown else []
        lines.append(
            f"eval win rate vs latent quality over {len(judged)} checkpoints (every run of {task}, step 0 left out): "
            f"Pearson r = {corr(r_sampled)}, Spearman rho = {corr(rho_sampled)} (quality of sampled answers); "
            f"Pearson r = {corr(r_greedy)} with the quality of the greedy answers the win rate judged"
        )
    return "\n".join(lines)


def table(header: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    return ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)) for row in [header, *rows]]


def plot(results: list[dict], path: str) -> None:
    """Per task: mean latent quality over seeds against mean cumulative training judge tokens, per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(r["task"] for r in results))
    fig, axes = plt.subplots(1, len(tasks), figsize=(7 * len(tasks), 5), squeeze=False)
    colors = plt.get_cmap("tab20").colors
    for ax, task in zip(axes[0], tasks):
        runs = [r for r in results if r["task"] == task]
        for i, name in enumerate(dict.fromkeys(r["method"] for r in runs)):
            mine = [r["checkpoints"] for r in runs if r["method"] == name]
            n = min(len(c) for c in mine)
            xs = [sum(c[k]["tokens"] for c in mine) / len(mine) for k in range(n)]
            ys = [sum(c[k]["quality"] for c in mine) / len(mine) for k in range(n)]
            ax.plot(xs, ys, marker="o", markersize=3, color=colors[i % 20], label=name,
                    linestyle="--" if name == PPO else "-")  # fmt: skip
        ax.set_xscale("symlog", linthresh=1e3)
        ax.set(title=f"{task} (mean over seeds)", xlabel="cumulative training judge tokens",
               ylabel="latent quality of sampled eval answers (0-10)")  # fmt: skip
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=110)


BEGIN, END = "<!-- training-outcome: begin", "<!-- training-outcome: end -->"


def docs_section(record: dict, figure: str | None, docs_path: str) -> str:
    """The generated section of docs/benchmarks.md: command, settings, tables, correlations, figure, time."""
    shown = {**record["settings"], "methods": record["settings"]["methods"] or "every registered method and PPO"}
    settings = ", ".join(f"`{k}={v}`" for k, v in shown.items())
    runs = record["runs"]
    lines = [
        f"{BEGIN} (generated by `benchmarks/training_outcome.py --write_docs`) -->",
        "### Measured in this run", "",
        "Generated by the command below; do not edit this section by hand (rerun the command):", "",
        "```", record["command"], "```", "",
        f"Settings: {settings}.", "",
        report(record, markdown=True).strip(), "",
    ]  # fmt: skip
    if figure:
        link = os.path.relpath(figure, os.path.dirname(os.path.abspath(docs_path)))
        lines += [f'<img src="{link}" alt="Latent quality against cumulative training judge tokens, per method and '
                  'task (mean over seeds)" width="100%">', ""]  # fmt: skip
    lines += [
        f"Run time: {record['wall_s'] / 60:.1f} minutes of wall time for {len(runs)} runs on the shared CPU "
        f"(training and evaluation; per run {min(r['wall_s'] for r in runs):.0f}-{max(r['wall_s'] for r in runs):.0f} "
        "s, the s/run column).",
        END,
    ]
    return "\n".join(lines)


def write_docs(path: str, section: str) -> None:
    """Replace the generated section in `path` (between its markers), or append it with the markers."""
    with open(path) as f:
        text = f.read()
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    with open(path, "w") as f:
        f.write(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--methods", nargs="+", default=None, help="default: every registered method and PPO")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--eval_steps", type=int, default=10)
    parser.add_argument("--eval_prompts", type=int, default=16)
    parser.add_argument("--samples", type=int, default=4, help="sampled answers per eval prompt (latent quality)")
    parser.add_argument("--batch", type=int, default=16, help="completions per step (every method)")
    parser.add_argument("--group", type=int, default=4, help="G of the GRPO methods (PPO: 1)")
    parser.add_argument("--completion_tokens", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--noise", type=float, default=1.0, help="the simulated judge's per-call noise (sd)")
    parser.add_argument("--pointwise_compression", type=float, default=1.0,
                        help="the judge's pointwise scores: 5 + c * (perceived - 5); < 1 clusters them (comparisons "
                        "unchanged; `SimulatedJudge`)")  # fmt: skip
    parser.add_argument("--integer_scores", action="store_true", help="the judge writes integer pointwise scores")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--out", help="results JSON: written after every run, and runs already in it are skipped")
    parser.add_argument("--report", help="report this results JSON (no training)")
    parser.add_argument("--figure", help="write the curves to this PNG")
    parser.add_argument("--write_docs", help="replace (or append) the generated section of this markdown file")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    record = load(args.report) if args.report else run_all(args)
    print(report(record, args.markdown))
    if args.figure:
        plot(record["runs"], args.figure)
        print(f"curves: {args.figure}")
    if args.write_docs:
        write_docs(args.write_docs, docs_section(record, args.figure, args.write_docs))
        print(f"wrote the generated section of {args.write_docs}")
    print(f"wall time {record['wall_s']:.0f} s for {len(record['runs'])} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
