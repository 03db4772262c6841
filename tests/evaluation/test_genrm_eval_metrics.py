"""L-Acc / S-Corr / F-Score on a hand-made set with known counts."""

import pytest

from trl_rankreward.evaluation.genrm_eval import GenRMCounts, format_table, metrics_by_source

# 10 samples of dataset "hs3":
#   1 call failure, 1 parse failure, 2 wrong, 4 consistent, 1 spurious, 1 meta failure
HS3 = ["call_failed", "invalid", "wrong", "wrong", "consistent", "consistent", "consistent", "consistent"]
HS3 += ["spurious", "meta_failed"]
# 4 samples of dataset "rb2": 3 consistent, 1 spurious
RB2 = ["consistent", "consistent", "consistent", "spurious"]


def test_counts_by_hand():
    c = GenRMCounts.from_statuses(HS3)
    # correct = consistent 4 + spurious 1 + meta_failed 1 = 6 -> L-Acc = 6/10
    assert (c.correct, c.samples, c.l_acc) == (6, 10, pytest.approx(0.6))
    # meta-judged = 4 + 1 = 5; spurious 1 -> S-Corr = 1/5
    assert (c.spurious, c.meta_judged, c.s_corr) == (1, 5, pytest.approx(0.2))
    # valid = 10 - 1 call - 1 parse = 8; fidelity known = 10 - 1 meta failure = 9 (the authors'
    # denominator: GenRM call/parse failures stay in it) -> F = 4/9
    assert (c.valid, c.fidelity_known, c.f_score) == (8, 9, pytest.approx(4 / 9))


def test_by_source_and_overall():
    records = [("hs3", s) for s in HS3] + [("rb2", s) for s in RB2]
    out = metrics_by_source(records)
    assert list(out) == ["hs3", "rb2", "all"]
    rb2 = out["rb2"].as_dict()
    # rb2: L-Acc 4/4, S-Corr 1/4, F-Score 3/4 (all valid, no meta failure)
    assert (rb2["l_acc"], rb2["s_corr"], rb2["f_score"]) == (1.0, 0.25, 0.75)
    assert (rb2["l_acc_den"], rb2["s_corr_den"], rb2["f_score_den"]) == (4, 4, 4)
    every = out["all"].as_dict()
    # all: correct 6+4 = 10 of 14; spurious 1+1 = 2 of 5+4 = 9 judged; consistent 4+3 = 7 of 9+4 = 13
    assert (every["l_acc_num"], every["l_acc_den"]) == (10, 14)
    assert (every["s_corr_num"], every["s_corr_den"]) == (2, 9)
    assert (every["f_score_num"], every["f_score_den"]) == (7, 13)
    assert (every["call_failures"], every["parse_failures"], every["meta_failures"]) == (1, 1, 1)
    table = format_table(out)
    assert "60.0% (6/10)" in table and "20.0% (1/5)" in table and "44.4% (4/9)" in table


def test_empty_denominators_are_none_and_unknown_status_rejected():
    c = GenRMCounts.from_statuses(["wrong", "invalid"])
    assert c.s_corr is None and c.l_acc == 0.0
    assert "n/a" in format_table({"x": c})
    with pytest.raises(ValueError, match="Unknown sample status"):
        GenRMCounts.from_statuses(["great"])
