"""Launched by test_train_scripts.py under `accelerate launch` with 2 CPU processes.

Usage: two_process_tiny.py WORK_DIR
Both processes resolve `model_name_or_path: tiny` into WORK_DIR/out/tiny_model at once, as the
example scripts do; each writes WORK_DIR/rank{i}.json: the path it got, how many builds it wrote
itself (the local main process 1, the other 0) and whether the folder was complete when it got it.
"""

import json
import sys
from pathlib import Path

from transformers import AutoConfig, AutoTokenizer, TrainingArguments

from trl_rankreward import tiny as tiny_models
from trl_rankreward.scripts.train import resolve_model

writes = []
_write = tiny_models._write_tiny_model


def counting_write(folder, settings):
    writes.append(str(folder))
    return _write(folder, settings)


def main():
    work = Path(sys.argv[1])
    tiny_models._write_tiny_model = counting_write
    args = TrainingArguments(output_dir=str(work / "out"), use_cpu=True, report_to="none")
    path = resolve_model("tiny", args)
    complete = (Path(path) / "tiny_model_settings.json").exists()
    AutoConfig.from_pretrained(path)
    AutoTokenizer.from_pretrained(path)
    result = {"path": path, "writes": len(writes), "complete": complete}
    (work / f"rank{args.process_index}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
