#!/usr/bin/env bash
# The GPU check (docs/performance.md, GPU check) as one command on a machine with one NVIDIA GPU.
#
# The machine needs torch, transformers (5.17 or later) and accelerate. The run imports
# trl_rankreward.RankBufferGRPOTrainer, whose import path needs neither openai nor wandb (the judging
# layer loads openai only in the OpenAI backend; tests/benchmarks/test_gpu_check.py checks it).
# On a machine without network, put these wheels (about 1.8 MB) in .whl/ first; they are installed
# into .site/ before the run:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
# If the machine also lacks one of datasets' other dependencies (a run fails with ModuleNotFoundError
# naming it), add it to the same command: xxhash "pyarrow>=24" pandas "fsspec>=2023.1.0,<=2026.9.0"
# "huggingface_hub>=1.31,<2".
# Results: printed, and $OUT/gpu_check.json when $OUT is set. Extra arguments go to gpu_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target .site .whl/*.whl
  export PYTHONPATH="$PWD/.site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
python3 benchmarks/gpu_check.py "$@" 2>&1 | grep -v -E "it/s\]|s/it\]|Loading weights|Writing model shards"
