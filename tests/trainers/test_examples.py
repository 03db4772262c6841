"""Every YAML under examples/ parses with the example's TrlParser; the paper config holds Table 7's values."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
YAMLS = sorted((ROOT / "examples").rglob("*.yaml"))


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# Each YAML belongs to the example script of the method it names (examples/config_scripts.py, shared with the
# launch matrix); every script has `make_parser()`.
script_for = load_example("config_scripts").script_for


def parse(path: Path, *extra: str):
    # bf16 needs a GPU at config time; on the CPU test machine we override it (and only it).
    cpu = ["--bf16", "false", "--use_cpu", "true"] if "cpu" not in path.name else []
    parser = load_example(script_for(path)).make_parser()
    return parser.parse_args_and_config(["--config", str(path), *cpu, *extra])


def test_examples_have_yaml_configs():
    assert {p.name for p in YAMLS} >= {"rankbuffer_qwen3_8b.yaml", "rankbuffer_cpu_quickstart.yaml"}


def test_every_registered_method_has_a_cpu_and_a_paper_config():
    # a config names its method (`reward_method`); every method of the registry has a `*_cpu*.yaml` (a tiny
    # model, the embedded judge) and a `*_qwen3_8b.yaml`, each trained by the method's script
    import yaml

    from trl_rankreward.rewards.registry import REWARD_METHODS
    from trl_rankreward.trainers.judge_reward import script_for_method

    configs = {p: yaml.safe_load(p.read_text()) for p in YAMLS if p.parent.name == "configs"}
    for method in REWARD_METHODS:
        mine = [p for p, values in configs.items() if values.get("reward_method") == method]
        cpu = [p for p in mine if "_cpu" in p.name]
        paper = [p for p in mine if p.name.endswith("_qwen3_8b.yaml")]
        baseline_cpu = ROOT / "examples" / "configs" / "baseline_cpu.yaml"  # --reward_method NAME for a baseline
        assert cpu or script_for_method(method).endswith("train_baseline.py") and baseline_cpu in configs, method
        assert paper or method not in ("rank_buffer_plus", "listwise_group"), method
        for path in cpu + paper:
            assert f"examples/{script_for(path)}.py" == script_for_method(method), path.name


@pytest.mark.parametrize("path", YAMLS, ids=lambda p: p.name)
def test_yaml_parses(path):
    parsed = parse(path)
    assert parsed and all(p is not None for p in parsed)


@pytest.mark.parametrize("path", [p for p in YAMLS if p.name.startswith("rankbuffer")], ids=lambda p: p.name)
def test_rankbuffer_yaml_selects_rank_buffer(path):
    script_args, training_args, model_args = parse(path)
    assert script_args.dataset_name and model_args.model_name_or_path
    assert training_args.reward_method == "rank_buffer"


def test_paper_config_matches_table_7():
    script_args, args, model_args = parse(ROOT / "examples" / "configs" / "rankbuffer_qwen3_8b.yaml")
    assert model_args.model_name_or_path == "Qwen/Qwen3-8B"
    assert args.judge_model == "Qwen/Qwen3-30B-A3B-Instruct-2507" and args.judge_base_urls
    assert (args.num_generations, args.learning_rate, args.lambda_fmt) == (8, 1e-6, 0.2)
    assert (args.k0, args.inactivity_epochs, args.buffer_init) == (4, 3, "references")
    assert (args.temperature, args.top_p, args.top_k) == (0.6, 0.95, 20)
    assert (script_args.max_prompt_length, args.max_completion_length) == (4096, 4096)
    # 20 queries per step: per-device batch x 4 processes x accumulation = 20 x G completions.
    assert args.per_device_train_batch_size * 4 * args.gradient_accumulation_steps == 20 * args.num_generations


def test_cli_overrides_config_values():
    _, args, _ = parse(
        ROOT / "examples" / "configs" / "rankbuffer_cpu_quickstart.yaml", "--k0", "7", "--report_to", "wandb"
    )
    assert args.k0 == 7 and args.report_to == ["wandb"]
