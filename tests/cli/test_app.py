"""Output that survives a log: through a pipe (CI, `make run > log`, `| tee`), tables
come out whole, not cut to 80 columns; COLUMNS, when set, still wins."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvlab.cli._app import LOG_WIDTH, console_width


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_width_off_a_terminal() -> None:
    assert console_width(_Tty(), {}) is None  # a terminal: Rich asks it
    assert console_width(io.StringIO(), {}) == LOG_WIDTH
    assert console_width(io.StringIO(), {"COLUMNS": "132"}) == 132
    assert console_width(io.StringIO(), {"COLUMNS": "wide"}) == LOG_WIDTH


def kvlab_piped(*args: str, columns: str | None = None) -> str:
    """Run kvlab with stdout a pipe, as `make run | tee` does; returns stdout."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = columns
    done = subprocess.run([sys.executable, "-m", "kvlab", *args], capture_output=True,
                          env=env, text=True, timeout=300)  # stdout a pipe, not a TTY
    assert done.returncode == 0, done.stderr
    return done.stdout


# (command, words that a table cut to 80 columns loses)
WIDE = [
    (["memory", "-p", "gemma-3-270m", "--paged", "16", "--seqs", "300,1800,4000", "-L", "4096",
      "--budget-mib", "64"],
     ["paged MiB", "contig. MiB", "contig. unused", "seqs in 64 MiB: paged", "3: 300..4000"]),
    (["memory"], ["cells/layer", "K/V type", "bytes", "MiB", "GiB", "4,294,967,296"]),
    (["memory", "-p", "gemma-3-270m", "-L", "512,4096", "--llamacpp"],
     ["K MiB", "V MiB", "size MiB", "bytes", "non-SWA", "28,311,552"]),
]


@pytest.mark.parametrize(("args", "words"), WIDE)
def test_tables_through_a_pipe_are_whole(args: list[str], words: list[str]) -> None:
    out = kvlab_piped(*args)
    assert "…" not in out
    for word in words:
        assert word in out, f"{word!r} cut from:\n{out}"


def test_columns_still_wins() -> None:
    out = kvlab_piped("memory", "-p", "gemma-3-270m", "--paged", "16", "--seqs",
                      "300,1800,4000", "-L", "4096", columns="60")
    assert max(len(line) for line in out.splitlines()) <= 60


def test_a_run_evaluation_through_a_pipe(tmp_path: Path) -> None:
    from tests.report.synthetic_runs import two_mode_rows, write_run

    run = write_run(tmp_path / "run", two_mode_rows(n=5, capacities=(256,)))
    out = kvlab_piped("evaluate", str(run))
    assert "…" not in out and "dec/tok" in out and "TTFT" in out and "ITL" in out
    assert str(run / "report.md") in out  # a long path, on one line


def test_a_ctrl_c_python_drops_in_a_finalizer_is_kept() -> None:
    """A KeyboardInterrupt raised inside ``__del__`` never reaches the command; main()
    keeps it (and exits 130) instead of ending with status 0."""
    import gc
    import sys

    from kvlab.cli import _keep_lost_interrupts

    class Finalized:
        def __del__(self) -> None:
            raise KeyboardInterrupt

    default = sys.unraisablehook
    try:
        lost = _keep_lost_interrupts()
        Finalized()
        gc.collect()
    finally:
        sys.unraisablehook = default
    assert len(lost) == 1 and isinstance(lost[0], KeyboardInterrupt)


def test_every_command_sits_in_a_group_of_kvlab_help() -> None:
    """``kvlab --help`` groups the commands by what they are for; the studies of the
    reference engine sit together."""
    from kvlab.cli import app
    from kvlab.cli._app import BENCHMARK, HISTORY, MEMORY, SERVERS, STUDIES

    groups = {BENCHMARK, HISTORY, MEMORY, SERVERS, STUDIES}
    panel = {(c.name or c.callback.__name__.replace("_", "-")): c.rich_help_panel
             for c in app.registered_commands if c.callback is not None}
    panel.update({g.name: g.rich_help_panel for g in app.registered_groups})
    assert set(panel.values()) == groups, panel
    assert {name for name, group in panel.items() if group == STUDIES} == {
        "prove", "kv-bench", "engine-check", "engine-speed", "engine-batch", "engine-profile"}
    help_text = kvlab_piped("--help")
    assert all(group in help_text for group in groups)
