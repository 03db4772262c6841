"""The path every example script ends with: checks, build the trainer, train, save, model card, push."""

from __future__ import annotations

from .data import check_prompt_lengths, load_train_dataset
from .hub import card_model_name, check_hub_push, hub_dataset_id
from .model import resolve_model
from .resume import resume_argument


def train(trainer_class, script_args, training_args, model_args, *, check_prompts: bool = True, **trainer_kwargs):
    """Build `trainer_class` from the parsed arguments and `trainer_kwargs` (e.g. a ready `judge`), then `run`.

    Everything that can fail on the user's input is checked before any model loads, in this order: the
    resume flag, the Hub (with --push_to_hub), a local model folder, the dataset, its prompt lengths
    (`check_prompts=False` for a dataset whose `prompt` is not what the policy reads, as R-Align's pairs).
    """
    from trl import get_peft_config

    training_args.model_init_kwargs = {
        "revision": model_args.model_revision,
        "attn_implementation": model_args.attn_implementation,
        "dtype": model_args.dtype,
        **(training_args.model_init_kwargs or {}),  # the config's own win
    }

    resume = resume_argument(trainer_class, training_args)
    check_hub_push(training_args)
    model = resolve_model(model_args.model_name_or_path, training_args)  # a missing local folder fails first
    dataset = load_train_dataset(script_args)
    if check_prompts:
        dataset = check_prompt_lengths(dataset, model, script_args, training_args)
    trainer = trainer_class(
        model, args=training_args, train_dataset=dataset, peft_config=get_peft_config(model_args), **trainer_kwargs
    )
    return run(trainer, resume, dataset_name=script_args.dataset_name)


def run(trainer, resume_from_checkpoint: str | None, *, dataset_name: str | None = None):
    """Train (resuming from `resume_from_checkpoint`), then save the model, its tokenizer, `trainer_state.json`
    and a model card to `output_dir`, and push them to the Hub with `--push_to_hub`. Returns the trainer.

    A `JudgeFailureError` (the judge circuit breaker) propagates after the trainer saved its
    checkpoint; nothing else is saved then.
    """
    args = trainer.args
    trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    trainer.save_model(args.output_dir)  # every process (ZeRO-3 gathers the weights); written by the main one
    trainer.save_state()  # output_dir/trainer_state.json: this run's log history, read by scripts/quickstart.sh
    card_dataset = hub_dataset_id(dataset_name)
    if trainer.is_world_process_zero() and hasattr(trainer, "create_model_card"):
        # dataset_label: our section of the card names a local dataset too (TRL's part links Hub ids only)
        trainer.create_model_card(
            model_name=card_model_name(args), dataset_name=card_dataset, dataset_label=dataset_name
        )
    trainer.accelerator.print(f"Model, tokenizer and model card saved to {args.output_dir}")
    if args.push_to_hub:
        trainer.push_to_hub(dataset_name=card_dataset)
        trainer.accelerator.print(f"Pushed to https://huggingface.co/{trainer.hub_model_id}")
    return trainer
