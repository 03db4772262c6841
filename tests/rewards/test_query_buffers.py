"""`QueryBuffers` (RankBuffer's state over an anchor store) and `RankBufferOptions`."""

import pytest

from trl_rankreward.rewards.anchor_buffer import AnchorBuffer, StoredBufferTable
from trl_rankreward.rewards.anchor_store import InMemoryAnchorStore
from trl_rankreward.rewards.options import DataNeeds
from trl_rankreward.rewards.query_buffers import QueryBuffers
from trl_rankreward.rewards.rank_buffer import RankBufferOptions, RankBufferReward
from trl_rankreward.rewards.sqlite_anchor_store import SQLiteAnchorStore
from trl_rankreward.testing import OracleJudge


def _filled(store):
    buffers = QueryBuffers(store)
    keys = [store.put(t) for t in ("worst", "best")]
    buffers.set("q", AnchorBuffer.initial(keys, "references", 0))
    buffers.set_pending("q", 0, [[store.put("rollout")]])
    return buffers, keys


def test_memory_state_holds_buffers_and_referenced_texts_and_loads_back():
    buffers, keys = _filled(InMemoryAnchorStore())
    state = buffers.state()
    assert sorted(state) == ["buffers", "pending", "texts"]
    assert sorted(state["texts"].values()) == ["best", "rollout", "worst"]  # anchors and the look-ahead group
    again = QueryBuffers(InMemoryAnchorStore())  # an empty store: the texts come with the state
    again.load(state)
    assert again.get("q").keys == keys and again.pending("q") == state["pending"]["q"]


def test_sqlite_state_holds_totals_only_and_needs_the_same_store(tmp_path):
    store = SQLiteAnchorStore(tmp_path / "a.sqlite")
    buffers, _ = _filled(store)
    state = buffers.state()
    assert sorted(state) == ["buffers_stored", "pending"] and state["buffers_stored"]["count"] == 1
    again = QueryBuffers(SQLiteAnchorStore(tmp_path / "a.sqlite"))  # a new table clears the file's buffers...
    with pytest.raises(ValueError, match="holds 0 buffers, but the RankBuffer state counts 1"):
        again.load(state)  # ...so they no longer match the state's totals
    with pytest.raises(ValueError, match="keeps its buffers in an SQLite anchor store"):
        QueryBuffers(InMemoryAnchorStore()).load(state)


def test_frozen_undoes_buffers_and_pending_of_touched_queries_only():
    buffers, keys = _filled(InMemoryAnchorStore())
    before = buffers.state()
    with buffers.frozen():
        buffers.set("q", AnchorBuffer.initial(keys[:1], "references", 1))
        buffers.set("new", AnchorBuffer.initial(keys, "bootstrap", 1))
        buffers.set_pending("q", 1, [])
        with pytest.raises(RuntimeError, match="inside frozen_state"):
            buffers.load(before)
    assert buffers.state() == before and buffers.get("new") is None


def test_each_store_gives_its_own_table(tmp_path):
    assert isinstance(QueryBuffers(SQLiteAnchorStore(tmp_path / "s.sqlite")).table, StoredBufferTable)
    assert not isinstance(QueryBuffers(InMemoryAnchorStore()).table, StoredBufferTable)


def test_options_are_one_dataclass_given_whole_or_as_keywords():
    options = RankBufferOptions(k0=2, buffer_init="bootstrap")
    assert RankBufferReward(OracleJudge({}), options).options is options
    assert RankBufferReward(OracleJudge({}), k0=2, buffer_init="bootstrap").options == options
    assert options.data_needs() == DataNeeds(references=0) and RankBufferOptions().data_needs().references == 0
    assert RankBufferOptions(buffer_init="references").data_needs().references == 1
    # "nectar": the spelling of the 0.1 example configs, still read as "references"
    assert RankBufferOptions(buffer_init="nectar").buffer_init == "references"
    with pytest.raises(TypeError, match="not both"):
        RankBufferReward(OracleJudge({}), options, k0=2)
    with pytest.raises(ValueError, match=r"sets \['init'\].*options are: .*buffer_init"):
        RankBufferReward(OracleJudge({}), init="bootstrap")
    with pytest.raises(ValueError, match="anchor_store_path.*anchor_store='memory'"):
        RankBufferOptions(anchor_store="memory", anchor_store_path="a.sqlite")


def test_the_options_name_the_store(tmp_path):
    # sqlite with a path opens that file; without one (no trainer to supply {output_dir}) texts stay in memory.
    on_disk = RankBufferReward(OracleJudge({}), anchor_store_path=str(tmp_path / "s.sqlite")).store
    assert isinstance(on_disk, SQLiteAnchorStore) and (tmp_path / "s.sqlite").exists()
    assert isinstance(RankBufferReward(OracleJudge({})).store, InMemoryAnchorStore)
    store = InMemoryAnchorStore()
    assert RankBufferReward(OracleJudge({}), store=store).store is store


def test_stored_totals_saved_before_the_rename_count_nectar_as_references(tmp_path):
    # a 0.1 state file's totals: one buffer of 4 anchors taken from the references, then named "nectar"
    table = StoredBufferTable(SQLiteAnchorStore(tmp_path / "s.sqlite"), {"sizes": {"4": 1}, "sources": {"nectar": 4}})
    stats = table.stats()
    assert stats["buffer/anchors_references"] == 4.0 and stats["buffer/count"] == 1.0
    assert table.totals()["sources"] == {"references": 4}
