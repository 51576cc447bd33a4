"""Where the history lives: --db, KVLAB_HISTORY, then the XDG data directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlab.errors import ConfigError
from kvlab.history.location import append_sidecar, db_path, history_off, read_sidecar


def test_the_database_path_in_order_of_precedence() -> None:
    env = {"HOME": "/home/u", "XDG_DATA_HOME": "/data", "KVLAB_HISTORY": "/h.duckdb"}
    assert db_path("/given.duckdb", env) == Path("/given.duckdb")
    assert db_path(None, env) == Path("/h.duckdb")
    assert db_path(None, env | {"KVLAB_HISTORY": ""}) == Path("/data/kvlab/history.duckdb")
    assert db_path(None, {"HOME": "/home/u"}) == \
        Path("/home/u/.local/share/kvlab/history.duckdb")


def test_off_turns_the_history_off() -> None:
    assert history_off({"KVLAB_HISTORY": "off"}) and history_off({"KVLAB_HISTORY": "OFF"})
    assert not history_off({"KVLAB_HISTORY": "/x.duckdb"}) and not history_off({})
    with pytest.raises(ConfigError, match="KVLAB_HISTORY=off turns the run history off"):
        db_path(None, {"KVLAB_HISTORY": "off"})
    assert db_path("/x.duckdb", {"KVLAB_HISTORY": "off"}) == Path("/x.duckdb")


def test_the_sidecar_lists_each_path_once(tmp_path: Path) -> None:
    db = tmp_path / "sub" / "h.duckdb"
    assert read_sidecar(db) == []
    append_sidecar(db, ["/a", "/b", "/a"])
    append_sidecar(db, ["/b", "/c"])
    assert read_sidecar(db) == ["/a", "/b", "/c"]
    assert (tmp_path / "sub" / "h.duckdb.runs").read_text() == "/a\n/b\n/c\n"
