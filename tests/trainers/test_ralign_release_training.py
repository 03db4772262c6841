"""`r_align_release` in training and as a downstream reward: the request log shows the authors' layout.

The prompts are a fake release folder's (text of our own, `testing.fakes`); the layout is
`rewards.ralign_release.pair_block`. One scripted server stands in for the MetaRM and the GenRM.
"""

from __future__ import annotations

import asyncio
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
datasets = pytest.importorskip("datasets")
pytest.importorskip("torch")

from tests.trainers.test_ralign import PAIRS, _config, _pairs  # noqa: E402
from tests.trainers.test_ralign import genrm_model as genrm_model  # noqa: E402, F401  (the fixture)
from trl_rankreward.rewards.ralign_release import RAlignRelease, pair_block  # noqa: E402
from trl_rankreward.testing.chat_servers import Reply, serve_chat_script  # noqa: E402
from trl_rankreward.testing.fakes import write_fake_release  # noqa: E402
from trl_rankreward.trainers.ralign import RAlignGenRMTrainer  # noqa: E402

TAGGED = "<genrm_analysis>names the key point</genrm_analysis>\n<final_verdict>Correct</final_verdict>"


def _scripted(messages):
    if messages[0]["role"] == "system":  # a GenRM request: prefer the first answer shown, thinking first
        return Reply("A covers the prompt.\n\\boxed{A}", reasoning="thinking \\boxed{B}?")
    return Reply(TAGGED)


@pytest.mark.slow
def test_genrm_training_step_uses_the_release_prompt_and_metarm(genrm_model, tmp_path):
    from transformers import AutoModelForCausalLM

    release_dir = write_fake_release(tmp_path / "R-Align")
    release = RAlignRelease.load(release_dir)
    with serve_chat_script(_scripted) as server:
        args = _config(tmp_path / "out", r_align_release=str(release_dir),
                       metarm_base_urls=[server.url], metarm_model="metarm")  # fmt: skip
        trainer = RAlignGenRMTrainer(AutoModelForCausalLM.from_pretrained(genrm_model), args=args,
                                     train_dataset=_pairs())  # fmt: skip
        # the GenRM is trained on the authors' prompt, the pair in the dataset's order
        for row, (question, a, b, label, _) in zip(trainer.train_dataset, PAIRS, strict=True):
            assert row["prompt"] == release.genrm_messages([{"role": "user", "content": question}], a, b)
            assert row["display_order"] == "ab" and row["display_label"] == label
        trainer.train()
        requests = list(server.requests)
    assert requests, "no label-correct sample reached the MetaRM"
    assert trainer.ralign.meta_calls == len(requests)
    blocks = {pair_block([{"role": "user", "content": q}], a, b): gold for q, a, b, _, gold in PAIRS}
    for body in requests:
        (message,) = body["messages"]
        assert message["role"] == "user" and body["model"] == "metarm"
        pair = next(p for p in blocks if message["content"].startswith(f"Test MetaRM.\n\nPair:\n{p}"))
        assert f"<golden_judge>\n{blocks[pair]}\n</golden_judge>" in message["content"]
    logs = {k: v for entry in trainer.state.log_history for k, v in entry.items()}
    assert logs["ralign/meta_failures"] == 0.0  # every tagged answer parsed


def test_downstream_genrm_reward_asks_in_the_release_layout(tmp_path):
    from trl_rankreward.rewards.base import Group
    from trl_rankreward.rewards.genrm_reward import GenRMPairwiseReward
    from trl_rankreward.trainers.judge_reward import build_training_judge, method_config

    release_dir = write_fake_release(tmp_path / "R-Align")
    release = RAlignRelease.load(release_dir)
    with serve_chat_script(_scripted) as server:
        args = method_config("genrm")(output_dir=str(tmp_path), judge_base_urls=[server.url], judge_model="genrm",
                                      r_align_release=str(release_dir), num_generations=2,
                                      per_device_train_batch_size=2, use_cpu=True)  # fmt: skip
        judge = build_training_judge(args)  # a GenRMJudge in the authors' layout: genrm_format defaults to true
        method = GenRMPairwiseReward(judge, args.method_options())
        group = Group("q1", "Name a prime.", (), ("7 is prime.", "9 is prime."), references=("7 is a prime number.",))
        (result,) = asyncio.run(method.score([group], epoch=0, step=0))
        requests = list(server.requests)
    assert len(requests) == 2  # one per rollout, against the reference
    shown = []
    for body in requests:
        system, user = body["messages"]
        assert system == {"role": "system", "content": release.genrm_system}
        first = (
            user["content"].split("<|The Start of Assistant A's Answer with User|>\n\n")[1].split("\n\n<|The End")[0]
        )
        second = (
            user["content"].split("<|The Start of Assistant B's Answer with User|>\n\n")[1].split("\n\n<|The End")[0]
        )
        assert user["content"] == pair_block([{"role": "user", "content": "Name a prime."}], first, second)
        shown.append((first, second))
    reference = group.references[0]
    shown_as = {}  # rollout -> the letter it was shown under
    for first, second in shown:
        assert reference in (first, second)
        shown_as[second if first == reference else first] = "B" if first == reference else "A"
    assert set(shown_as) == set(group.completions)
    # The server's content prefers Assistant A, but its reasoning writes \boxed{B} first: the first box
    # decides, so a rollout shown as B wins (s = 1) and one shown as A loses (s = 0). reward = 2s - 1 -
    # length penalty; lengths in words: rollouts 3, reference 5, |3 - 5| / 5 = 0.4, minus the 0.2
    # tolerance, times coef 1: penalty 0.2 for both.
    expected = [(1.0 if shown_as[c] == "B" else -1.0) - 0.2 for c in group.completions]
    assert result.rewards == pytest.approx(expected)
