#!/usr/bin/env bash
# CPU quickstart: a tiny random-weight policy learns against its own RankBuffer, judged by the
# embedded judge (similarity to each query's 7 ranked references). A few minutes on 2 cores.
# Usage: bash scripts/quickstart.sh [extra train_rankbuffer.py args, e.g. --max_steps 80]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_venv.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

python -c "from trl_rankreward.testing import build_tiny_model; print(build_tiny_model('outputs/tiny-policy'))"
python examples/make_quickstart_data.py outputs/quickstart_data.jsonl
accelerate launch --num_processes 1 --cpu examples/train_rankbuffer.py \
    --config examples/configs/rankbuffer_cpu_quickstart.yaml "$@"

# Rank rewards are zero-mean in every group, so watch a signal that can rise: the mean normalized
# coarse position of the rollouts among their query's anchors (0 = below every anchor, 1 = above all).
python - <<'PY'
import glob, json, os
out = "outputs/rankbuffer-quickstart"
states = sorted(glob.glob(f"{out}/checkpoint-*/trainer_state.json"), key=lambda p: int(p.split("-")[-1].split("/")[0]))
history = json.load(open(states[-1]))["log_history"]
values = [e["rank/coarse_position_mean"] for e in history if "rank/coarse_position_mean" in e]
n = max(1, min(5, len(values) // 2))
print(f"rank/coarse_position_mean over {len(values)} steps: first {n} steps {sum(values[:n]) / n:.3f} -> "
      f"last {n} steps {sum(values[-n:]) / n:.3f}")
print(f"Results: model and checkpoints in {os.path.abspath(out)} (anchors in anchors.sqlite, buffers in "
      f"checkpoint-*/reward_method_state.json, per-step metrics in checkpoint-*/trainer_state.json)")
PY
