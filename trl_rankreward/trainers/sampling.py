"""A `RepeatSampler` whose shuffle is a function of the epoch, so a resumed run sees the same data.

TRL's `RepeatSampler` draws each epoch's permutation from one generator that advances
across epochs; a run resumed after an epoch boundary starts a fresh generator and so visits
the queries in a different order than the uninterrupted run. Transformers calls
`set_epoch(epoch)` on the sampler at the start of every epoch (also after a resume), and we
reseed there with `seed + epoch`. Epoch 0 keeps TRL's order exactly.
"""

from __future__ import annotations

from trl.trainer.utils import RepeatSampler


class EpochSeededRepeatSampler(RepeatSampler):
    """`RepeatSampler` reseeded with `seed + epoch` at every epoch (see the module docstring)."""

    def set_epoch(self, epoch: int) -> None:
        if self.shuffle and self.seed is not None:
            self.generator.manual_seed(self.seed + epoch)

    @classmethod
    def like(cls, sampler: RepeatSampler) -> EpochSeededRepeatSampler:
        return cls(
            data_source=sampler.data_source,
            mini_repeat_count=sampler.mini_repeat_count,
            batch_size=sampler.batch_size,
            repeat_count=sampler.repeat_count,
            shuffle=sampler.shuffle,
            seed=sampler.seed,
        )
