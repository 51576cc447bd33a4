"""Where the history database lives, and the sidecar that lists the runs it read.

``--db PATH`` wins, then ``KVLAB_HISTORY`` (a path, or ``off``: no history at all),
then ``$XDG_DATA_HOME/kvlab/history.duckdb``, else ``~/.local/share/kvlab/history.duckdb``.
The sidecar (``history.duckdb.runs`` beside the database) is a text file of the run
paths ever added, one a line: with it ``kvlab history rebuild`` makes the database
again even after the file was deleted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from kvlab.errors import ConfigError

ENV = "KVLAB_HISTORY"
OFF = "off"
DB_NAME = "history.duckdb"
SIDECAR_SUFFIX = ".runs"


def history_off(environ: Mapping[str, str] = os.environ) -> bool:
    """True when ``KVLAB_HISTORY=off``: runs are not added (``kvlab run`` says nothing)."""
    return environ.get(ENV, "").strip().lower() == OFF


def db_path(given: Path | str | None = None, environ: Mapping[str, str] = os.environ) -> Path:
    """The database file: ``given`` (``--db``), else KVLAB_HISTORY, else the user's data
    directory (XDG). ConfigError when KVLAB_HISTORY=off and no ``--db`` is given."""
    if given is not None:
        return Path(given).expanduser()
    value = environ.get(ENV, "").strip()
    if value.lower() == OFF:
        raise ConfigError(f"{ENV}=off turns the run history off; unset it or give --db PATH")
    if value:
        return Path(value).expanduser()
    data = environ.get("XDG_DATA_HOME", "").strip()
    base = Path(data) if data else Path(environ.get("HOME", "~")).expanduser() / ".local" / "share"
    return base / "kvlab" / DB_NAME


def sidecar_path(db: Path) -> Path:
    """The list of run paths beside ``db`` (``history.duckdb.runs``)."""
    return db.with_name(db.name + SIDECAR_SUFFIX)


def read_sidecar(db: Path) -> list[str]:
    """The run paths the sidecar lists, each once, in the order first added ([] when
    there is none)."""
    path = sidecar_path(db)
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return list(dict.fromkeys(line for line in lines if line.strip()))


def append_sidecar(db: Path, paths: Iterable[str]) -> None:
    """Add run paths the sidecar does not list yet."""
    known = set(read_sidecar(db))
    new = [p for p in dict.fromkeys(paths) if p not in known]
    if new:
        sidecar_path(db).parent.mkdir(parents=True, exist_ok=True)
        with sidecar_path(db).open("a", encoding="utf-8") as out:
            out.write("".join(f"{p}\n" for p in new))
