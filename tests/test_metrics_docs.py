"""docs/metrics.md lists every metric the package logs, and nothing it does not log.

`scripts/make_docs.py` collects the logged names by running the code that logs them (every registered reward
method on two small groups for two epochs with an `OracleJudge`, a failing judge, the RankBuffer settings that
take other paths, the judge-usage helper with a failure of every kind, the win-rate evaluation) and by reading
the trainer modules that import trl; it writes one table row per name from docs/metrics.yaml, where `<n>` in a
name is a positive integer and `<kind>` / `<source>` any value of that closed set in the code.
tests/test_generated_docs.py checks that the page is current; this file checks the matching itself.
"""

from __future__ import annotations

import pytest

from tests.test_generated_docs import make_docs


@pytest.fixture(scope="module")
def sources() -> dict[str, set[str]]:
    return make_docs.metric_sources()


def test_every_logged_metric_has_a_row_and_every_row_is_logged(sources):
    make_docs._emitters(sources, make_docs.metric_rows())  # raises, naming the names and rows out of step


def test_the_sources_cover_every_namespace(sources):
    # A collector that silently stopped running (an import moved, a method renamed) would leave a namespace empty.
    logged = {name.split("/")[0] for names in sources.values() for name in names}
    assert logged >= {"judge", "reward", "rank", "buffer", "matrix", "genrm", "ralign", "ppo", "eval"}, logged


def test_patterns_match_only_the_values_the_code_can_produce():
    rows = make_docs.metric_rows()
    for value in make_docs.placeholder_values()["source"]:
        assert make_docs.matching_row(f"buffer/anchors_{value}", rows) == "buffer/anchors_<source>"
    for value in make_docs.placeholder_values()["kind"]:
        assert make_docs.matching_row(f"judge/failures_{value}", rows) == "judge/failures_<kind>"
    assert make_docs.matching_row("buffer/made_up_metric", rows) is None
    assert make_docs.matching_row("buffer/anchors_nowhere", rows) is None
    assert make_docs.matching_row("rank/bucket_size_hist_0", rows) is None  # <n> is a positive integer
    assert make_docs.matching_row("rank/bucket_size_hist_12", rows) == "rank/bucket_size_hist_<n>"
