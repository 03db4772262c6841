"""The keyword arguments of every model the trainers load themselves (critic, reference), per launch type.

The CUDA-only path is covered without a GPU: `create_model_from_path` is made to see a CUDA
device, where it would pick `device_map="auto"` (which transformers refuses under ZeRO-3 and
which spreads a DDP process's copy over every GPU), and `from_pretrained` records what it got.
"""

import types

import pytest
import torch
import transformers
from accelerate.utils import DistributedType

from trl_rankreward.trainers.base import CriticPPOConfig
from trl_rankreward.trainers.critic import ValueModel, load_kwargs


def run_args(**model_init_kwargs):
    return CriticPPOConfig(output_dir="unused", num_generations=1, use_cpu=True, bf16=False, report_to="none",
                           model_init_kwargs=model_init_kwargs or None)  # fmt: skip


@pytest.fixture
def recorded(monkeypatch):
    """The kwargs each from_pretrained call receives, on a machine that looks like it has a GPU."""
    calls = []
    import trl.trainer.utils as trl_utils

    class CudaState:
        device = torch.device("cuda")

    monkeypatch.setattr(trl_utils, "PartialState", CudaState)
    for cls in (transformers.Qwen3ForCausalLM, transformers.AutoModel):
        original = cls.from_pretrained.__func__

        def record(klass, path, *args, _original=original, **kwargs):
            calls.append(dict(kwargs))
            kwargs.pop("device_map", None)  # load on the CPU of this test machine
            return _original(klass, path, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(record))
    return calls


# (launch type, device_map the reference gets, device_map the critic gets; "absent" = not passed)
CASES = [
    (DistributedType.NO, "auto", "absent"),  # one process: TRL's own choice for its reference; critic moved later
    (DistributedType.MULTI_GPU, None, None),
    (DistributedType.DEEPSPEED, None, None),
]


@pytest.mark.parametrize(("launch", "reference_map", "critic_map"), CASES, ids=lambda c: str(c))
def test_reference_and_critic_load_kwargs_per_launch(tiny_model_dir, recorded, launch, reference_map, critic_map):
    from trl.trainer.utils import create_model_from_path

    args = run_args(revision="main", attn_implementation=None)
    create_model_from_path(
        tiny_model_dir, **load_kwargs(args, launch, dtype=torch.bfloat16, attn_implementation="sdpa")
    )
    ValueModel.from_pretrained(tiny_model_dir, **load_kwargs(args, launch, dtype=torch.bfloat16,
                                                             attn_implementation="sdpa", of_policy=False))  # fmt: skip
    reference, critic = recorded[-2], recorded[-1]
    assert reference.get("device_map", "absent") == reference_map
    assert critic.get("device_map", "absent") == critic_map
    for kwargs in (reference, critic):
        # the policy's dtype and attention (the run left attention unset), and TRL's trust_remote_code default
        assert kwargs["dtype"] == torch.bfloat16 and kwargs["attn_implementation"] == "sdpa"
        assert kwargs["trust_remote_code"] is False
    assert reference["revision"] == "main" and "revision" not in critic  # the policy's commit, not the critic's


def test_a_device_map_in_model_init_kwargs_is_overridden_under_ddp_and_deepspeed():
    args = run_args(device_map="auto", attn_implementation="eager")
    for launch in (DistributedType.MULTI_GPU, DistributedType.DEEPSPEED):
        kwargs = load_kwargs(args, launch, dtype=torch.float32, attn_implementation="sdpa")
        assert kwargs["device_map"] is None and kwargs["attn_implementation"] == "eager"
    assert load_kwargs(args, DistributedType.NO, dtype=torch.float32)["device_map"] == "auto"


def test_the_critic_optimizer_takes_the_runs_adam_settings_and_cpu_adam_under_offload():
    from trl_rankreward.trainers.critic import deepspeed_critic_optimizer

    args = types.SimpleNamespace(critic_learning_rate=3e-6, adam_beta1=0.8, adam_beta2=0.95, adam_epsilon=1e-6,
                                 weight_decay=0.1)  # fmt: skip
    params = [torch.nn.Parameter(torch.zeros(2))]
    plain = deepspeed_critic_optimizer(params, {"zero_optimization": {"stage": 3}}, args)
    assert isinstance(plain, torch.optim.AdamW)
    assert {k: plain.defaults[k] for k in ("lr", "betas", "eps", "weight_decay")} == {
        "lr": 3e-6, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.1}  # fmt: skip
    offload = {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}
    forced_off = deepspeed_critic_optimizer(params, {**offload, "zero_force_ds_cpu_optimizer": False}, args)
    assert isinstance(forced_off, torch.optim.AdamW)
    pytest.importorskip("deepspeed")
    cpu_adam = deepspeed_critic_optimizer(params, offload, args)  # DeepSpeed refuses a torch optimizer here
    assert type(cpu_adam).__name__ == "DeepSpeedCPUAdam" and cpu_adam.defaults["betas"] == (0.8, 0.95)
