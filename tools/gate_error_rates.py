"""The default gate's error rates, measured: false alarms on identical runs (A/A) and
power on a known slowdown, each with a 95 % Wilson interval.

Every figure comes from the commands a user runs, printed as they run (``$ ...``):
``kvlab run`` makes each run, ``kvlab compare A B --fail-on slower`` (the default gate)
judges each pair by its exit code. Where ``kvlab floor`` exists (the gate of issue
37), the floor of each baseline is measured first as a user would: K runs of it, then
``kvlab floor`` on them (kept in this tool's own run history, ``KVLAB_HISTORY`` under
``--out``), then fresh pairs. Sections:

- ``synthetic-aa``: identical runs on ``kvlab serve-synthetic`` (TTFT 20 ms, ITL 10 ms);
- ``synthetic-10pct`` / ``synthetic-40pct``: B served at ITL 11 ms / 14 ms against
  A at 10 ms (power);
- ``real-aa``: ``kvlab serve`` with the toy model running experiments/quickstart.toml at
  ``make run``'s quick sizes.

A pair is two fresh runs (``--pairing disjoint``) or, to halve the time of a slow
server, runs i and i+1 of one series (``consecutive``: the issue's own A/A method; the
pairs then share runs). Each section writes ``<section>.json`` under ``--out`` (the
commands, every pair's exit code, the rate of exit 1 and its interval, the load
average before and after, the CPU flags).

    flock /tmp/kvlab-measure.lock python tools/gate_error_rates.py \
        --out docs/concepts/gate-rates --sections synthetic-aa,synthetic-10pct
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KVLAB = [sys.executable, "-m", "kvlab"]
QUICKSTART = ["--set", "workload.queries=5", "--set", "workload.capacities=[256,2048]",
              "--set", "workload.output_tokens=32"]  # the Makefile's QUICKSTART sizes
GATE = ["--fail-on", "slower"]  # the default gate: e2e_ms at the default margin
FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile")


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95 % Wilson score interval of a rate of ``k`` in ``n``."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def load_average() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def cpu_flags() -> list[str]:
    text = Path("/proc/cpuinfo").read_text()
    return sorted({f for f in FLAGS if re.search(rf"\b{f}\b", text)})


@dataclass
class Section:
    """One measured rate: its pairs' exit codes and the commands that made them."""

    name: str
    what: str
    expected: str  # the exit code counted: "1" for both false alarms and power
    commands: list[str] = field(default_factory=list)
    exits: list[int] = field(default_factory=list)
    pairs: list[list[str]] = field(default_factory=list)
    floor: str | None = None
    floor_runs: int = 0
    floor_made_after_pairs: bool = False  # the pairs' kvlab had no kvlab floor
    floor_source: str | None = None  # floor runs taken from another section's A runs
    load_before: list[float] = field(default_factory=list)  # while the runs were made
    load_after: list[float] = field(default_factory=list)
    seconds: float = 0.0  # making the runs

    def summary(self) -> dict[str, Any]:
        k, n = sum(1 for e in self.exits if e == 1), len(self.exits)
        low, high = wilson(k, n)
        return {"n_pairs": n, "exit_1": k, "rate_exit_1": k / n if n else None,
                "wilson95": [round(low, 4), round(high, 4)],
                "exit_codes": dict(sorted(Counter(self.exits).items()))}


class Bench:
    """Runs the commands, echoing each, with this tool's own history and run folder."""

    def __init__(self, work: Path, history: str = "history.duckdb") -> None:
        self.runs = work / "runs"
        self.env = {**os.environ, "KVLAB_HISTORY": str(work / history)}
        self.floor_from: str | None = None  # SECTION:K, see --floor-from
        self.has_floor = subprocess.run([*KVLAB, "floor", "--help"], capture_output=True,
                                        env=self.env).returncode == 0

    def call(self, section: Section, argv: list[str]) -> subprocess.CompletedProcess[str]:
        shown = shlex.join(["kvlab", *argv[len(KVLAB):]] if argv[:len(KVLAB)] == KVLAB
                           else argv)
        print(f"$ {shown}", flush=True)
        section.commands.append(shown)
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, cwd=REPO)

    def run(self, section: Section, experiment: Path, extra: list[str]) -> Path:
        """One ``kvlab run``; its new run directory."""
        self.runs.mkdir(parents=True, exist_ok=True)
        before = set(self.runs.iterdir())
        done = self.call(section, [*KVLAB, "run", str(experiment), *extra, "--quiet",
                                   "--out", str(self.runs)])
        new = sorted(set(self.runs.iterdir()) - before)
        if done.returncode != 0 or len(new) != 1:
            raise SystemExit(f"kvlab run failed ({done.returncode}): {done.stderr[-2000:]}")
        shutil.rmtree(new[0] / "logs", ignore_errors=True)  # server logs: not needed here
        return new[0]

    def gate(self, section: Section, a: Path, b: Path) -> int:
        done = self.call(section, [*KVLAB, "compare", str(a), str(b), *GATE])
        last = [line for line in done.stdout.splitlines() if line.strip()][-1:]
        print(f"  exit {done.returncode}: {last[0] if last else done.stderr.strip()[-300:]}",
              flush=True)
        return done.returncode

    def ledger(self, name: str) -> Path:
        """Where a section's runs are listed as they are made (a later ``--phase
        judge`` reads them back)."""
        return self.runs.parent / f"{name}.runs.json"

    def make_runs(self, section: Section, a: tuple[Path, list[str]],
                  b: tuple[Path, list[str]], n: int, pairing: str, floor_runs: int,
                  stop_at: float | None) -> None:
        """The floor's runs of A, then ``n`` pairs (fresh runs, or a series of A/A runs
        paired i, i+1), listed in the ledger after each run; none started after
        ``stop_at`` (time.time())."""
        kept: dict[str, Any] = {"floor": [], "series": [], "pairs": [], "commands": [],
                                "load_before": load_average(), "load_after": None,
                                "seconds": 0.0}
        begun = time.monotonic()
        path = self.ledger(section.name)

        def one(side: tuple[Path, list[str]]) -> str | None:
            if stop_at is not None and time.time() > stop_at:
                return None
            made = str(self.run(section, *side))
            kept["commands"] = section.commands
            return made

        def save() -> None:
            kept["load_after"] = load_average()
            kept["seconds"] = round(time.monotonic() - begun, 1)
            path.write_text(json.dumps(kept, indent=1) + "\n")

        for _ in range(floor_runs):
            if (made := one(a)) is None:
                break
            kept["floor"].append(made)
            save()
        if pairing == "consecutive" and a == b:
            for _ in range(n + 1):
                if (made := one(a)) is None:
                    break
                kept["series"].append(made)
                kept["pairs"] = [list(p) for p in itertools.pairwise(kept["series"])]
                save()
        else:
            for _ in range(n):
                run_a = one(a)
                run_b = one(b) if run_a is not None else None
                if run_a is None or run_b is None:
                    break
                kept["pairs"].append([run_a, run_b])
                save()
        save()

    def judge(self, section: Section, floor_of: str | None, write: Callable[[], None],
              a: tuple[Path, list[str]], floor_runs_wanted: int) -> None:
        """``kvlab floor`` on the ledger's floor runs (or ``floor_of``'s, a section
        sharing the baseline; with none listed, ``floor_runs_wanted`` runs of ``a``
        made now), then the default gate on each pair."""
        path = self.ledger(section.name)
        kept = json.loads(path.read_text())
        if not kept["floor"] and not floor_of and self.floor_from is not None:
            source, count = self.floor_from.split(":")
            pairs = json.loads(self.ledger(source).read_text())["pairs"]
            kept["floor"] = [a_run for a_run, _ in pairs[:int(count)]]
            kept["floor_from"] = f"the A runs of the first {count} pairs of {source}"
        elif not kept["floor"] and not floor_of and self.has_floor and floor_runs_wanted:
            kept["floor"] = [str(self.run(section, *a)) for _ in range(floor_runs_wanted)]
            kept["floor_made_at_judging"] = True
            kept["commands"] = [*kept["commands"], *section.commands]
            path.write_text(json.dumps(kept, indent=1) + "\n")
        section.floor_made_after_pairs = bool(kept.get("floor_made_at_judging"))
        section.floor_source = kept.get("floor_from")
        section.commands = list(kept["commands"])
        section.load_before, section.load_after = kept["load_before"], kept["load_after"]
        section.seconds = kept["seconds"]
        floor_runs = kept["floor"] or (json.loads(self.ledger(floor_of).read_text())["floor"]
                                       if floor_of else [])
        if not self.has_floor:
            section.floor = "this kvlab has no kvlab floor: the gate uses the rows alone"
        elif not kept["floor"] and floor_of:
            section.floor = f"the floor measured in section {floor_of}"
        elif floor_runs:
            done = self.call(section, [*KVLAB, "floor", ",".join(floor_runs)])
            if done.returncode != 0:
                raise SystemExit(f"kvlab floor failed: {done.stderr[-2000:]}")
            section.floor = done.stdout.strip().splitlines()[-1]
            section.floor_runs = len(floor_runs)
        for run_a, run_b in kept["pairs"]:
            section.exits.append(self.gate(section, Path(run_a), Path(run_b)))
            section.pairs.append([Path(run_a).name, Path(run_b).name])
            write()


def synthetic_file(folder: Path, url: str, itl_ms: float, queries: int) -> Path:
    """A one-mode experiment on the synthetic server at ``url`` (TTFT 20 ms, ITL
    ``itl_ms``); the same name, mode and prompts whatever the ITL, so runs pair."""
    text = f"""name = "gate-synthetic"
description = "the gate's error rates: kvlab serve-synthetic, TTFT 20 ms, ITL {itl_ms:g} ms"

[workload]
queries = {queries}
capacities = [256]
output_tokens = 16
warmup = 1

[[modes]]
name = "synthetic"
server = "external"
api = "openai-chat"
stream = true
[modes.external]
base_url = "{url}/v1"
model = "synthetic"
[modes.body]
stream_options = {{ include_usage = true }}
synthetic = {{ ttft_ms = 20, itl_ms = {itl_ms:g} }}
"""
    path = folder / f"gate-synthetic-itl{itl_ms:g}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def start_synthetic(section_log: list[str], port: int) -> subprocess.Popen[bytes]:
    argv = [*KVLAB, "serve-synthetic", "--port", str(port)]
    section_log.append(shlex.join(["kvlab", *argv[len(KVLAB):]]))
    print(f"$ {section_log[-1]} &", flush=True)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3.0)
    return proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="results folder (JSON)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/gate-rates"),
                        help="the runs, their ledgers, the experiment files and this "
                        "tool's history")
    parser.add_argument("--sections", default="synthetic-aa,synthetic-10pct,synthetic-40pct,"
                        "real-aa", help="comma-separated sections")
    parser.add_argument("--phase", choices=("all", "runs", "judge"), default="all",
                        help="make the runs, judge the runs listed, or both")
    parser.add_argument("--aa-pairs", type=int, default=40)
    parser.add_argument("--power-pairs", type=int, default=20)
    parser.add_argument("--real-pairs", type=int, default=20)
    parser.add_argument("--floor-runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=8, help="rows per synthetic run")
    parser.add_argument("--pairing", choices=("disjoint", "consecutive"), default="disjoint",
                        help="A/A pairs: two fresh runs each, or runs i and i+1 of a series")
    parser.add_argument("--stop-at", type=float, default=None,
                        help="start no run after this time (seconds since the epoch)")
    parser.add_argument("--port", type=int, default=18231, help="the synthetic server's")
    parser.add_argument("--floor-from", default=None, metavar="SECTION:K",
                        help="judging a section with no floor runs listed: take the A "
                        "runs of SECTION's first K pairs (runs of the same baseline)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    # judging alone keeps its floors in a history of its own (the runs may come from an
    # older kvlab, whose history schema the gate's kvlab would not share)
    bench = Bench(args.work, "history-judge.duckdb" if args.phase == "judge"
                  else "history.duckdb")
    bench.floor_from = args.floor_from
    wanted = args.sections.split(",")
    url = f"http://127.0.0.1:{args.port}"
    server: subprocess.Popen[bytes] | None = None
    started: list[str] = []
    base = synthetic_file(args.work, url, 10.0, args.queries)
    quick = (REPO / "experiments" / "quickstart.toml", QUICKSTART)
    try:
        if any(s.startswith("synthetic") for s in wanted):
            server = start_synthetic(started, args.port)
        first_synthetic: str | None = None
        for name in wanted:
            if name == "real-aa":
                section = Section(name, "A/A on kvlab serve (toy model), quickstart at make "
                                  "run's quick sizes", "1")
                sides, n, floor_of = (quick, quick), args.real_pairs, None
            elif name in ("synthetic-aa", "synthetic-10pct", "synthetic-40pct"):
                itl = {"synthetic-aa": 10.0, "synthetic-10pct": 11.0,
                       "synthetic-40pct": 14.0}[name]
                section = Section(name, f"kvlab serve-synthetic, A ITL 10 ms, B ITL "
                                  f"{itl:g} ms", "1")
                candidate = synthetic_file(args.work, url, itl, args.queries)
                sides = ((base, []), (candidate, []))
                n = args.aa_pairs if name == "synthetic-aa" else args.power_pairs
                floor_of, first_synthetic = first_synthetic, first_synthetic or name
            else:
                raise SystemExit(f"unknown section {name!r}")
            if args.phase != "judge":
                section.commands += started
                bench.make_runs(section, *sides, n, args.pairing,
                                0 if floor_of else args.floor_runs, args.stop_at)
            if args.phase == "runs":
                continue

            def write(section: Section = section, name: str = name) -> None:
                data = {**asdict(section), **section.summary(), "cpu_flags": cpu_flags(),
                        "gate": shlex.join(["kvlab", "compare", "A", "B", *GATE])}
                (args.out / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")

            bench.judge(section, floor_of, write, sides[0], args.floor_runs)
            write()
            print(f"{name}: {json.dumps(section.summary())}", flush=True)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
