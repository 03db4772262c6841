"""Launched by test_judge_workers_training.py, under `accelerate launch` (2 processes) or alone (1 process).

Usage: judge_workers_multiprocess_train.py MODEL_DIR DATASET OUTPUT_DIR JUDGE_URL JUDGE_MODEL WORKERS STEPS
PER_DEVICE_BATCH RESUME ("-": none). RankBuffer against the judge at JUDGE_URL with `judge_workers` WORKERS; the
main process writes its logged losses, rewards, judge calls and buffer counts, and the buffers, to
OUTPUT_DIR/result.json.
"""

import json
import os
import sys

from tests.trainers.test_judge_workers_training import train
from trl_rankreward.scripts import end_process_group

if __name__ == "__main__":
    model_dir, dataset, output_dir, url, model, workers, steps, per_device, resume = sys.argv[1:10]
    logs, buffers, main = train(model_dir, dataset, output_dir, url, model, workers=int(workers), steps=int(steps),
                                per_device=int(per_device), resume=None if resume == "-" else resume, rank=True)  # fmt: skip
    if main:
        with open(os.path.join(output_dir, "result.json"), "w") as f:
            json.dump({"logs": logs, "buffers": buffers}, f)
    end_process_group()
