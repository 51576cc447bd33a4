"""The results page's line for the cross-check (``make run-full``'s last measuring
step): each client's median TTFT and ITL error against the synthetic schedule, read
from ``crosscheck/crosscheck.json`` (:mod:`kvlab.crosscheck.result`), with the command
that measured them."""

from __future__ import annotations

from pathlib import Path

from kvlab.crosscheck.result import FILE, load
from kvlab.errors import ConfigError

CROSSCHECK = Path("crosscheck") / FILE
STEP = "Four clients on one known schedule (kvlab peers crosscheck)"


def crosscheck_headline(root: Path) -> tuple[str, str, str | None, list[float]]:
    """(step, text, source, 1-minute loads) of the cross-check under ``root``."""
    path = root / CROSSCHECK
    if not path.is_file():
        return STEP, f"no {CROSSCHECK} (step not run: make run-full runs it)", None, []
    try:
        found = load(path)
    except ConfigError as exc:
        return STEP, f"{exc}; rerun the step", str(CROSSCHECK), []
    errors = "; ".join(f"{c.program} TTFT {c.ttft_median.text()}, ITL "
                       f"{c.itl_median.text()}" for c in found.clients)
    failed = f"; failed: {'; '.join(found.failures)}" if found.failures else ""
    text = (f"median errors in ms against {found.schedule_text}: {errors}{failed} "
            f"(`{found.command}`)")
    return STEP, text, str(CROSSCHECK), [found.load_before[0], found.load_after[0]]
