# Sourced by examples/launch/*.sh: the judge replicas and GPU bookkeeping both launch layouts share.
# Reads JUDGE, JUDGE_GPUS, JUDGE_PORT and LOGS; appends to the caller's `pids` array.

other_gpus() {  # space-separated used GPUs -> the other GPUs of 0..7, comma-separated
  local gpus
  gpus=$(for g in 0 1 2 3 4 5 6 7; do [[ " $1 " == *" $g "* ]] || printf '%s,' "$g"; done)
  echo "${gpus%,}"
}

start_judges() {  # one `vllm serve "$JUDGE"` per GPU in JUDGE_GPUS, ports from JUDGE_PORT up; sets JUDGE_URLS
  local port=$JUDGE_PORT g
  JUDGE_URLS=()
  for g in $JUDGE_GPUS; do
    CUDA_VISIBLE_DEVICES=$g vllm serve "$JUDGE" --port "$port" --enable-prefix-caching \
      --max-model-len 32768 --gpu-memory-utilization 0.9 > "$LOGS/judge_$g.log" 2>&1 &
    pids+=($!)
    JUDGE_URLS+=("http://localhost:$port/v1")
    port=$((port + 1))
  done
}

wait_for() {  # url: poll until the server answers (model loading takes minutes)
  until curl -sf "$1" > /dev/null; do sleep 10; done
}

wait_for_judges() {  # every replica of start_judges
  local url
  for url in "${JUDGE_URLS[@]}"; do wait_for "${url%/v1}/health"; done
}
