"""R-Align GenRM trainer on CPU: a tiny model trains a few steps, parameters move, metrics are logged."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

datasets = pytest.importorskip("datasets")
torch = pytest.importorskip("torch")

from tests.trainers.helpers import moved, snapshot, tiny_config  # noqa: E402
from trl_rankreward.testing import build_tiny_model  # noqa: E402
from trl_rankreward.trainers.ralign import (  # noqa: E402
    RAlignGenRMConfig,
    RAlignGenRMTrainer,
    build_genrm_prompts,
    step_metrics,
)

PAIRS = [
    ("What is 2+3?", "5", "6", "A", "A computes the sum correctly; B has an arithmetic error."),
    ("Capital of France?", "Lyon", "Paris", "B", "B names the correct capital; A gives a wrong city."),
    ("Say hi politely.", "Hello, nice to meet you!", "hi.", "A", "A is polite as the instruction asks."),
    ("Name a prime.", "9", "7", "B", "B is prime; nine is divisible by three."),
]


def _pairs():
    return datasets.Dataset.from_list(
        [
            {
                "prompt": [{"role": "user", "content": q}],
                "response_a": a,
                "response_b": b,
                "label": lab,
                "golden_rationale": gold,
                "source": "toy",
                "pair_id": f"p{i}",
            }
            for i, (q, a, b, lab, gold) in enumerate(PAIRS)
        ]
    )


# The random tiny model never writes "\\boxed{A}" by chance, so every reward would be equal and
# nothing would train. We wire it into a bigram chain instead: with the attention and MLP outputs
# zeroed, the head sees only the current token, and its rows make "\n" -> "\\" -> "b" -> ... -> "{"
# -> "A" or "B" (equal logits) -> "}" -> <|im_end|> likely. Sampling then gives a mix of verdicts
# (and the odd invalid one), i.e. varied rewards; GRPO's gradients reach every zeroed weight.
_CHAIN = {"\n": "\\", "\\": "b", "b": "o", "o": "x", "x": "e", "e": "d", "d": "{", "{": "AB", "A": "}", "B": "}"}


def _boxed_bigram_model(model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)

    def tid(text):
        (i,) = tok(text, add_special_tokens=False)["input_ids"]  # single characters are single tokens
        return i

    edges = [(src, dst) for src, dsts in _CHAIN.items() for dst in dsts] + [("}", None)]
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        seen = model.model.norm(model.model.embed_tokens.weight)  # what the head sees at each token
        head = torch.zeros_like(seen)
        for src, dst in edges:
            target = tok.convert_tokens_to_ids("<|im_end|>") if dst is None else tid(dst)
            head[target] += 14.0 * seen[tid(src)] / seen[tid(src)].norm() ** 2
        model.config.tie_word_embeddings = False
        model.lm_head.weight = torch.nn.Parameter(head)
    model.save_pretrained(model_dir)


@pytest.fixture(scope="module")
def genrm_model(tmp_path_factory):
    model_dir = build_tiny_model(tmp_path_factory.mktemp("tiny_genrm"))
    _boxed_bigram_model(model_dir)
    return model_dir


def _config(tmp_path, **kw):
    return tiny_config(
        RAlignGenRMConfig, tmp_path, per_device_train_batch_size=4, max_completion_length=12, max_steps=2, **kw
    )


class CountingHook:
    """Deterministic MetaRM hook: consistent when the pair's label is A; counts its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, request):
        self.calls += 1
        return request.label == "A"


@pytest.mark.slow
def test_cpu_training_moves_parameters_and_logs(genrm_model, tmp_path):
    from transformers import AutoModelForCausalLM

    hook = CountingHook()
    model = AutoModelForCausalLM.from_pretrained(genrm_model)
    before = snapshot(model)
    trainer = RAlignGenRMTrainer(
        model,
        args=_config(tmp_path),
        train_dataset=_pairs(),
        meta_judge=hook,
    )
    trainer.train()
    assert moved(before, trainer.model), "no parameter changed"
    logs = {k for entry in trainer.state.log_history for k in entry}
    assert {"ralign/label_acc", "ralign/format_invalid", "ralign/meta_calls", "rewards/ralign/mean"} <= logs
    assert hook.calls > 0 and trainer.ralign.meta_calls == hook.calls  # only label-correct samples were judged

    # The model card says it is an R-Align GenRM, with the reward table and the citation.
    trainer.create_model_card(dataset_name="pairs-with-rationales")
    card = (tmp_path / "README.md").read_text()
    assert "`ralign`" in card and "| `reward_mode` | `'ralign'` |" in card and "**Dataset:** pairs-with-rationales" in card
    assert "R-Align: Enhancing Generative Reward Models" in card
    # the MetaRM hook by name (no repr with an address), the optimizer as configured, nothing printed as None
    assert "**Judge:** MetaRM hook CountingHook" in card and " object at 0x" not in card and "None" not in card
    expected = "PPO with a learned critic" if trainer.args.advantage_estimator == "gae" else "GRPO"
    assert f"**Training:** {expected}" in card


def test_reward_function_outcome_mode_batch():
    import asyncio

    from trl_rankreward.rewards.ralign_reward import RAlignReward
    from trl_rankreward.trainers.ralign import RAlignRewardFunction

    hook = CountingHook()
    fn = RAlignRewardFunction(RAlignReward(hook, mode="outcome"))
    logged = {}
    rewards = asyncio.run(
        fn(
            prompts=[None] * 3,
            completions=[[{"role": "assistant", "content": "\\boxed{A}"}], "\\boxed{A}", "nope"],
            response_a=["a"] * 3,
            response_b=["b"] * 3,
            label=["B", "A", "A"],
            golden_rationale=["g"] * 3,
            pair_prompt=["q"] * 3,
            display_order=["ba", "ab", "ab"],  # first: shown swapped, displayed A = canonical B = label
            log_metric=logged.__setitem__,
        )
    )
    assert rewards == [1.0, 1.0, -1.0] and hook.calls == 0
    assert logged["ralign/label_acc"] == pytest.approx(2 / 3) and logged["ralign/format_invalid"] == pytest.approx(
        1 / 3
    )


def test_config_validation(tmp_path):
    with pytest.raises(ValueError, match="reward_mode"):
        _config(tmp_path, reward_mode="ppo")
    with pytest.raises(ValueError, match="metarm_model"):
        _config(tmp_path, metarm_base_urls=["http://localhost:1/v1"])
    with pytest.raises(ValueError, match="correct_but_spurious"):
        _config(tmp_path, reward_correct_but_spurious=5.0)


def test_ralign_mode_without_metarm_is_refused(tmp_path):
    with pytest.raises(ValueError, match="needs a MetaRM"):
        RAlignGenRMTrainer("unused", args=_config(tmp_path), train_dataset=_pairs())


def test_build_genrm_prompts_columns():
    ds = build_genrm_prompts(_pairs(), seed=0)
    assert {"pair_prompt", "display_order", "display_label"} <= set(ds.column_names)
    # canonical label kept; display label flips exactly when the order is swapped
    for row in ds:
        assert (row["display_label"] == row["label"]) == (row["display_order"] == "ab")
    with pytest.raises(ValueError, match="golden_rationale"):
        build_genrm_prompts(_pairs().remove_columns("golden_rationale"), seed=0)


def test_step_metrics_by_hand():
    # 4 samples: consistent, spurious, wrong, invalid -> label_acc 2/4, S-Corr 1/2, invalid 1/4
    m = step_metrics(["consistent", "spurious", "wrong", "invalid"], meta_calls=2)
    assert m == {
        "ralign/label_acc": 0.5,
        "ralign/format_invalid": 0.25,
        "ralign/spurious_rate": 0.5,
        "ralign/meta_calls": 2.0,
        "ralign/meta_failures": 0.0,
    }
    assert "ralign/spurious_rate" not in step_metrics(["wrong"], meta_calls=0)  # no judged sample: no rate


def test_training_and_eval_genrm_build_the_same_metarm_from_one_declaration(tmp_path, models_server):
    # The stub server lists model "m" (tests.conftest.models_server). The trainer builds its MetaRM as
    # build_judge(METARM.settings(args)); eval-genrm through make_meta_judge. Both read METARM's
    # defaults: the authors' metarm_judge.py decoding (temperature 0.4, 16K tokens), three tries.
    from trl_rankreward.cli import parse_command
    from trl_rankreward.commands import eval_genrm
    from trl_rankreward.judging.server_settings import METARM, build_judge

    template = tmp_path / "metarm.yaml"
    template.write_text(
        "meta: |\n  Custom MetaRM prompt. {QUERY} {RESPONSE_A} {RESPONSE_B} {GOLDEN_RATIONALE} {RATIONALE}\n"
        "  Answer <final_verdict>Correct</final_verdict> or <final_verdict>Incorrect</final_verdict>.\n"
    )
    args = _config(tmp_path, metarm_base_urls=[models_server], metarm_model="m", metarm_templates=str(template))
    _, (_, _, metarm) = parse_command("eval-genrm", eval_genrm, ["--dataset_name", "d", "--output_file", "o", "--genrm_local", "g",
                                      "--metarm_base_urls", models_server, "--metarm_model", "m",
                                      "--metarm_templates", str(template)])  # fmt: skip
    trained, evaluated = build_judge(METARM.settings(args)), eval_genrm.make_meta_judge(metarm)

    def decoding(judge):
        return (judge.temperature, judge.max_tokens, judge.retry.max_attempts, judge.backend.timeout_s,
                judge.backend.max_concurrency, judge.templates.meta)  # fmt: skip

    assert decoding(trained) == decoding(evaluated)
    assert decoding(trained)[:5] == (0.4, 16384, 3, 120.0, 64)
    assert trained.templates.meta.startswith("Custom MetaRM prompt.")
