"""How long a newcomer waits: from a command's start to the first figure it prints,
and to its end, with the machine's load average sampled meanwhile.

Runs the command with its output through a pipe (as `make run | tee log` does), echoes
and logs every line with the seconds since the start, and samples /proc/loadavg every
10 s. The first figure is the first line matching ``--first`` (default: the start of
``kvlab prove``'s output, make run's first result).

    python tools/time_to_result.py --log /tmp/make-run.log -- make run
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path


def _sample_load(samples: list[list[float]], stop: threading.Event) -> None:
    while not stop.wait(10.0):
        samples.append([float(x) for x in Path("/proc/loadavg").read_text().split()[:3]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first", default=r"^Causal mask",
                        help="regex of the first line that shows a figure")
    parser.add_argument("--log", type=Path, required=True, help="timestamped copy of the output")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    first_re = re.compile(args.first)
    samples: list[list[float]] = []
    stop = threading.Event()
    threading.Thread(target=_sample_load, args=(samples, stop), daemon=True).start()
    start = time.monotonic()
    first: float | None = None
    with args.log.open("w", encoding="utf-8") as log, subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            elapsed = time.monotonic() - start
            if first is None and first_re.search(line):
                first = elapsed
            log.write(f"{elapsed:8.1f} {line}")
            log.flush()
            sys.stdout.write(line)
    end = time.monotonic() - start
    stop.set()
    ones = [s[0] for s in samples]
    result = {"command": command, "returncode": proc.returncode,
              "first_figure_s": None if first is None else round(first, 1),
              "end_s": round(end, 1),
              "load_1min": {"min": min(ones), "mean": round(sum(ones) / len(ones), 2),
                            "max": max(ones)} if ones else None,
              "load_samples": len(samples)}
    print(json.dumps(result))
    with args.log.open("a", encoding="utf-8") as log:
        log.write(json.dumps(result) + "\n")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
