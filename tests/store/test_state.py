"""manifest.json's host and server facts read typed, every key kept as written."""

from __future__ import annotations

import json
from pathlib import Path

from kvlab.store.state import RunState, ServerEntry


def test_the_host_and_server_facts_read_typed_and_keep_every_key(tmp_path: Path) -> None:
    host = {"platform": "Linux", "cpu": "Xeon", "cpu_flags": ["avx2"], "cores": 2,
            "memory_bytes": 2**33, "python": "3.11.7", "torch": None, "hostname": "h",
            "recorded_at": "2026-12-07T17:00:00+00:00", "clock": "perf", "timezone": "UTC"}
    facts = {"kind": "llamacpp", "argv": ["llama-server", "--port", "1"], "version": "b1",
             "log": "logs/a-256.log", "slots": 4}
    state = RunState(host=host, servers=[ServerEntry(mode="a", capacity=256, facts=facts),
                                         ServerEntry(mode="b", capacity=256)])
    path = tmp_path / "manifest.json"
    path.write_text(state.dumps())
    back = RunState.read(path)
    assert back.host == host and back.to_json() == state.to_json()  # nothing dropped
    assert (back.machine.cpu, back.machine.cores, back.machine.cpu_flags) == ("Xeon", 2, ["avx2"])
    known = back.servers[0].known
    assert known is not None and known.kind == "llamacpp" and known.argv == facts["argv"]
    assert (known.version, known.log, known.launched) == ("b1", "logs/a-256.log", None)
    assert back.servers[1].known is None  # an external endpoint records no facts
    assert RunState().machine.cpu is None


def test_the_load_workers_of_the_last_invocation_that_had_any() -> None:
    from kvlab.store.state import InvocationEntry

    state = RunState(invocations=[InvocationEntry(workers={"driver": "ray", "count": 3}),
                                  InvocationEntry()])
    assert state.load_workers() == 3
    assert RunState(invocations=[InvocationEntry()]).load_workers() is None


def test_a_manifest_that_calls_its_invocations_sessions_still_loads(tmp_path) -> None:
    old = {"run_id": "r", "sessions": [{"started": "2026-01-01T12:00:00+00:00",
                                        "workers": {"engine": "ray", "count": 2}}]}
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(old))
    state = RunState.read(path)
    assert [i.started for i in state.invocations] == ["2026-01-01T12:00:00+00:00"]
    assert state.load_workers() == 2
    saved = json.loads(state.dumps())  # saved again under the new name, once
    assert "sessions" not in saved and saved["invocations"][0]["workers"]["count"] == 2
