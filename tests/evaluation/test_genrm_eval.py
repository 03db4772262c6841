"""The GenRM benchmark run on a hand-made set with a scripted GenRM and MetaRM, and its CLI."""

import asyncio
import json

import pytest

from trl_rankreward.cli import main
from trl_rankreward.commands import eval_genrm
from trl_rankreward.evaluation.genrm_eval import evaluate_genrm
from trl_rankreward.judging.backends.base import BackendError, Completion


class ScriptedGenRM:
    """Answers per pair from the prompt text: 'right', 'wrong', 'garbage' or a transport error.

    The scripted answer names the canonical response to prefer; the displayed letter is found
    by locating that response's text in the rendered prompt, so the display order is exercised.
    """

    def __init__(self, plan):
        self.plan = plan  # prompt text -> (behaviour, rationale)

    async def complete(self, messages, *, temperature=0.0, max_tokens=1024, response_format=None):
        user = messages[-1]["content"]
        prompt = user.split("[User Prompt]\n")[1].split("\n[End of User Prompt]")[0]
        behaviour, rationale, better_text = self.plan[prompt]
        if behaviour == "error":
            raise BackendError("connection refused", kind="transport")
        if behaviour == "garbage":
            return Completion("I think both are fine.")
        first = user.split("[Response A]\n")[1].split("\n[End of Response A]")[0]
        shown = "A" if (first == better_text) == (behaviour == "right") else "B"
        return Completion(f"{rationale} \\boxed{{{shown}}}")


class RationaleMeta:
    """Consistent iff the GenRM's rationale mentions 'formula'."""

    def __init__(self):
        self.asked = 0

    async def judge(self, request):
        self.asked += 1
        return "formula" in request.rationale


def _rows():
    # (source, prompt, behaviour, rationale); the preferred response text is "good-<i>"
    spec = [
        ("hs3", "q0", "right", "uses the formula"),  # consistent
        ("hs3", "q1", "right", "is longer"),  # spurious
        ("hs3", "q2", "wrong", "uses the formula"),  # wrong (not meta-judged)
        ("hs3", "q3", "garbage", ""),  # parse failure
        ("rb2", "q4", "error", ""),  # call failure
        ("rb2", "q5", "right", "formula again"),  # consistent
    ]
    rows, plan = [], {}
    for i, (source, prompt, behaviour, rationale) in enumerate(spec):
        good, bad = f"good-{i}", f"bad-{i}"
        label = "A" if i % 2 == 0 else "B"
        a, b = (good, bad) if label == "A" else (bad, good)
        rows.append(dict(prompt=prompt, response_a=a, response_b=b, label=label, golden_rationale="formula",
                         source=source, pair_id=f"p{i}"))  # fmt: skip
        plan[prompt] = (behaviour, rationale, good)
    return rows, plan


#: the status of each `_rows()` sample, read off its spec comments (both MetaRMs call q0 and q5 consistent)
ROW_STATUSES = ["consistent", "spurious", "wrong", "invalid", "call_failed", "consistent"]


def test_evaluate_by_hand():
    rows, plan = _rows()
    meta = RationaleMeta()
    report = asyncio.run(evaluate_genrm(rows, ScriptedGenRM(plan), meta, progress=False))
    assert [r.status for r in report.records] == ROW_STATUSES
    assert meta.asked == 3  # only the three label-correct answers
    hs3 = report.metrics["hs3"].as_dict()
    # hs3: 4 samples, correct 2 -> L-Acc 2/4; judged 2, spurious 1 -> S-Corr 1/2;
    # F-Score 1/4: the parse failure stays in the denominator (the authors' samples - MetaRM failures)
    assert (hs3["l_acc_num"], hs3["l_acc_den"], hs3["s_corr_num"], hs3["s_corr_den"]) == (2, 4, 1, 2)
    assert (hs3["f_score_num"], hs3["f_score_den"], hs3["parse_failures"]) == (1, 4, 1)
    rb2 = report.metrics["rb2"].as_dict()
    # rb2: 2 samples, 1 call failure; correct 1 -> L-Acc 1/2; F-Score 1/2 (the call failure counts)
    assert (rb2["l_acc"], rb2["f_score"], rb2["call_failures"]) == (0.5, 0.5, 1)


def test_metarm_needs_golden_rationales():
    rows, plan = _rows()
    rows[0]["golden_rationale"] = ""
    with pytest.raises(ValueError, match="golden_rationale"):
        asyncio.run(evaluate_genrm(rows, ScriptedGenRM(plan), RationaleMeta(), progress=False))


def test_cli_prints_denominators_and_writes_json(tmp_path, monkeypatch, capsys):
    rows, plan = _rows()
    data = tmp_path / "pairs.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    monkeypatch.setattr(eval_genrm, "make_genrm_backend", lambda genrm: ScriptedGenRM(plan))
    monkeypatch.setattr(eval_genrm, "make_meta_judge", lambda metarm, seed=0: RationaleMeta())
    out = tmp_path / "eval.json"
    assert main(["eval-genrm", "--dataset_name", str(data), "--output_file", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "50.0% (2/4)" in printed and "25.0% (1/4)" in printed  # hs3 L-Acc and F-Score with denominators
    report = json.loads(out.read_text())
    assert report["metrics"]["all"]["l_acc_den"] == 6 and len(report["records"]) == 6


def test_cli_decodes_with_the_genrm_settings(tmp_path, monkeypatch):
    # --genrm_* are the judge-server settings with the GenRM's prefix: they reach the benchmark run.
    from trl_rankreward.evaluation import genrm_eval

    rows, plan = _rows()
    data = tmp_path / "pairs.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    monkeypatch.setattr(eval_genrm, "make_genrm_backend", lambda genrm: ScriptedGenRM(plan))
    seen = {}

    async def recording(rows, backend, meta_judge, **kwargs):
        seen.update(kwargs)
        return await evaluate_genrm(rows, backend, meta_judge, **kwargs)

    monkeypatch.setattr(genrm_eval, "evaluate_genrm", recording)
    argv = ["eval-genrm", "--dataset_name", str(data), "--output_file", str(tmp_path / "o.json"), "--no_metarm"]
    assert main(argv) == 0
    from trl_rankreward.rewards.ralign_reward import OWN_PROTOCOL

    assert seen.pop("protocol") is OWN_PROTOCOL  # without --r_align_release: our prompt and display order
    assert seen == {"seed": 0, "temperature": 0.0, "max_tokens": 4096, "concurrency": 32}  # GENRM's defaults
    assert main([*argv, "--genrm_seed", "5", "--genrm_temperature", "0.6", "--genrm_max_tokens", "64",
                 "--genrm_max_concurrency", "3"]) == 0  # fmt: skip
    assert seen.pop("protocol") is OWN_PROTOCOL
    assert seen == {"seed": 5, "temperature": 0.6, "max_tokens": 64, "concurrency": 3}


class MetaJSONBackend:
    """A MetaRM server stand-in: answers the R-Align meta template in its JSON format."""

    def __init__(self):
        self.prompts = []

    async def complete(self, messages, *, temperature=0.0, max_tokens=1024, response_format=None):
        text = messages[-1]["content"]
        self.prompts.append(text)
        consistent = "uses the formula" in text or "formula again" in text
        return Completion(json.dumps({"key_discriminators": ["formula"], "covered": [consistent],
                                      "consistent": consistent}))  # fmt: skip


def test_llm_metarm_through_the_judging_layer():
    from trl_rankreward.judging.llm_judge import LLMJudge

    rows, plan = _rows()
    meta = LLMJudge(MetaJSONBackend())
    report = asyncio.run(evaluate_genrm(rows, ScriptedGenRM(plan), meta, progress=False))
    assert [r.status for r in report.records] == ROW_STATUSES
    assert meta.ledger.parsed == 3  # meta calls counted in the judge's ledger: label-correct answers only
    assert "GOLDEN RATIONALE" in meta.backend.prompts[0]


@pytest.mark.slow
def test_cli_with_a_local_tiny_genrm(tmp_path, capsys):
    from trl_rankreward.testing import build_tiny_model

    model_dir = build_tiny_model(tmp_path / "tiny")
    rows, _ = _rows()
    data = tmp_path / "pairs.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n")
    out = tmp_path / "eval.json"
    args = ["eval-genrm", "--dataset_name", str(data), "--genrm_local", str(model_dir), "--no_metarm"]
    assert main([*args, "--genrm_max_tokens", "4", "--output_file", str(out)]) == 0
    metrics = json.loads(out.read_text())["metrics"]["all"]
    # a random model never writes a boxed verdict in 4 tokens: 2 parse failures, L-Acc 0/2
    assert (metrics["samples"], metrics["parse_failures"], metrics["l_acc"]) == (2, 2, 0.0)
    assert "0.0% (0/2)" in capsys.readouterr().out


def test_the_command_says_how_many_prompts_it_cut_to_the_genrm_window(tmp_path, capsys):
    from trl_rankreward.testing.judge_replica import serve_judge_replica

    data = tmp_path / "pairs.jsonl"
    long_a, long_b = " ".join(f"w{i}" for i in range(2500)), " ".join(["same"] * 2500)
    data.write_text(
        json.dumps(dict(prompt="Explain tides.", response_a=long_a, response_b=long_b, label="A", pair_id="long"))
        + "\n"
        + json.dumps(dict(prompt="2+2?", response_a="4", response_b="5", label="A", pair_id="short"))
        + "\n"
    )
    out = tmp_path / "out.json"
    with serve_judge_replica(max_model_len=2500, tokenize=True) as replica:
        argv = ["eval-genrm", "--dataset_name", str(data), "--output_file", str(out), "--no_metarm",
                "--genrm_base_urls", replica, "--genrm_model", replica.model]  # fmt: skip
        assert main(argv) == 0
        assert (replica.refused, replica.answered) == (0, 2)
    printed = capsys.readouterr().out
    assert "GenRM window: 1 prompt(s) cut to fit (" in printed and "0 pair(s) too long to send" in printed
    assert json.loads(out.read_text())["window"]["truncated_requests"] == 1


def test_r_align_release_runs_offline_against_the_judge_replica(tmp_path, capsys):
    # The command a user without a GPU tries (README): the replica as GenRM and MetaRM, a fake release folder.
    # Replica quality = distinct words; the GenRM boxes the response with more, A on a tie (release: no swap):
    #   r0: A 4 > B 1 -> A, label A: correct;  r1: A 1 < B 3 -> B, label B: correct
    #   r2: A 3 > B 1 -> A, label B: wrong;    r3: A 2 = B 2 -> A, label A: correct
    # L-Acc 3/4. The MetaRM sees the GenRM's answer ("Response A is better on the decisive criteria."
    # + the box: 9 distinct words >= meta_threshold 5), so all 3 correct ones are consistent: F-Score 3/4.
    from trl_rankreward.testing import serve_judge_replica, write_fake_release

    rows = [("r0", "one two three four", "one one", "A"), ("r1", "x", "alpha beta gamma", "B"),
            ("r2", "red green blue", "red", "B"), ("r3", "same words", "words same", "A")]  # fmt: skip
    data = tmp_path / "bmk.jsonl"
    data.write_text("".join(
        json.dumps({"id": i, "conversations": [{"role": "user", "content": f"question {i}"}], "response_A": a,
                    "response_B": b, "gt_label": label, "gt_judgment": f"{label} is right."}) + "\n"
        for i, a, b, label in rows
    ))  # fmt: skip
    out, release = tmp_path / "out.json", write_fake_release(tmp_path / "release")
    with serve_judge_replica() as replica:
        argv = ["eval-genrm", "--dataset_name", str(data), "--output_file", str(out), "--r_align_release", str(release),
                "--genrm_base_urls", replica, "--genrm_model", replica.model,
                "--metarm_base_urls", replica, "--metarm_model", replica.model]  # fmt: skip
        assert main(argv) == 0
        assert (replica.answered, replica.refused) == (4 + 3, 0)  # 4 GenRM calls, 3 MetaRM calls
    metrics = json.loads(out.read_text())["metrics"]["all"]
    assert (metrics["l_acc"], metrics["s_corr"], metrics["f_score"]) == (0.75, 0.0, 0.75)
    assert (metrics["call_failures"], metrics["parse_failures"]) == (0, 0)


def test_the_judge_replica_help_names_every_flag_and_its_model(capsys):
    from trl_rankreward.testing import judge_replica

    with pytest.raises(SystemExit):
        judge_replica.main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for flag in ("--port", "--model", "--slots", "--latency-s", "--max-model-len", "--no-tokenize"):
        assert flag in shown
    assert "default: scripted-judge" in shown and "R-Align authors' GenRM and MetaRM layouts" in shown
