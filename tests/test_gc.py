import gc

import pytest

from trl_rankreward._gc import paused_gc


def test_paused_gc_disables_inside_and_restores_enabled_state_also_on_error():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_paused_gc_keeps_a_disabled_collector_disabled():
    gc.disable()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the caller had disabled it; we must not re-enable
    finally:
        gc.enable()
