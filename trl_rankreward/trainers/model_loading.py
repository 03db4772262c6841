"""How the trainers load the models they build beside TRL's policy: the PPO critic and the reference for KL-in-reward.

As TRL loads its own reference model (`GRPOTrainer.__init__`): the run's `model_init_kwargs`,
the policy's dtype and attention implementation, `trust_remote_code`, and `device_map=None` under
DDP or DeepSpeed. `device_map` matters: TRL's `create_model_from_path` picks `"auto"` on a GPU
machine, which spreads one process's copy over every visible GPU, and which transformers refuses
outright under ZeRO-3. Under DeepSpeed the reference is then sharded by TRL's `prepare_deepspeed`
(ZeRO-3 partitions it at load; without that wrapper its weights would stay empty shards).
"""

from __future__ import annotations

from accelerate.utils import DistributedType

#: launches where each process holds its own copy (DDP) or a shard (DeepSpeed): `device_map` must be None
ONE_DEVICE_PER_PROCESS = (DistributedType.MULTI_GPU, DistributedType.DEEPSPEED)


def load_kwargs(
    args, distributed_type, *, dtype, attn_implementation: str | None = None, of_policy: bool = True
) -> dict:
    """`from_pretrained` keyword arguments for a model loaded beside the policy (see the module docstring).

    `dtype` (and `attn_implementation` when the run leaves it unset) are the loaded policy's, so the
    critic and the reference compute as it does; `of_policy=False` (a critic from another checkpoint)
    drops the policy's `revision`, which names a commit of another repository.
    """
    kwargs = dict(args.model_init_kwargs or {})
    kwargs.setdefault("trust_remote_code", args.trust_remote_code)
    kwargs["dtype"] = dtype
    if kwargs.get("attn_implementation") is None and attn_implementation is not None:
        kwargs["attn_implementation"] = attn_implementation
    if not of_policy:
        kwargs.pop("revision", None)
    if distributed_type in ONE_DEVICE_PER_PROCESS:
        kwargs["device_map"] = None
    return kwargs


def load_reference(path: str, accelerator, args, *, dtype, attn_implementation: str | None, temperature: float):
    """The frozen reference policy at `path`, with TRL's fused LM head, prepared for this launch."""
    from trl.models import prepare_deepspeed
    from trl.trainer.utils import add_fused_lm_head, create_model_from_path, disable_dropout_in_model

    kwargs = load_kwargs(args, accelerator.distributed_type, dtype=dtype, attn_implementation=attn_implementation)
    reference = create_model_from_path(path, **kwargs)
    if args.disable_dropout:
        disable_dropout_in_model(reference)
    # TRL computes log-probs through a fused LM head it adds to its models; the reference needs it too.
    add_fused_lm_head(reference, temperature=temperature, cast_lm_head_to_fp32=args.cast_lm_head_to_fp32)
    if accelerator.distributed_type == DistributedType.DEEPSPEED:
        return prepare_deepspeed(reference, accelerator)
    return accelerator.prepare_model(reference, evaluation_mode=True)
