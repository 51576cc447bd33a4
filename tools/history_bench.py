"""How long the run history takes at scale: adding N runs of M records, adding them
again unchanged, and a trend query over them (issue 33, item 5).

Generates the runs once into ``--workdir`` (not timed): ``--templates`` distinct run
directories, each evaluated by kvlab (evaluation.json, as ``kvlab run`` leaves it), of
2 modes x 5 closed-loop load points x M/10 queries; then N run directories that share
a template's records and evaluation (hard links) under a manifest of their own (run id,
commit, start time a day apart). Then, timed, into a fresh database: add every run,
add them again (nothing changed: nothing read), and ``trend`` of one mode's
effective ITL at one load point over every run (the median of ``--repeat`` queries on
an open connection, and one ``kvlab history trend`` process start to end).
Prints the machine (CPU model, SIMD flags, cores), the load average before and after,
and one JSON line. Hold the timing lock:

    flock /tmp/kvlab-timing.lock .venv/bin/python tools/history_bench.py --runs 1000 --records 1000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from kvlab.history.ingest import add_to_history
from kvlab.history.queries import read_only, trend
from kvlab.records import ApiKind, Outcome, Record
from kvlab.run.runner import evaluate_run
from kvlab.servers.preflight import cpu_flags, cpu_model, load_average

MS = 1_000_000
LOADS = (1, 2, 4, 8, 16)
MODES = ("vllm", "llama-server")
EXPERIMENT = """name = "bench-history"
[workload]
queries = {queries}  # the rows name more: evaluation reads the records
capacities = [256]
output_tokens = 16
[load]
kind = "concurrency"
values = [1, 2, 4, 8, 16]
[[modes]]
name = "vllm"
server = "vllm"
api = "openai-completion"
[[modes]]
name = "llama-server"
server = "llamacpp"
api = "openai-completion"
"""


def rows(run_id: str, per_point: int, speed: float) -> list[Record]:
    """2 modes x 5 load points x ``per_point`` streamed rows of 16 tokens, a warm-up
    per point; ITL grows with the load, ``speed`` scales every duration."""
    out: list[Record] = []
    t = 0
    for mode_index, mode in enumerate(MODES):
        for c in LOADS:
            for q in range(-1, per_point):
                itl = speed * (10 + 2 * c + 5 * mode_index + (q % 7) * 0.3)
                sent = t
                first = sent + int(speed * (40 + 3 * c + q % 5) * MS)
                chunks = [first + int(i * itl * MS) for i in range(16)]
                prompt = f"query {q}: " + "the harbour town sits at the end of a road. " * 3
                out.append(Record(
                    run_id=run_id, mode=mode, capacity=256, query_id=f"q{max(q, 0):04d}",
                    position=len(out), warmup=q < 0, load=f"c={c}",
                    api=ApiKind.OPENAI_COMPLETION, path="/v1/completions", stream=True,
                    body={"prompt": prompt, "max_tokens": 16, "stream": True},
                    prompt_sha256=hashlib.sha256(prompt.encode()).hexdigest(), prompt=prompt,
                    requested_tokens=16, t_scheduled=sent, t_sent=sent, t_headers=sent + MS,
                    t_first_chunk=first, t_first_content=first, t_last_content=chunks[-1],
                    t_first_answer=first, t_end=chunks[-1] + MS, chunk_ns=chunks,
                    chunk_tokens=[1] * 16, prompt_tokens=40, output_tokens=16,
                    stop_type="length", saw_terminator=True, saw_usage=True,
                    outcome=Outcome.OK, text="x" * 16))
                t = chunks[-1] + 2 * MS
    return out


def generate(workdir: Path, runs: int, records: int, templates: int) -> Path:
    """The run directories (made once; kept for the next measurement)."""
    root = workdir / f"runs-{runs}x{records}"
    if (root / "done").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    per_point = records // (len(MODES) * len(LOADS)) - 1  # a warm-up per point
    queries = per_point
    bases = []
    for i in range(templates):
        base = workdir / "templates" / f"t{i}-{records}"
        if not (base / "evaluation.json").exists():
            base.mkdir(parents=True, exist_ok=True)
            (base / "experiment.toml").write_text(EXPERIMENT.format(queries=min(queries, 30)))
            (base / "records.jsonl").write_text(
                "".join(r.model_dump_json() + "\n"
                        for r in rows(f"t{i}", per_point, 1 + 0.05 * i)))
            (base / "manifest.json").write_text(json.dumps({"run_id": f"t{i}"}))
            evaluate_run(base)
        bases.append(base)
    day0 = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(runs):
        base, path = bases[n % templates], root / f"bench-history-{n:05d}"
        path.mkdir(parents=True)
        for name in ("experiment.toml", "records.jsonl", "evaluation.json"):
            os.link(base / name, path / name)
        started = (day0 + timedelta(hours=n)).isoformat()
        (path / "manifest.json").write_text(json.dumps({
            "run_id": path.name, "kvlab_version": "0.1.0", "git_commit": f"{n // 10:040x}",
            "experiment_name": "bench-history",
            "host": {"cpu": cpu_model(), "cpu_flags": cpu_flags(), "cores": os.cpu_count()},
            "invocations": [{"started": started, "load_average_started": [1.0, 1.0, 1.0]}]}))
        os.utime(path / "manifest.json", ns=((base / "evaluation.json").stat().st_mtime_ns,) * 2)
    (root / "done").write_text("")
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--templates", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/kvlab-history-bench"))
    args = parser.parse_args()
    root = generate(args.workdir, args.runs, args.records, args.templates)
    db = args.workdir / "history.duckdb"
    for old in (db, db.with_name(db.name + ".runs")):
        old.unlink(missing_ok=True)
    load_before = load_average()

    t0 = time.perf_counter()
    added = add_to_history([root], db)
    add_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = add_to_history([root], db)
    again_s = time.perf_counter() - t0

    conn = read_only(db)
    times, points = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        points = trend(conn, "itl_effective_ms", "bench-history", "vllm", load="c=8")
        times.append(time.perf_counter() - t0)
    conn.close()
    t0 = time.perf_counter()
    cli = subprocess.run([sys.executable, "-m", "kvlab", "history", "trend",
                          "itl_effective_ms", "-e", "bench-history", "-m", "vllm", "--load",
                          "c=8", "--db", str(db), "--json"], capture_output=True, text=True,
                         check=True)
    cli_s = time.perf_counter() - t0
    assert len(json.loads(cli.stdout.strip().splitlines()[-1])["points"]) == len(points)
    result = {
        "runs": len(added.added), "records": added.records, "add_s": round(add_s, 2),
        "runs_per_s": round(len(added.added) / add_s, 1),
        "records_per_s": round(added.records / add_s),
        "add_again_s": round(again_s, 2), "unchanged": again.unchanged,
        "trend_points": len(points), "trend_query_s_median": round(statistics.median(times), 4),
        "trend_cli_process_s": round(cli_s, 2), "db_bytes": db.stat().st_size,
        "cpu": cpu_model(), "cpu_flags": cpu_flags(), "cores": os.cpu_count(),
        "load_average_before": load_before, "load_average_after": load_average(),
    }
    print(f"machine: {result['cpu']}, {result['cores']} cores, "
          f"flags {' '.join(result['cpu_flags'] or [])}")
    print(f"load average (1, 5, 15 min): before {load_before}, "
          f"after {result['load_average_after']}")
    print(f"add {result['runs']} runs of {args.records} records ({result['records']:,} rows): "
          f"{add_s:.1f} s ({result['runs_per_s']} runs/s, {result['records_per_s']:,} rows/s)")
    print(f"add them again, unchanged: {again_s:.2f} s ({again.unchanged} unchanged)")
    print(f"trend itl_effective_ms of vllm at c=8 over {len(points)} runs: median "
          f"{statistics.median(times) * 1000:.1f} ms of {args.repeat} queries; "
          f"`kvlab history trend` process: {cli_s:.2f} s")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
