"""Every accelerate config parses and says what its name promises."""

from pathlib import Path

import pytest
import yaml
from accelerate.commands.config.config_args import load_config_from_file

CONFIGS = Path(__file__).resolve().parents[2] / "accelerate_configs"
# name -> (distributed_type, num_processes, num_machines, mixed_precision, zero_stage)
EXPECTED = {
    "zero3.yaml": ("DEEPSPEED", 8, 1, "bf16", 3),
    "zero2.yaml": ("DEEPSPEED", 8, 1, "bf16", 2),
    "multi_gpu.yaml": ("MULTI_GPU", 8, 1, "bf16", None),
    "single_gpu.yaml": ("NO", 1, 1, "bf16", None),
    "multi_node_zero3.yaml": ("DEEPSPEED", 16, 2, "bf16", 3),
    "multi_cpu.yaml": ("MULTI_GPU", 2, 1, "no", None),
    "zero3_cpu.yaml": ("DEEPSPEED", 2, 1, "no", 3),
    "zero3_offload.yaml": ("DEEPSPEED", 8, 1, "bf16", 3),
    "zero3_offload_cpu.yaml": ("DEEPSPEED", 2, 1, "no", 3),
}


def test_every_config_is_listed():
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_config_loads_with_expected_keys(name):
    raw = yaml.safe_load((CONFIGS / name).read_text())
    distributed_type, num_processes, num_machines, mixed_precision, zero_stage = EXPECTED[name]
    assert raw["distributed_type"] == distributed_type
    assert raw["num_processes"] == num_processes and raw["num_machines"] == num_machines
    assert raw["mixed_precision"] == mixed_precision
    assert raw.get("deepspeed_config", {}).get("zero_stage") == zero_stage
    config = load_config_from_file(str(CONFIGS / name))  # accelerate's own loader accepts every key
    assert config.num_processes == num_processes


def test_zero3_saves_a_16bit_model_for_push_to_hub():
    raw = yaml.safe_load((CONFIGS / "zero3.yaml").read_text())
    assert raw["deepspeed_config"]["zero3_init_flag"] and raw["deepspeed_config"]["zero3_save_16bit_model"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_only_offload_configs_offload_the_optimizer(name):
    offload = yaml.safe_load((CONFIGS / name).read_text()).get("deepspeed_config", {}).get("offload_optimizer_device")
    assert (offload == "cpu") == ("offload" in name), offload
