#!/usr/bin/env bash
# RankBuffer GRPO on one 8-GPU node, colocate mode (docs/performance.md, "Launch layouts").
#
#   GPU 0..J-1  judge: `vllm serve` with prefix caching, one replica per GPU (OpenAI-compatible)
#   the rest    training with vLLM generation colocated in every training process
#               (GRPOConfig vllm_mode=colocate; vLLM takes vllm_gpu_memory_utilization of each GPU
#               and sleeps during the optimizer step)
#
# Written for TRL 1.16 and vLLM 0.22-0.31 (`pip install "trl-rankreward[vllm,deepspeed]"`;
# setup.cfg pins vllm>=0.22,<0.32). Flags are TRL 1.16 GRPOConfig fields;
# tests/examples/test_launch_scripts.py checks them.
#
#   bash examples/launch/colocate_mode.sh                   # judge on GPU 0, training on 1-7
#   JUDGE_GPUS="0 1" bash examples/launch/colocate_mode.sh  # 2 judge replicas, training on 2-7
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

POLICY=${POLICY:-Qwen/Qwen3-8B}
JUDGE=${JUDGE:-Qwen/Qwen3-30B-A3B-Instruct-2507}
CONFIG=${CONFIG:-examples/configs/rankbuffer_qwen3_8b.yaml}
JUDGE_GPUS=${JUDGE_GPUS:-0}
JUDGE_PORT=${JUDGE_PORT:-8001}
LOGS=${LOGS:-logs/launch}
mkdir -p "$LOGS"

TRAIN_GPUS=$(other_gpus "$JUDGE_GPUS")
NUM_PROCESSES=$(echo "$TRAIN_GPUS" | tr ',' '\n' | wc -l)

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT

start_judges
wait_for_judges

CUDA_VISIBLE_DEVICES=$TRAIN_GPUS accelerate launch --config_file accelerate_configs/zero3.yaml \
  --num_processes "$NUM_PROCESSES" examples/train_rankbuffer.py --config "$CONFIG" \
  --model_name_or_path "$POLICY" \
  --use_vllm true --vllm_mode colocate --vllm_gpu_memory_utilization 0.3 --vllm_tensor_parallel_size 1 \
  --vllm_enable_sleep_mode true \
  --judge_base_urls "${JUDGE_URLS[@]}" --judge_model "$JUDGE" --judge_max_concurrency 64 \
  "$@"
