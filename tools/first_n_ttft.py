"""Median TTFT of each load point's first N requests against the rest (issue 42).

Starts the synthetic server (TTFT 20 ms, ITL 5 ms, 8 forced tokens), runs
``kvlab run`` on an OpenAI chat endpoint of it with closed-loop points c=4 and c=8 of
64 requests each, as a user would, and reads the run's records: per point, the median
TTFT of the first N requests it sent (by run position) and of the rest, and the
connection set-up the records show.

    flock /tmp/kvlab-measure.lock python tools/first_n_ttft.py [--runs 3] [--out DIR]

``--llamacpp`` measures a llama-server kvlab launches (the bundled Gemma 3 270M, 8
slots, ``cache_prompt = false``) with the same workload and points; ``--base-url``
another endpoint (``--api`` and ``--model`` then name it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from kvlab.analysis import metrics
from kvlab.bench.calibrate.server import synthetic_process
from kvlab.rundir import read_records

EXPERIMENT = """\
name = "first-n-ttft"
description = "first N against the rest (issue 42)"

[workload]
queries = 8
capacities = [512]
prompt_fraction = 0.1
output_tokens = 8
warmup = 1

[load]
kind = "concurrency"
values = [4, 8]
requests = 64

[[modes]]
name = "fake"
server = "external"
api = "{api}"
stream = true
[modes.external]
base_url = "{base_url}"
model = "{model}"
[modes.body]
stream_options = {{ include_usage = true }}
"""


LLAMACPP_MODE = """\
[protocol]
cache_prompt = false

[[modes]]
name = "llama-server"
server = "llamacpp"
api = "llamacpp-completion"
stream = true
[modes.llamacpp]
threads = 2
slots = 8
"""


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def point_table(run_dir: Path) -> list[dict[str, object]]:
    """Per load point: median TTFT of its first N requests (N = its users) and of the
    rest, and the set-up the records show."""
    records = [r for r in read_records(run_dir / "records.jsonl") if not r.warmup and r.load]
    out = []
    for load in dict.fromkeys(r.load for r in records):
        rows = sorted((r for r in records if r.load == load), key=lambda r: r.position)
        n = int(str(load).split("=")[1])
        ttft = [metrics.ttft_ms(r) for r in rows]
        setup = getattr(metrics, "setup_ms", lambda r: None)  # (main before issue 42)
        setups = [s for r in rows if (s := setup(r)) is not None]
        opened = [r for r in rows if getattr(r, "connection_reused", None) is False]
        out.append({
            "point": load, "n": n,
            "first_n_ms": _median([t for t in ttft[:n] if t is not None]),
            "rest_ms": _median([t for t in ttft[n:] if t is not None]),
            "opened_own_connection": len(opened),
            "rows": len(rows),
            "setup_mean_ms": statistics.fmean(setups) if setups else None,
            "setup_paid_median_ms": _median([setup(r) or 0.0 for r in opened]),
            "schema": getattr(rows[0], "schema_version", 1),
        })
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="where the runs go (temp dir)")
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--api", default="openai-chat")
    ap.add_argument("--model", default="synthetic")
    ap.add_argument("--llamacpp", action="store_true",
                    help="measure a llama-server kvlab launches (bundled Gemma 3 270M, 8 "
                         "slots) instead of the synthetic server")
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="first-n-"))
    out.mkdir(parents=True, exist_ok=True)

    def one(base_url: str, k: int) -> list[dict[str, object]]:
        exp = out / f"first-n-{k}.toml"
        text = EXPERIMENT.format(api=args.api, base_url=base_url, model=args.model)
        if args.llamacpp:  # the same workload and points, on a launched llama-server
            text = text[: text.index("[[modes]]")] + LLAMACPP_MODE
        exp.write_text(text)
        run_out = out / f"run-{k}"
        subprocess.run([sys.executable, "-m", "kvlab", "run", str(exp), "--out",
                        str(run_out), "--quiet"], check=True)
        (run_dir,) = [p for p in run_out.iterdir() if (p / "records.jsonl").is_file()]
        return point_table(run_dir)

    results = []
    if args.base_url or args.llamacpp:
        results = [one(args.base_url or "", k) for k in range(args.runs)]
    else:
        with synthetic_process(options=["--ttft-ms", "20", "--itl-ms", "5",
                                        "--tokens", "8"]) as url:
            results = [one(url + "/v1", k) for k in range(args.runs)]
    for k, table in enumerate(results):
        for row in table:
            print(json.dumps({"run": k, **row}))


if __name__ == "__main__":
    main()
