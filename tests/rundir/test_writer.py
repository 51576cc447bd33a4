"""The run's one writer: records and state written in order, off the caller's thread."""

from __future__ import annotations

import json
import threading

import pytest

from kvlab.rundir import RunState, RunWriter, ServerEntry, read_records
from tests.rows import row


def test_records_and_state_land_in_order(tmp_path) -> None:
    state = RunState(run_id="r1", experiment_name="x")
    with RunWriter(tmp_path) as writer:
        for i in range(50):
            writer.append(row(query_id=f"q{i:02d}", position=i))
        state.servers.append(ServerEntry(mode="a", capacity=128, started="now"))
        writer.save(state)
        state.servers.clear()  # saved as it was when save() was called
        writer.sync()
        assert [r.position for r in read_records(tmp_path / "records.jsonl")] == list(range(50))
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["run_id"] == "r1" and len(manifest["servers"]) == 1
    assert not (tmp_path / "manifest.json.tmp").exists()  # replaced whole


def test_append_returns_before_the_disk_is_touched(tmp_path) -> None:
    """The writing happens on the writer's thread: append() only queues."""
    seen: list[str] = []
    writer = RunWriter(tmp_path)
    original = writer._records.write  # the thread calls it; record which thread does

    def spy(text: str) -> int:
        seen.append(threading.current_thread().name)
        return original(text)

    writer._records.write = spy  # type: ignore[method-assign]
    writer.append(row())
    writer.close()
    assert seen == ["kvlab-writer"]


def test_a_failed_write_is_raised_by_the_next_call(tmp_path) -> None:
    writer = RunWriter(tmp_path)
    (tmp_path / "manifest.json").mkdir()
    writer.save(RunState())  # a directory cannot be replaced by a file
    with pytest.raises(OSError, match="cannot write the run directory"):
        writer.sync()
    writer.close()


def test_state_keeps_keys_it_does_not_know(tmp_path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"run_id": "r", "from_the_future": [1, 2]}))
    state = RunState.read(path)
    assert state.to_json()["from_the_future"] == [1, 2]
    assert "points_done" not in state.to_json()  # optional keys appear once set
    state.points_done = [("a", 128, "c=1")]
    assert state.point_done("a", 128, "c=1") and not state.point_done("a", 128, "c=2")
