"""The training entry point behind `examples/train_*.py`: arguments, checks, resume, train-save-push, errors.

Each example script is a few lines over TRL's `TrlParser`, `ScriptArguments` and `ModelConfig`:

    def main(script_args, training_args, model_args):
        return train(RankBufferGRPOTrainer, script_args, training_args, model_args)

    def make_parser():
        return ScriptParser((TrainScriptArguments, RankBufferGRPOConfig, ModelConfig))

    if __name__ == "__main__":
        sys.exit(run_script(main, make_parser))

What every script then does, in order:

- parses flags and `--config FILE.yaml` (`ScriptParser`; a refused value is one line, exit 2);
- resumes with `--resume_from_checkpoint PATH`, or `latest` / `true` (the newest complete
  `checkpoint-N` in `output_dir`); `false` / `none` starts afresh (`resume`);
- with `--push_to_hub`, checks that the Hub is reachable before training (`hub`);
- builds a tiny random model when `model_name_or_path` is `tiny` (CPU smoke runs), and refuses a
  local model folder that does not exist (`model`);
- loads `dataset_name` (a `save_to_disk` folder, a .json/.jsonl/.parquet file or a Hub id) and
  checks its prompts against `max_prompt_length` or the model's context (`data`);
- trains, then saves the model, its tokenizer, `trainer_state.json` and a model card (README.md)
  to `output_dir`, and pushes them with `--push_to_hub` (`train`);
- prints a library error as one line and exits 1, as the CLI does (`trl_rankreward.user_errors`);
- after a success, ends the process group of a distributed launch (`entry`).
"""

from .arguments import ScriptParser, TrainScriptArguments
from .entry import end_process_group, run_script
from .train import run, train

__all__ = ["ScriptParser", "TrainScriptArguments", "end_process_group", "run", "run_script", "train"]
