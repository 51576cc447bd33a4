"""How long the CI gate takes on two runs of N rows each (issue 37: under 2 s at 1,000).

Times :func:`kvlab.analysis.gate.gate` alone (the rows judged first) on two runs of one
cell, with the default rule (e2e) and an ITL rule, over several repeats; prints the
median and the range. Run from the repository root:

    flock /tmp/kvlab-measure.lock python tools/gate_speed.py --rows 1000 --repeats 5
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvlab.analysis.gate import CellRuns, FailOn, gate
from kvlab.analysis.valid_rows import judge

# the tests' hand-made runs, imported by name (tools/ is type-checked without tests/)
gate_runs = importlib.import_module("tests.gate_runs")
LOAD, gate_rows = gate_runs.LOAD, gate_runs.gate_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    key = ("fast", 256, LOAD)
    a = judge(gate_rows("a", seed=1, rows=args.rows, modes=("fast",))).groups()[key]
    b = judge(gate_rows("b", seed=2, rows=args.rows, modes=("fast",))).groups()[key]
    times = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        gate([CellRuns("fast", 256, LOAD, (a,), (b,))],
             [FailOn(), FailOn("slower", "itl_effective_ms")])
        times.append(time.perf_counter() - started)
    print(f"gate on 2 runs of {args.rows} rows, 2 slower rules + failures: median "
          f"{statistics.median(times):.3f} s, range {min(times):.3f}–{max(times):.3f} s "
          f"({args.repeats} repeats)")


if __name__ == "__main__":
    main()
