"""benchmarks/probe_validation.py: the verdict that sets the probe's recommendation beside the truth."""

import importlib.util
import sys

from tests.trainers.test_examples import ROOT
from trl_rankreward.evaluation import ProbeReport, ProbeRow, SwapTest

SCRIPT = ROOT / "benchmarks" / "probe_validation.py"
spec = importlib.util.spec_from_file_location("probe_validation", SCRIPT)
validation = sys.modules["probe_validation"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(validation)


def _report(recommended: str, tokens: dict[str, float]) -> ProbeReport:
    rows = [ProbeRow(method=m, reliability=0.5, reliability_se=None, tied_pairs=None, zero_advantage_groups=0.0,
                     neutral_groups=0.0, calls_per_group=1.0, tokens_per_group=t) for m, t in tokens.items()]  # fmt: skip
    return ProbeReport(rows=rows, recommended=recommended, reason="", margin=0.1, groups=3, repeats=2,
                       swap_test=SwapTest(), cost={})  # fmt: skip


def test_verdict_compares_the_recommendation_with_the_most_accurate_within_noise():
    accuracy = {"a": [0.8, 0.6, 0.7], "b": [0.7, 0.6, 0.5], "c": [0.2, 0.1, 0.2]}
    report = _report("c", {"a": 1000.0, "b": 100.0, "c": 10.0})
    v = validation.verdict(report, accuracy)
    # a is the most accurate (mean 0.7). a - b per group: 0.1, 0, 0.2 -> mean 0.1, sd 0.1, se 0.1/sqrt(3) = 0.058,
    # so b is within 2 se; a - c: 0.6, 0.5, 0.5 -> mean 0.53, se 0.033: c is not
    assert v["best"] == "a" and v["within_noise"] is False
    assert v["cheapest_good"] == "b" and v["cheapest_good_tokens"] == 100.0
    assert validation.verdict(_report("b", {"a": 1000.0, "b": 100.0, "c": 10.0}), accuracy)["within_noise"] is True
