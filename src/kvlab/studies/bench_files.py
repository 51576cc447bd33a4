"""kv-bench's files: JSON (settings, raw runs, rows), CSV (rows) and a PNG plot."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from kvlab.errors import ConfigError
from kvlab.servers.preflight import machine_snapshot
from kvlab.studies.timing import KvBenchResult


def write_json(result: KvBenchResult, path: Path) -> None:
    """The result, and the machine it ran on with its load average at the end."""
    document = {**result.to_dict(), "machine": machine_snapshot()}
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def write_csv(result: KvBenchResult, path: Path) -> None:
    rows = result.table()
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write_png(result: KvBenchResult, path: Path) -> None:
    """Left: decode ms per token vs context, both paths (log-log). Right: speedups."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    rows = result.table()
    ctx = [r["context"] for r in rows]
    n = result.settings.new_tokens
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(ctx, [r["naive_decode_s_per_token"] * 1e3 for r in rows], "o-", label="naive")
    left.plot(ctx, [r["cached_decode_s_per_token"] * 1e3 for r in rows], "o-", label="KV cache")
    left.set(xscale="log", yscale="log", xlabel="context (tokens)",
             ylabel="decode time per token (ms)", title="Decode cost per generated token")
    left.legend()
    left.grid(alpha=0.3, which="both")
    right.plot(ctx, [r["decode_speedup"] for r in rows], "o-", label="per-token decode")
    right.plot(ctx, [r["total_speedup"] for r in rows], "o-", label=f"total (prompt + {n})")
    right.axhline(n, color="grey", linestyle="--", linewidth=1,
                  label=f"total bound ≈ N = {n}")
    right.set(xscale="log", yscale="log", xlabel="context (tokens)",
              ylabel="speedup naive / cached", title="What the cache buys")
    right.legend()
    right.grid(alpha=0.3, which="both")
    right.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    right.yaxis.set_major_formatter(ScalarFormatter())
    right.yaxis.set_minor_formatter(NullFormatter())
    for ax in (left, right):  # the measured contexts as plain numbers on the x axis
        ax.set_xticks(ctx, labels=[str(c) for c in ctx])
        ax.xaxis.set_minor_formatter(NullFormatter())
    fig.suptitle(f"kv-bench: {result.settings.label}, {result.settings.threads} thread(s), "
                 f"median of {result.settings.repeats}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(result: KvBenchResult, out_dir: Path) -> list[Path]:
    """Write kv-bench.json, kv-bench.csv and kv-bench.png into ``out_dir``."""
    paths = [out_dir / "kv-bench.json", out_dir / "kv-bench.csv", out_dir / "kv-bench.png"]
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_json(result, paths[0])
        write_csv(result, paths[1])
        write_png(result, paths[2])
    except OSError as exc:
        raise ConfigError(f"cannot write kv-bench results into {out_dir}: {exc}; "
                          f"choose another --out directory") from None
    return paths
