"""benchmarks/fault_suite.py: three cheap cases through the benchmark's own code (a valid judge, a garbage
judge, a wrong model name), the two machine cases (a stale build lock, a hung launch), and `--write-docs`
rewriting only the table of the page (~30 s in all)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fault_suite  # noqa: E402


@pytest.fixture(scope="module")
def results(tiny_model_dir, tmp_path_factory):
    names = ["baseline", "garbage", "wrong_model"]
    work = tmp_path_factory.mktemp("fault_suite")
    found = fault_suite.run_suite(names, work, model_dir=tiny_model_dir, progress=lambda line: None)
    cases = [c for c in fault_suite.CASES if c.name in names]
    return {case.name: result for case, result in zip(cases, found, strict=True)}, cases, work


def test_baseline_continues_without_neutral_groups(results):
    baseline = results[0]["baseline"]
    assert (baseline.outcome, baseline.steps, baseline.neutral, baseline.data_lost) == ("continued", 6, 0, "0")
    assert baseline.failures == {} and baseline.as_expected == "yes"


def test_garbage_judge_stops_after_three_failed_batches_with_a_checkpoint(results):
    garbage = results[0]["garbage"]
    # prose from step 2: steps 2, 3, 4 are all neutral (2 groups each), then the breaker stops the run
    assert garbage.steps == 4 and garbage.neutral == 6
    assert garbage.outcome.startswith("stopped: JudgeFailureError: Judging keeps failing: every group was neutral in 3")
    assert "holds no JSON object" in garbage.error and "Thank you for sharing" in garbage.error  # quotes the failure
    assert "checkpoint-4" in garbage.error and "scripted-judge" in garbage.error  # the checkpoint, the judge
    assert garbage.failures["invalid"] > 0
    assert garbage.data_lost == "0" and garbage.as_expected == "yes"


def test_wrong_model_stops_before_any_step(results):
    wrong = results[0]["wrong_model"]
    assert wrong.steps == 0 and wrong.error_type == "BackendError"
    assert "'no-such-judge' is not served" in wrong.outcome and "['scripted-judge']" in wrong.outcome
    assert wrong.as_expected == "yes"


def test_a_stale_build_lock_stops_at_start_naming_the_file(tmp_path):
    case = next(c for c in fault_suite.CASES if c.name == "stale_build_lock")
    result = fault_suite.run_case(case, fault_suite.Context(model_dir="", work=tmp_path))
    assert result.error_type == "StaleBuildLock" and result.seconds < 5  # at once, not after a wait
    lock = (tmp_path / "stale_build_lock" / "torch_extensions" / "cpu_adam" / "lock").resolve()
    assert f"rm {lock}" in result.error and lock.exists()  # named for the user to remove, not removed
    assert result.as_expected == "yes"


def test_a_hung_launch_is_killed_with_all_its_processes(tmp_path):
    case = next(c for c in fault_suite.CASES if c.name == "hung_launch")
    result = fault_suite.run_case(case, fault_suite.Context(model_dir="", work=tmp_path))
    assert result.outcome == "stopped: TimeoutExpired: the launch was killed after 2 s, 0 of its processes left"
    assert result.data_lost == "0 (no process left)" and result.as_expected == "yes" and result.seconds < 30


def test_table_has_one_row_per_case_and_no_machine_paths(results):
    by_name, cases, work = results
    text = fault_suite.report(cases, [by_name[c.name] for c in cases], work, "python benchmarks/fault_suite.py", 1.0)
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| fault or input | injected | steps completed | groups neutral")
    assert len(rows) == 1 + len(cases)
    assert "| none (valid judge) | 0 | 6 | 0 | 0 | continued | 0 | yes |" in rows
    assert str(work) not in text and "<tmp>/garbage/checkpoint-4" in text
    assert "Versions: Python" in text and "Command: `python benchmarks/fault_suite.py`" in text


def test_write_docs_replaces_only_the_table(tmp_path):
    page = tmp_path / "page.md"
    before, after = "# Title\n\nIntro text.\n\n", "\n\nRegenerate with the command below.\n"
    page.write_text(before + f"{fault_suite.START_MARKER}\nold table\n{fault_suite.END_MARKER}" + after)
    fault_suite.write_docs(page, "| new | table |")
    fault_suite.write_docs(page, "| newer | table |")  # idempotent: markers kept, old table gone
    text = page.read_text()
    assert text == before + f"{fault_suite.START_MARKER}\n\n| newer | table |\n\n{fault_suite.END_MARKER}" + after
    page.write_text("no markers here\n")
    with pytest.raises(SystemExit, match="fault-table:start"):
        fault_suite.write_docs(page, "| t |")


def test_cli_writes_the_docs_page(tmp_path):
    page = tmp_path / "reliability.md"
    page.write_text(f"# Reliability\n\n{fault_suite.START_MARKER}\n{fault_suite.END_MARKER}\n\nThe end.\n")
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "fault_suite.py"), "--cases", "wrong_model", "duplicate_id",
         "--write-docs", str(page)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("| fault or input |")  # stdout: the report only
    text = page.read_text()
    assert text.startswith("# Reliability\n\n") and text.endswith("\n\nThe end.\n")
    assert "| wrong judge model name | config | 0 |" in text
    assert "query_id 'q0' is also used by row 0" in text
