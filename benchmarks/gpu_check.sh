#!/usr/bin/env bash
# Issue 9 GPU check, as one command on the lent GPU machine (device tool; ../shared/gpu/README.md).
#
# Once, on the development machine, fetch the wheels the GPU machine lacks (it has torch,
# transformers 5.17, accelerate; no trl, datasets, network):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl trl==1.16.0 datasets==5.2.0 dill multiprocess
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
