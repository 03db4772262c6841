#!/usr/bin/env bash
# CPU quickstart: a tiny random-weight policy learns against its own RankBuffer, judged by the
# embedded judge (similarity to each query's 7 ranked references). A few minutes on 2 cores.
# Usage: bash scripts/quickstart.sh [extra train_rankbuffer.py args, e.g. --max_steps 80]
# Every run starts afresh in outputs/rankbuffer-quickstart (or --output_dir) and moves the previous
# run to <dir>.previous; `--resume_from_checkpoint latest` continues the previous run instead.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_venv.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

# The output folder and the resume flag, as train_rankbuffer.py will read them.
out=outputs/rankbuffer-quickstart
resume=""
previous_arg=""
for arg in "$@"; do
    case "$previous_arg" in
        --output_dir) out="$arg" ;;
        --resume_from_checkpoint) resume="$arg" ;;
    esac
    case "$arg" in
        --output_dir=*) out="${arg#*=}" ;;
        --resume_from_checkpoint=*) resume="${arg#*=}" ;;
    esac
    previous_arg="$arg"
done
case "$(echo "$resume" | tr '[:upper:]' '[:lower:]')" in
    "" | false | none | no) resume="" ;;
esac
if [ -z "$resume" ] && [ -e "$out" ]; then
    rm -rf "$out.previous"
    mv "$out" "$out.previous"
    echo "Starting a fresh run in $out; the previous run is now in $out.previous (to continue it instead:"
    echo "  mv $out.previous $out && bash scripts/quickstart.sh --resume_from_checkpoint latest --max_steps 80)"
fi

python -c "from trl_rankreward.testing import build_tiny_model; print(build_tiny_model('outputs/tiny-policy'))"
python examples/make_quickstart_data.py outputs/quickstart_data.jsonl
python examples/train_rankbuffer.py --config examples/configs/rankbuffer_cpu_quickstart.yaml "$@"

# Report the run just made: output_dir/trainer_state.json is written at its end (trl_rankreward/scripts/train.py).
# Rank rewards are zero-mean in every group, so watch a signal that can rise: the mean normalized
# coarse position of the rollouts among their query's anchors (0 = below every anchor, 1 = above all).
OUT="$out" python - <<'PY'
import json, os
out = os.environ["OUT"]
state = json.load(open(os.path.join(out, "trainer_state.json")))
history = [e for e in state["log_history"] if "rank/coarse_position_mean" in e]
values = [e["rank/coarse_position_mean"] for e in history]
n = max(1, min(5, len(values) // 2))
if values:
    steps = f"steps {history[0]['step']}-{history[-1]['step']}" if len(history) > 1 else f"step {history[0]['step']}"
    print(f"rank/coarse_position_mean over {len(values)} logged steps ({steps}): first {n} steps "
          f"{sum(values[:n]) / n:.3f} -> last {n} steps {sum(values[-n:]) / n:.3f}")
print(f"Results of this run ({state['global_step']} steps): model, tokenizer and model card in {os.path.abspath(out)}; "
      f"per-step metrics in {out}/trainer_state.json, anchors in {out}/anchors.sqlite")
PY
last_step=$(python -c "import json, sys; print(json.load(open(sys.argv[1]))['global_step'])" "$out/trainer_state.json")

# The buffers the run built, at its last step: statistics and a PNG of anchor sources (the paper's Figure 6).
checkpoint="$out/checkpoint-$last_step"
if [ -d "$checkpoint" ]; then
    trl-rankreward buffer-report "$checkpoint" --plot_file "$out/buffer_report.png"
else
    echo "No $checkpoint (saving was off), so no buffer report."
fi

# What to try next.
echo
echo "Next:"
same_dir=""
[ "$out" != outputs/rankbuffer-quickstart ] && same_dir=" --output_dir $out"
echo "  - continue this run:    bash scripts/quickstart.sh --resume_from_checkpoint latest --max_steps $((last_step * 2))$same_dir"
echo "  - a real LLM judge:     serve one (e.g. vllm serve Qwen/Qwen3-30B-A3B-Instruct-2507 --port 8001) and add"
echo "                          --judge_base_urls http://localhost:8001/v1 --judge_model Qwen/Qwen3-30B-A3B-Instruct-2507 (docs/judging.md)"
echo "  - compare with a baseline on the same data (reward std, judge calls and tokens, neutral groups):"
echo "        python examples/train_baseline.py --config examples/configs/baseline_cpu.yaml --reward_method pointwise \\"
echo "            --max_steps $last_step --output_dir outputs/baseline-pointwise"
echo "        trl-rankreward compare $out outputs/baseline-pointwise"
echo "  - curves in W&B:        add --report_to wandb (pip install -e \".[wandb]\"); every metric: docs/metrics.md"
