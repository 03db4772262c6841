"""`GRPOTrainerBase`: what every trainer of the package adds to TRL's `GRPOTrainer`; and `CriticPPOConfig` /
`CriticPPOTrainer`, PPO for plain TRL reward functions (TRL 1.16 has none). It adds: a sampler reseeded per epoch
(a resume keeps the data order); resume from the newest *complete* checkpoint, damaged ones skipped or refused by
name (`check_checkpoint`); SIGTERM/SIGINT -> checkpoint -> exit 75 (`preemption`); no missing-`lm_head` warning
for tied embeddings; the critic with `advantage_estimator="gae"` (subclasses give rewards in `_reward_columns`).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
from dataclasses import dataclass, field

import torch
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_callback import TrainerCallback, TrainerState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.utils import logging
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import RepeatSampler

from ..rewards.options import DataNeeds
from ..rewards.state_files import METHOD_STATE_NAME, CheckpointStateError, corrupt_entry, read_json
from ..user_errors import ConfigError
from .console_log import use_compact_console_log
from .dataset_checks import check_training_dataset
from .judge_eval import JudgeEvalConfig, add_judge_evaluation, evaluation_summary
from .model_card import compose_card, training_section
from .ppo import ADVANTAGE_ESTIMATORS, CriticConfig, PPOCritic, training_algorithm
from .preemption import StopOnSignal, TrainingPreempted, any_process
from .reward_state import JUDGE_USAGE_NAME


class EpochSeededRepeatSampler(RepeatSampler):
    """`RepeatSampler` whose order is a function of `seed + epoch` alone (TRL's one generator runs on across epochs),
    so a resumed run sees the queries in the uninterrupted run's order. The trainer sets the epoch at each epoch's
    start (`SamplerEpoch`)."""

    epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        if self.shuffle and self.seed is not None:
            self.generator.manual_seed(self.seed + self.epoch)
        return super().__iter__()


class SamplerEpoch(TrainerCallback):
    """Gives the train sampler its epoch when the epoch begins. transformers' own `set_epoch` does not reach it when
    several processes resume in mid-epoch (accelerate's batch skipping wraps it once more), which replayed epoch 0's
    order there."""

    sampler: EpochSeededRepeatSampler | None = None

    def on_epoch_begin(self, args, state, control, **kwargs):
        if self.sampler is not None:
            self.sampler.set_epoch(int(state.epoch))  # a whole number at an epoch's start; a resume's e.g. 1.5 -> 1


logger = logging.get_logger(__name__)

_CHECKPOINT = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")


def checkpoint_folder(output_dir: str, step: int) -> str:
    """`output_dir/checkpoint-{step}`, where transformers saves step `step`."""
    return os.path.join(output_dir, f"{PREFIX_CHECKPOINT_DIR}-{step}")


def checkpoint_steps(output_dir: str) -> list[int]:
    """The steps N of the `checkpoint-N` folders in `output_dir`, newest first (none: empty)."""
    if not os.path.isdir(output_dir):
        return []
    return sorted((int(m.group(1)) for name in os.listdir(output_dir) if (m := _CHECKPOINT.match(name))), reverse=True)


#: what each checkpoint file the package checks holds, named in its errors
_CHECKED_FILES = {TRAINER_STATE_NAME: "TRL's trainer state", METHOD_STATE_NAME: "reward-method state",
                  JUDGE_USAGE_NAME: "judge usage totals"}  # fmt: skip


def check_checkpoint(checkpoint: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
    """Raise `CheckpointStateError` naming the file when one of `required` is missing, one of `required` or
    `optional` (where present) is not complete JSON, or `trainer_state.json` is not TRL's `TrainerState`, instead
    of a later `JSONDecodeError` that names no file."""
    for name in (*required, *(n for n in optional if n not in required)):
        path = os.path.join(checkpoint, name)
        if name not in required and not os.path.exists(path):
            continue
        data = read_json(path, _CHECKED_FILES.get(name, name))
        if name == TRAINER_STATE_NAME:
            try:
                if not isinstance(data, dict):
                    raise TypeError(f"a JSON object was expected, got {data!r:.60}")
                TrainerState(**data)
            except (TypeError, ValueError) as e:
                raise corrupt_entry(path, f"not TRL's trainer state ({e})") from None


def latest_complete_checkpoint(
    output_dir: str, required: tuple[str, ...] = (TRAINER_STATE_NAME, METHOD_STATE_NAME), optional: tuple[str, ...] = ()
) -> str:
    """The newest `checkpoint-N` in `output_dir` whose files pass `check_checkpoint`; half-written or damaged newer
    ones are skipped with a warning naming the file. Raises if there is none."""
    for step in checkpoint_steps(output_dir):
        path = checkpoint_folder(output_dir, step)
        try:
            check_checkpoint(path, required, optional)
        except CheckpointStateError as e:
            logger.warning(f"Skipping {path}: {e} (a save was interrupted, or the file was damaged)")
            continue
        return path
    raise ConfigError(
        f"resume_from_checkpoint=True (--resume_from_checkpoint latest), but {output_dir} holds no complete "
        f"checkpoint (a checkpoint-N folder with {' and '.join(required)}, complete); pass a checkpoint path, or "
        "start without resuming"
    )


#: Modules that bind `torch.distributed.group.WORLD` into default arguments when imported: imported after the group
#: exists, they keep it alive past `destroy_process_group` (a finished rank can abort at exit, -6); here, before.
WORLD_GROUP_DEFAULTS = (
    "deepspeed.comm.torch",
    "torch.distributed.nn.functional",
    "torch.distributed.fsdp.sharded_grad_scaler",
    "torch.distributed.optim.zero_redundancy_optimizer",
)
if torch.distributed.is_available():
    for _module in WORLD_GROUP_DEFAULTS:
        if importlib.util.find_spec(_module.split(".")[0]) is not None:
            importlib.import_module(_module)


class GRPOTrainerBase(GRPOTrainer):
    """TRL's `GRPOTrainer` with the package's sampler, checkpoints, resume and optional critic; `args` has the
    `CriticConfig` fields."""

    #: files a `checkpoint-N` of this trainer holds once complete (transformers writes trainer_state.json last),
    #: and files it may hold; both are checked before a resume (`check_checkpoint`)
    checkpoint_files: tuple[str, ...] = (TRAINER_STATE_NAME,)
    optional_checkpoint_files: tuple[str, ...] = ()
    #: the card's and the model's tags (TRL's `_tag_names`); `_paper` (TRL's) gives the card's citation
    _tag_names = ["trl", "grpo", "trl-rankreward"]

    def __init__(self, model, reward_funcs, args, **kwargs):
        self._card_dataset: str | None = None  # the dataset as the model card names it
        self._sampler_epoch = SamplerEpoch()  # given the train sampler by `_get_train_sampler`
        super().__init__(model, reward_funcs=reward_funcs, args=args, **kwargs)
        self._batch_rewards: torch.Tensor | None = None  # this batch's gathered reward columns, for the critic
        self._micro_batch: dict | None = None  # TRL's micro-batch of this step, for the critic's update
        self._ppo: PPOCritic | None = None
        if args.advantage_estimator == "gae":  # the critic gets what it needs of this trainer; it writes nothing back
            self._ppo = PPOCritic(args, self.accelerator, self.model, deepspeed=self.is_deepspeed_enabled,
                                  reward_weights=self.reward_weights, logps=self._get_per_token_logps_and_entropies,
                                  ref_model=self.ref_model, temperature=self.temperature)  # fmt: skip
            self.add_callback(self._ppo)  # steps the critic's optimizer after the policy's
        self._stop_on_signal = StopOnSignal(any_process(self.accelerator))  # SIGTERM/SIGINT: save, stop (preemption)
        self.add_callback(self._stop_on_signal)
        self.add_callback(self._sampler_epoch)
        add_judge_evaluation(self)  # the win-rate evaluation, when the config sets eval_prompts
        use_compact_console_log(self)  # one line per logging step (`console_log`), for every trainer

    @classmethod
    def check_datasets(cls, args, train_dataset, eval_dataset=None, *, reward_method=None) -> None:
        """Every row well-formed and holding what the config's method needs (`_data_needs`): the one row check, run
        by a judged trainer's `__init__` and by the training scripts before they read a prompt; a dataset that
        passed is not read again (`dataset_checks`)."""
        needs = cls._data_needs(args, reward_method)
        evals = eval_dataset.values() if isinstance(eval_dataset, dict) else [eval_dataset]
        for dataset in [train_dataset, *evals]:
            if dataset is not None:
                check_training_dataset(dataset, needs)

    @staticmethod
    def _data_needs(args, reward_method) -> DataNeeds | None:
        """What the method needs of each row beyond being well-formed; None here (no method)."""
        return None

    def _record(self, metrics: dict[str, float]) -> None:
        """Metrics of this step (the critic's), averaged by TRL at the next log."""
        mode = "train" if self.model.training else "eval"
        for key, value in metrics.items():
            self._metrics[mode][key].append(value)

    @property
    def critic(self) -> torch.nn.Module | None:
        """The critic being trained (wrapped by DDP or DeepSpeed when launched so); None with "group"."""
        return self._ppo.model if self._ppo is not None else None

    def _reward_columns(self, inputs, prompts, completions, completion_ids_list) -> torch.Tensor:
        """The gathered (B_total, n_reward_funcs) rewards of this batch: TRL's reward functions."""
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        self._batch_rewards = self._reward_columns(inputs, prompts, completions, completion_ids_list)
        return self._batch_rewards

    def _generate_and_score_completions(self, inputs):
        """TRL's rollout; with the critic, its GAE advantages replace TRL's group advantages."""
        self._batch_rewards = None
        output = super()._generate_and_score_completions(inputs)
        if self._ppo is not None:
            self._record(self._ppo.replace_advantages(output, self._batch_rewards))
        return output

    def _prepare_inputs(self, generation_batch):
        """TRL's micro-batch for this step, kept for the critic's update in `training_step`."""
        self._micro_batch = super()._prepare_inputs(generation_batch)
        return self._micro_batch

    def training_step(self, model, inputs, num_items_in_batch=None):
        """The policy's forward and backward (TRL), then the critic's on the same micro-batch."""
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self._ppo is not None:
            self._record(self._ppo.train_on(self._micro_batch, self.current_gradient_accumulation_steps))
        return loss

    def _compute_loss(self, model, inputs):
        loss = super()._compute_loss(model, inputs)
        if self._ppo is not None and not self.model.training:  # evaluation: the value loss is logged only
            with torch.no_grad():
                self._record(self._ppo.value_loss(inputs)[1])
        return loss

    def _get_train_sampler(self, dataset=None):
        """TRL's sampler, reseeded per epoch so that resuming keeps the data order (`EpochSeededRepeatSampler`)."""
        sampler = super()._get_train_sampler(dataset)
        sampler.__class__ = EpochSeededRepeatSampler  # the same sampler, ordered by its epoch
        self._sampler_epoch.sampler = sampler
        return sampler

    def create_model_card(self, model_name=None, dataset_name=None, tags=None, dataset_label=None):
        """TRL's card, rewritten around `_card_section` when a trainer has one (`model_card.compose_card`), citing
        `_paper`. `dataset_label` names a dataset that is not a Hub id; later calls keep it."""
        if dataset_label or dataset_name:
            self._card_dataset = dataset_label or dataset_name
        super().create_model_card(model_name=model_name, dataset_name=dataset_name, tags=tags)
        if not self.is_world_process_zero():
            return
        section = self._card_section(self._card_dataset)
        if section is not None:
            base_model = getattr(self.model.config, "_name_or_path", None) or None
            algorithm, evaluation = training_algorithm(self.args), evaluation_summary(self)
            text = training_section(algorithm=algorithm, base_model=base_model, evaluation=evaluation, **section)
            compose_card(os.path.join(self.args.output_dir, "README.md"), text, citation=self._paper.get("citation"),
                         model_ref=self.args.hub_model_id or self.args.output_dir)  # fmt: skip

    def _card_section(self, dataset: str | None) -> dict | None:
        """The card's trl-rankreward section: `model_card.training_section`'s method, settings, judge, dataset,
        usage and method_state; None keeps TRL's card."""
        return None

    @classmethod
    def latest_checkpoint(cls, output_dir: str) -> str:
        """The newest complete `checkpoint-N` of `output_dir` for this trainer (raises ValueError if none)."""
        return latest_complete_checkpoint(output_dir, cls.checkpoint_files, cls.optional_checkpoint_files)

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        """TRL's `train`; `resume_from_checkpoint=True`: `latest_checkpoint(output_dir)`; a path is checked first
        (`check_checkpoint`). SIGTERM/SIGINT saves a checkpoint and raises `TrainingPreempted` (`preemption`)."""
        if resume_from_checkpoint is True:
            resume_from_checkpoint = self.latest_checkpoint(self.args.output_dir)
        elif isinstance(resume_from_checkpoint, str):
            check_checkpoint(resume_from_checkpoint, (TRAINER_STATE_NAME,),
                             self.checkpoint_files + self.optional_checkpoint_files)  # fmt: skip
        with self._stop_on_signal.handling_signals():
            output = super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        if self._stop_on_signal.stopped:
            checkpoint = self._checkpoint_folder()
            logger.warning(f"trl-rankreward: stopped at step {self.state.global_step} of {self.state.max_steps} "
                           f"({self._stop_on_signal.signal_name}) and saved {checkpoint}. To continue, run the same "
                           "command with --resume_from_checkpoint latest (trainer.train(resume_from_checkpoint=True)).")  # fmt: skip
            raise TrainingPreempted(checkpoint, self._stop_on_signal.signal_name)
        return output

    def _checkpoint_folder(self, trial=None) -> str:
        """`checkpoint-N` of the current step."""
        return checkpoint_folder(self._get_output_dir(trial=trial), self.state.global_step)

    def _save_state(self, checkpoint: str) -> None:
        """Write this trainer's own files into `checkpoint` (main process only). Default: none."""

    def _load_state(self, checkpoint: str) -> None:
        """Read back what `_save_state` wrote (every process). Default: nothing."""

    def _save_checkpoint(self, model, trial):
        # Before TRL's save, which writes trainer_state.json last: a checkpoint with it holds our files too.
        checkpoint = self._checkpoint_folder(trial)
        if self._ppo is not None:
            self._ppo.save(checkpoint)  # every process: DeepSpeed writes one shard per rank
        if self.accelerator.is_main_process:
            os.makedirs(checkpoint, exist_ok=True)
            self._save_state(checkpoint)
        super()._save_checkpoint(model, trial)

    def _load_optimizer_and_scheduler(self, checkpoint):
        # Runs on resume under every backend (transformers skips `_load_from_checkpoint` under DeepSpeed).
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None:
            return
        if self._ppo is not None:
            self._ppo.load(checkpoint)
        self._load_state(checkpoint)

    def _issue_warnings_after_load(self, load_result):
        """Transformers' missing-keys warning, without the tied keys (saved once, under the weight they are tied to)."""
        if not hasattr(load_result, "_replace"):  # not torch's (missing_keys, unexpected_keys) named tuple
            return super()._issue_warnings_after_load(load_result)
        policy = self.accelerator.unwrap_model(self.model)
        tied = set(getattr(policy, "all_tied_weights_keys", None) or {})
        missing = [key for key in load_result.missing_keys if key not in tied]
        if len(missing) < len(load_result.missing_keys):
            policy.tie_weights()
        super()._issue_warnings_after_load(load_result._replace(missing_keys=missing))


@dataclass
class CriticPPOConfig(JudgeEvalConfig, CriticConfig, GRPOConfig):
    """`GRPOConfig` plus the critic (`CriticConfig`), with "gae" as the default: PPO for plain TRL reward functions."""

    advantage_estimator: str = field(
        default="gae",
        metadata={"help": "'gae': PPO with a learned critic; 'group': GRPO.", "choices": list(ADVANTAGE_ESTIMATORS)},
    )


class CriticPPOTrainer(GRPOTrainerBase):
    """PPO with a learned critic for any TRL reward functions: `GRPOTrainer`'s arguments, a `CriticPPOConfig`."""

    def __init__(self, model, reward_funcs, args: CriticPPOConfig | None = None, **kwargs):
        if not isinstance(args, CriticConfig):
            raise TypeError(f"CriticPPOTrainer needs args=CriticPPOConfig(...), got {type(args).__name__}")
        super().__init__(model, reward_funcs=reward_funcs, args=args, **kwargs)


__all__ = ["CriticPPOConfig", "CriticPPOTrainer"]
