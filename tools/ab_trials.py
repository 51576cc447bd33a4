"""``kvlab ab``'s decisions, measured: trials of one A/B, their verdicts and rows spent.

Runs ``kvlab ab FILE --a MODE --b MODE --json ...`` ``--trials`` times, one after
another, printing each command as it runs (``$ ...``), and writes one JSON file: every
trial's verdict, exit code, rows spent, blocks, B/A and its interval, seconds; the
count of each verdict, the rows' median and range, the load average before and after
and the CPU flags. The bar of issue 37 runs it twice on kvlab serve (Gemma 3 270M):

    flock /tmp/kvlab-measure.lock python tools/ab_trials.py --trials 5 \
        --out docs/concepts/gate-rates/ab-int8-float32.json \
        -- experiments/engine-serving.toml --a kvlab-int8 --b kvlab-float32
    flock /tmp/kvlab-measure.lock python tools/ab_trials.py --trials 20 \
        --out docs/concepts/gate-rates/ab-int8-int8.json \
        -- experiments/engine-serving.toml --a kvlab-int8 --b kvlab-int8
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile")


def load_average() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def cpu_flags() -> list[str]:
    text = Path("/proc/cpuinfo").read_text()
    return sorted({f for f in FLAGS if re.search(rf"\b{f}\b", text)})


def trial(argv: list[str], runs: Path) -> dict[str, Any]:
    """One ``kvlab ab``; what it decided (from its --json line)."""
    command = ["kvlab", "ab", *argv, "--json", "--quiet", "--no-report", "--out", str(runs)]
    print(f"$ {shlex.join(command)}", flush=True)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kvlab", *command[1:]], capture_output=True,
                          text=True, cwd=REPO)
    seconds = time.monotonic() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"exit_code": done.returncode, "verdict": "error",
                "error": done.stderr.strip()[-500:], "seconds": round(seconds, 1)}
    result = json.loads(lines[-1])
    last = result.get("last") or {}
    run_dir = Path(result["run_dir"])
    shutil.rmtree(run_dir / "logs", ignore_errors=True)
    out = {"exit_code": done.returncode, "verdict": result["verdict"], "why": result["why"],
           "rows": result["rows"], "valid_rows": result["valid_rows"],
           "blocks": result["blocks"], "lost_blocks": result["lost_blocks"],
           "b_over_a": last.get("b_over_a"), "low": last.get("low"), "high": last.get("high"),
           "detectable": last.get("detectable"), "blocks_s": result["elapsed_s"],
           "seconds": round(seconds, 1), "run_dir": run_dir.name}
    print(f"  exit {done.returncode}: {out['verdict']} after {out['rows']} rows, B/A "
          f"{out['b_over_a']}", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--out", type=Path, required=True, help="the JSON file written")
    parser.add_argument("--runs", type=Path, default=Path("/tmp/ab-trials"),
                        help="where kvlab ab keeps each trial's run directory")
    parser.add_argument("--stop-at", type=float, default=None,
                        help="start no trial after this time (seconds since the epoch); "
                        "the trials made are counted")
    parser.add_argument("ab", nargs=argparse.REMAINDER, help="-- then kvlab ab's arguments")
    args = parser.parse_args()
    ab = args.ab[1:] if args.ab[:1] == ["--"] else args.ab
    before, start = load_average(), time.monotonic()
    trials: list[dict[str, Any]] = []
    for _ in range(args.trials):
        if args.stop_at is not None and time.time() > args.stop_at:
            break
        trials.append(trial(ab, args.runs))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        rows = [t["rows"] for t in trials if "rows" in t]
        summary = {
            "command": shlex.join(["kvlab", "ab", *ab, "--json", "--quiet", "--no-report"]),
            "trials_asked": args.trials, "trials": len(trials),
            "verdicts": dict(Counter(t["verdict"] for t in trials)),
            "rows_median": statistics.median(rows) if rows else None,
            "rows_range": [min(rows), max(rows)] if rows else None,
            "load_before": before, "load_after": load_average(), "cpu_flags": cpu_flags(),
            "seconds": round(time.monotonic() - start, 1), "each": trials,
        }
        args.out.write_text(json.dumps(summary, indent=1) + "\n")  # kept after each trial
    print(json.dumps({k: v for k, v in summary.items() if k != "each"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
