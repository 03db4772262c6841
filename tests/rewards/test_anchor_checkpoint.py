"""RankBuffer's anchor store in checkpoints: new texts exported once, linked into every checkpoint;
a checkpoint folder resumes alone; resuming in place reads no text."""

import asyncio
import os
import shutil

from trl_rankreward.rewards.anchor_checkpoint import CHECKPOINT_FOLDER
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.rank_buffer import RankBufferReward
from trl_rankreward.rewards.sqlite_anchor_store import SQLiteAnchorStore
from trl_rankreward.testing import OracleJudge

REFS = [f"ref {i}" for i in range(1, 8)]  # best first
QUALITY = {f"ref {i}": 8.0 - i for i in range(1, 8)}


def method(path):
    return RankBufferReward(OracleJudge(QUALITY), k0=4, store=SQLiteAnchorStore(path))


def train(m, epoch, queries=("q0", "q1", "q2")):
    groups = []
    for q in queries:
        answers = [f"{q} answer {epoch}.{j}" for j in range(4)]
        QUALITY.update({a: 0.5 + 2.0 * j for j, a in enumerate(answers)})  # spread over the buffer
        groups.append(Group(q, f"Question {q}?", [], answers, references=REFS))
    asyncio.run(m.score(groups, epoch=epoch, step=epoch))


def segments(checkpoint):
    return sorted(n for n in os.listdir(checkpoint / CHECKPOINT_FOLDER) if n.startswith("texts-"))


def test_each_save_exports_only_new_texts_and_links_them(tmp_path):
    m = method(tmp_path / "anchors.sqlite")
    train(m, 0)
    first = tmp_path / "checkpoint-1"
    first.mkdir()
    m.save_state(str(first))
    train(m, 1)
    second = tmp_path / "checkpoint-2"
    second.mkdir()
    m.save_state(str(second))
    # texts 1..n1 went into the first segment, texts n1+1..n2 into the second: nothing twice
    assert len(segments(first)) == 1 and segments(second)[0] == segments(first)[0] and len(segments(second)) == 2
    rows = [len(SQLiteAnchorStore(second / CHECKPOINT_FOLDER / s, read_only=True)) for s in segments(second)]
    assert sum(rows) == len(m.store)
    # the checkpoints hold links to the same immutable segment, not copies
    name = segments(first)[0]
    assert (
        os.stat(first / CHECKPOINT_FOLDER / name).st_ino == os.stat(tmp_path / "anchors.sqlite.segments" / name).st_ino
    )


def test_a_checkpoint_folder_resumes_alone(tmp_path):
    m = method(tmp_path / "run" / "anchors.sqlite")
    train(m, 0)
    train(m, 1)
    checkpoint = tmp_path / "run" / "checkpoint-2"
    checkpoint.mkdir()
    m.save_state(str(checkpoint))
    moved = tmp_path / "elsewhere" / "checkpoint-2"
    shutil.copytree(checkpoint, moved)
    shutil.rmtree(tmp_path / "run")  # the live store and its segments are gone
    resumed = method(tmp_path / "new" / "anchors.sqlite")
    resumed.load_state(str(moved))
    assert resumed.export_buffers() == m.export_buffers() and resumed.state_dict() == m.state_dict()
    assert [a.text for a in resumed.anchors("q0")] == [a.text for a in m.anchors("q0")]


def test_resuming_in_place_reads_no_text_and_restores_the_checkpoints_buffers(tmp_path, monkeypatch):
    m = method(tmp_path / "anchors.sqlite")
    train(m, 0)
    checkpoint = tmp_path / "checkpoint-1"
    checkpoint.mkdir()
    m.save_state(str(checkpoint))
    saved = m.export_buffers()
    train(m, 1)  # the run went on after the checkpoint (then crashed, say)
    assert m.export_buffers() != saved
    resumed = method(tmp_path / "anchors.sqlite")  # the same store, as a restarted trainer opens it
    merged = []
    monkeypatch.setattr(SQLiteAnchorStore, "merge_from", lambda self, path, **kw: merged.append(path))
    resumed.load_state(str(checkpoint))
    assert merged == [] and resumed.export_buffers() == saved
