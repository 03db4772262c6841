#!/usr/bin/env bash
# RankBuffer GRPO on one 8-GPU node, server mode (docs/performance.md, "Launch layouts").
#
#   GPU 0      policy generation: `trl vllm-serve` (TRL's weight-synced vLLM server)
#   GPU 1..J   judge: `vllm serve` with prefix caching, one replica per GPU (OpenAI-compatible);
#              every replica is passed as one more --judge_base_urls entry (round-robin)
#   the rest   training: accelerate + DeepSpeed ZeRO-3, one process per GPU
#
# Written for TRL 1.16 and vLLM 0.22-0.31 (`pip install "trl-rankreward[vllm,deepspeed]"`;
# setup.cfg pins vllm>=0.22,<0.32, the range TRL 1.16 supports). Flags are TRL 1.16's
# `trl vllm-serve` ScriptArguments and GRPOConfig fields; tests/examples/test_launch_scripts.py checks them.
#
#   bash examples/launch/server_mode.sh                 # 1 judge GPU, 6 training GPUs
#   JUDGE_GPUS="1 2" bash examples/launch/server_mode.sh  # 2 judge replicas, 5 training GPUs
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

POLICY=${POLICY:-Qwen/Qwen3-8B}
JUDGE=${JUDGE:-Qwen/Qwen3-30B-A3B-Instruct-2507}
CONFIG=${CONFIG:-examples/configs/rankbuffer_qwen3_8b.yaml}
POLICY_GPU=${POLICY_GPU:-0}
JUDGE_GPUS=${JUDGE_GPUS:-1}
TRAIN_GPUS=${TRAIN_GPUS:-}
POLICY_PORT=${POLICY_PORT:-8000}
JUDGE_PORT=${JUDGE_PORT:-8001}
LOGS=${LOGS:-logs/launch}
mkdir -p "$LOGS"

if [ -z "$TRAIN_GPUS" ]; then  # every GPU not used by the policy server or a judge
  TRAIN_GPUS=$(other_gpus "$POLICY_GPU $JUDGE_GPUS")
fi
NUM_PROCESSES=$(echo "$TRAIN_GPUS" | tr ',' '\n' | wc -l)

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT

# 1) policy generation server (weights are pushed to it by the trainer after every step)
CUDA_VISIBLE_DEVICES=$POLICY_GPU trl vllm-serve --model "$POLICY" --port "$POLICY_PORT" \
  --tensor_parallel_size 1 --gpu_memory_utilization 0.9 --max_model_len 8192 --enable_prefix_caching true \
  > "$LOGS/policy_server.log" 2>&1 &
pids+=($!)

# 2) judge replicas: prefix caching reuses the shared query/rubric/anchor prefix of coarse calls
start_judges

wait_for "http://localhost:$POLICY_PORT/health/"
wait_for_judges

# 3) training on the remaining GPUs
CUDA_VISIBLE_DEVICES=$TRAIN_GPUS accelerate launch --config_file accelerate_configs/zero3.yaml \
  --num_processes "$NUM_PROCESSES" examples/train_rankbuffer.py --config "$CONFIG" \
  --use_vllm true --vllm_mode server --vllm_server_base_url "http://localhost:$POLICY_PORT" \
  --judge_base_urls "${JUDGE_URLS[@]}" --judge_model "$JUDGE" --judge_max_concurrency 64 \
  "$@"
