#!/usr/bin/env bash
# Set up .venv (CPU torch, the package with its test extras), lint, and run the whole test suite.
# Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_venv.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline TOKENIZERS_PARALLELISM=false
ruff check .
python -m pytest -q -p no:cacheprovider "${@:-tests}"
