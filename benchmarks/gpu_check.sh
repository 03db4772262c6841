#!/usr/bin/env bash
# Issue 9 GPU check, as one command on the lent GPU machine (device tool; ../shared/gpu/README.md).
#
# What the GPU machine lacks (../shared/gpu/README.md: it has torch 2.11, transformers 5.17,
# accelerate, peft, sentence-transformers; no trl, datasets, openai, wandb, network). The run imports
# trl_rankreward.RankBufferGRPOTrainer, whose import path needs neither openai nor wandb (the judging
# layer loads openai only in the OpenAI backend; tests/benchmarks/test_gpu_check.py checks it).
# Once, on the development machine, fetch exactly these wheels (about 1.8 MB; TRL 1.16 and datasets
# 5.2.0 as in /work/venv, and the two pure-Python deps of datasets seen missing there):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
# If missing (seen present on 2026-11-30 with the wheels above; a run fails with ModuleNotFoundError
# naming one), add to the same command, within the 64 MiB carry limit (pyarrow alone is some 40 MB):
#   xxhash "pyarrow>=24" pandas "fsspec>=2023.1.0,<=2026.9.0" "huggingface_hub>=1.31,<2"
# Then run with the device tool, carrying .whl (about 3-5 minutes of device time):
#   run(command="bash benchmarks/gpu_check.sh", carry=[".whl"], timeout_s=540)
# Results: printed, and $OUT/gpu_check.json. Extra arguments go to gpu_check.py.
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
