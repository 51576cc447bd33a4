import gc

from kvlab.bench.client.gcpause import paused_gc


def test_collector_is_off_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        assert gc.get_freeze_count() > 0  # objects alive before the window are frozen
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_restored_after_an_error() -> None:
    try:
        with paused_gc():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gc.isenabled()
