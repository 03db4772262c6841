#!/usr/bin/env bash
# The launch matrix: every examples/configs/*_qwen3_8b.yaml run by its example script under ZeRO-3, DDP
# (and ZeRO-3 + optimizer offload for the PPO configs) on 2 CPU processes: 2 steps, a checkpoint, a resume
# to step 3 (scripts/launch_matrix.py says what is swapped for what). Prints the table and writes it to
# OUT/launch_matrix.md; exits 1 if a row failed.
# Usage: bash scripts/launch_matrix.sh [--out DIR (outputs/launch_matrix)] [--rows REGEX] [--offload-all]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_venv.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline TOKENIZERS_PARALLELISM=false
python scripts/launch_matrix.py "$@"
