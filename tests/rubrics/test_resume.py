"""Killing a generation job midway loses nothing finished; the rerun finishes without duplicates."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from tests.data.upstream import nectar_row, write_jsonl
from tests.rubrics.conftest import valid_rubrics
from trl_rankreward.data import load_source, prepare_nectar
from trl_rankreward.data.records import read_records
from trl_rankreward.rubrics import generate_rubrics
from trl_rankreward.testing import ScriptedBackend


class Crash(BaseException):
    """Not an Exception: the runner must not catch it as a failed attempt."""


CHILD = textwrap.dedent(
    """
    import sys
    from tests.rubrics.conftest import valid_rubrics
    from trl_rankreward.testing import ScriptedBackend
    from trl_rankreward.data import load_source, prepare_nectar
    from trl_rankreward.rubrics import generate_rubrics

    dataset, _ = prepare_nectar(load_source(sys.argv[1]), num_queries=None)
    backend = ScriptedBackend(lambda messages, attempt: valid_rubrics(), delay_s=0.2)
    generate_rubrics(dataset, backend, sys.argv[2], max_concurrency=2)
    """
)


def test_sigkill_midway_then_rerun_finishes_with_no_losses_and_no_duplicates(tmp_path):
    source = write_jsonl(tmp_path / "nectar.jsonl", [nectar_row(i) for i in range(30)])
    out = tmp_path / "rubrics.jsonl"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(source), str(out)], env=env, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 4):
        assert child.poll() is None, child.stderr.read().decode()[-2000:]
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)  # no cleanup runs in the child
    child.wait()
    before = {r["query_id"] for r in read_records(out)}
    # 30 jobs at 2 x 0.2 s each need ~3 s; killed after >= 4 results, so some but not all are done
    assert 4 <= len(before) < 30

    dataset, _ = prepare_nectar(load_source(str(source)), num_queries=None)
    backend = ScriptedBackend(lambda messages, attempt: valid_rubrics())
    summary = generate_rubrics(dataset, backend, out)
    assert summary.already_done == len(before)
    assert len(backend.calls) == 30 - len(before)  # only the unfinished ones are asked again
    ids = [json.loads(line)["query_id"] for line in out.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 30 and set(ids) == set(dataset["query_id"])


def test_crash_after_some_results_keeps_them(nectar_dataset, tmp_path):
    out = tmp_path / "rubrics.jsonl"

    def reply(messages, attempt):
        reply.count += 1
        if reply.count > 3:
            raise Crash  # the process dies during the 4th call
        return valid_rubrics()

    reply.count = 0
    try:
        generate_rubrics(nectar_dataset, ScriptedBackend(reply), out, max_concurrency=1)
    except Crash:
        pass
    else:
        raise AssertionError("the crash should propagate")
    assert len(list(read_records(out))) == 3
    summary = generate_rubrics(nectar_dataset, ScriptedBackend(lambda m, a: valid_rubrics()), out)
    assert (summary.already_done, summary.succeeded) == (3, 3)
