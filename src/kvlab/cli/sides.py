"""The two sides of ``kvlab compare``: each one run or several, never the same run twice.

A side is a run directory (or a peer's result file), several separated by commas
(``runs/a1,runs/a2,runs/a3``), or a run history spec (kvlab.history.queries.SPEC_HELP):
``history:E@latest``, ``@previous``, ``@last:K``, ``@COMMIT``, each with ``:any``. A
history spec never names the other side's run and, unless ``:any``, only matches runs
of the other side's experiment definition. The same run on both sides is one line and
exit 2 (ConfigError).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from kvlab.errors import ConfigError


def _paths(text: str) -> list[Path]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ConfigError(f"{text!r}: give a run directory, several separated by commas, or "
                          "a history:EXPERIMENT@... spec")
    return [Path(p) for p in parts]


def _ids(paths: list[Path]) -> set[str]:
    """Run ids and resolved paths of ``paths`` (what a history spec must avoid)."""
    from kvlab.rundir import RunDir

    out = set()
    for path in paths:
        out.add(str(path.resolve()))
        if path.is_dir():
            with contextlib.suppress(Exception):  # not a run: refused later, with its line
                out.add(RunDir(path).run_id)
    return out - {""}


def _definition(paths: list[Path]) -> str | None:
    from kvlab.history.facts import experiment_hash
    from kvlab.rundir import RunDir

    if not paths or not paths[0].is_dir():
        return None
    try:
        return experiment_hash(RunDir(paths[0]))
    except Exception:  # a folder that is no run: refused later, with its own line
        return None


def _from_history(spec: str, db: Path | None, other: list[Path]) -> list[Path]:
    from kvlab.history.location import db_path
    from kvlab.history.queries import read_only, resolve_runs

    conn = read_only(db_path(db))
    try:
        return resolve_runs(conn, spec, avoid=_ids(other), definition=_definition(other))
    finally:
        conn.close()


def resolve_sides(a: str, b: str, db: Path | None = None) -> tuple[list[Path], list[Path]]:
    """The run paths of each side: paths first, then history specs (B before A), each
    spec avoiding the other side's runs; ConfigError when a run is on both sides."""
    from kvlab.history.queries import is_spec

    side_a = None if is_spec(a) else _paths(a)
    side_b = None if is_spec(b) else _paths(b)
    if side_b is None:
        side_b = _from_history(b, db, side_a or [])
    if side_a is None:
        side_a = _from_history(a, db, side_b)
    same = {str(p.resolve()) for p in side_a} & {str(p.resolve()) for p in side_b}
    if same:
        raise ConfigError(f"A and B are the same run (path {sorted(same)[0]}): a run "
                          "compared with itself proves nothing; give A the baseline and B "
                          "the candidate")
    return side_a, side_b
