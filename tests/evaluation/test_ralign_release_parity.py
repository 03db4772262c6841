"""Parity with the R-Align authors' own scripts: the same requests and the same counts, per file.

Needs a checkout of github.com/lyn22333/R-Align in R_ALIGN_RELEASE_DIR (skipped otherwise). Their
`generate_model_judgment.py`, `metarm_judge.py` and `show_result.py` run as they are (copied into a
temporary folder, because they write their results next to themselves) against one scripted
server (`ralign_bmk_fixtures.scripted_answer`: answers depend only on the messages), then
`trl-rankreward eval-genrm --r_align_release DIR` runs against the same server. Asserted: the set
of distinct GenRM requests and the set of distinct MetaRM requests are identical, and per file the
L-Acc, S-Corr and F-Score numerators and denominators are, as are the per-pair outcomes.

One shim, for time only: their client sleeps 1-3 s before each of up to 15 (GenRM) or 50
(MetaRM) retries of a request that always fails; a `sitecustomize.py` on their PYTHONPATH caps
`time.sleep` at 10 ms. Their imports (openai, tqdm) are in the environment as they are.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.evaluation.ralign_bmk_fixtures import BENCHMARKS, scripted_answer, split_requests, write_bmk_files
from trl_rankreward.cli import main
from trl_rankreward.testing.chat_servers import serve_chat_script

RELEASE = os.environ.get("R_ALIGN_RELEASE_DIR", "")
pytestmark = pytest.mark.skipif(
    not Path(RELEASE or "/nonexistent", "generate_model_judgment.py").is_file(),
    reason="set R_ALIGN_RELEASE_DIR to a checkout of github.com/lyn22333/R-Align to run the authors' scripts",
)
SCRIPTS = ("generate_model_judgment.py", "metarm_judge.py", "request_api.py", "show_result.py")
SLEEP_SHIM = "import time\n_sleep = time.sleep\ntime.sleep = lambda s: _sleep(min(s, 0.01))\n"


def _run_authors(workdir: Path, data: Path, url: str) -> Path:
    """Their run.sh, step by step, for our two files; returns their result_metarm folder."""
    authors, shim = workdir / "authors", workdir / "shim"
    authors.mkdir()
    shim.mkdir()
    for name in SCRIPTS:
        shutil.copy(Path(RELEASE, name), authors / name)
    (shim / "sitecustomize.py").write_text(SLEEP_SHIM)
    env = {**os.environ, "PYTHONPATH": str(shim)}

    def run(*args):
        done = subprocess.run([sys.executable, *map(str, args)], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]

    for bench in BENCHMARKS:
        run(authors / "generate_model_judgment.py", "--input_jsonl", data / f"{bench}.jsonl", "--model", "genrm",
            "--base_url", url, "--api_key", "x", "--temperature", "0.4", "--max_tokens", "8192",
            "--num_threads", "16", "--overwrite")  # fmt: skip
    for bench in BENCHMARKS:
        run(authors / "metarm_judge.py", "--input_jsonl", authors / "result" / f"{bench}__genrm.jsonl",
            "--model", "metarm", "--base_url", url, "--api_key", "x", "--max_tokens", "16384",
            "--num_threads", "16", "--overwrite")  # fmt: skip
    run(authors / "show_result.py")
    assert (authors / "results_summary.csv").is_file()
    return authors / "result_metarm"


def _their_counts(result_dir: Path) -> dict[str, dict]:
    """Per benchmark, their `show_result.FileStats` as our numerators and denominators."""
    spec = importlib.util.spec_from_file_location("authors_show_result", result_dir.parent / "show_result.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    counts = {}
    for path in sorted(result_dir.glob("*.jsonl")):
        st = module.compute_file_stats(path)
        counts[st.bench_name] = {
            "l_acc": (st.label_correct, st.total),
            "s_corr": (st.metarm_incorrect, st.metarm_correct + st.metarm_incorrect),
            "f_score": (st.metarm_correct, st.total - st.metarm_call_fail - st.metarm_parse_fail),
        }
    return counts


def _their_outcomes(result_dir: Path) -> dict[str, str]:
    out = {}
    for path in result_dir.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            verdict = row["metarm_verdict"]
            out[row["id"]] = {"SkippedLabelMismatch": "not label-correct", "Correct": "consistent",
                              "Incorrect": "spurious"}.get(verdict, "meta failed")  # fmt: skip
    return out


def _our_outcomes(report: dict) -> dict[str, str]:
    names = {"consistent": "consistent", "spurious": "spurious", "meta_failed": "meta failed"}
    return {r["pair_id"]: names.get(r["status"], "not label-correct") for r in report["records"]}


def _table(theirs: dict, ours: dict) -> str:
    lines = ["file | L-Acc theirs / ours | S-Corr theirs / ours | F-Score theirs / ours"]
    for bench in BENCHMARKS:
        cells = [f"{'/'.join(map(str, theirs[bench][k]))} / {'/'.join(map(str, ours[bench][k]))}"
                 for k in ("l_acc", "s_corr", "f_score")]  # fmt: skip
        lines.append(f"{bench} | " + " | ".join(cells))
    return "\n".join(lines)


def test_eval_genrm_sends_the_authors_requests_and_counts_as_they_do(tmp_path, capsys):
    data = tmp_path / "data"
    write_bmk_files(data)
    with serve_chat_script(scripted_answer) as server:
        their_dir = _run_authors(tmp_path, data, server.url)
        their_genrm, their_metarm = split_requests(server.requests)
        server.reset()
        output = tmp_path / "ours.json"
        status = main(["eval-genrm", "--dataset_name", str(data), "--r_align_release", RELEASE,
                       "--genrm_base_urls", server.url, "--genrm_model", "genrm", "--genrm_temperature", "0.4",
                       "--genrm_max_tokens", "8192", "--metarm_base_urls", server.url, "--metarm_model", "metarm",
                       "--output_file", str(output)])  # fmt: skip
        assert status == 0
        our_genrm, our_metarm = split_requests(server.requests)
    report = json.loads(output.read_text())
    ours = {
        bench: {k: (m[f"{k}_num"], m[f"{k}_den"]) for k in ("l_acc", "s_corr", "f_score")}
        for bench, m in report["metrics"].items()
        if bench in BENCHMARKS
    }
    theirs = _their_counts(their_dir)
    with capsys.disabled():
        print(f"\nGenRM requests: {len(their_genrm)} distinct theirs, {len(our_genrm)} ours, "
              f"{len(their_genrm & our_genrm)} shared; MetaRM: {len(their_metarm)} / {len(our_metarm)} / "
              f"{len(their_metarm & our_metarm)}\n" + _table(theirs, ours))  # fmt: skip
    assert len(their_genrm) == 96
    assert our_genrm == their_genrm
    assert our_metarm == their_metarm and their_metarm
    assert ours == theirs
    assert _our_outcomes(report) == _their_outcomes(their_dir)
