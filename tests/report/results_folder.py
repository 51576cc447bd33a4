"""A small results folder, laid out as ``make run`` leaves it, from real steps on tiny
inputs: kv-bench on the toy at two short contexts, ``kvlab memory --out`` (formula,
measured, paged), and run directories of hand-made Records evaluated by
``evaluate_run`` (the code ``kvlab run`` ends with)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from kvlab.cli import main
from kvlab.records import Record
from kvlab.report.html import write_html
from kvlab.run.runner import evaluate_run
from kvlab.store.state import InvocationEntry
from kvlab.studies.bench_files import write_outputs
from kvlab.studies.timing import BenchSettings, run_kv_bench
from tests.experiments import embedded, experiment
from tests.report.synthetic_runs import MS, make_row, write_run

INVOCATION_LOADS = ([1.25, 1.0, 0.5], [3.5, 2.0, 1.0])  # a run's load averages, start and stop


def _experiment(name: str, modes: tuple[str, str], load: dict[str, object] | None = None,
                more: tuple[str, ...] = ()) -> str:
    """Modes compared pairwise (``more``: modes besides), six queries at 256."""
    return experiment(name, *(embedded(m) for m in (*modes, *more)), description="hand-made",
                      compare=[modes], load=load,
                      workload=dict(queries=6, capacities=[256], output_tokens=8)).text()


def _pair_rows(modes: tuple[str, str], decode: tuple[float, float]) -> list[Record]:
    """Six queries per mode, sequential; mode B decodes in ``decode[1]`` ms."""
    rows, t = [], 0.0
    for mode, ms in zip(modes, decode, strict=True):
        for q in range(6):
            rows.append(make_row(mode, 256, q, prefill=20 + q, decode=ms + q % 2, start_ms=t))
            t += 200
    return rows


def _batching_rows() -> list[Record]:
    """c=8, 16 requests per mode: one slot serves them one after another (100 ms each),
    batching two rounds of 8 at once (150 ms a round). The one slot's 8 users each send
    when their last answer came (the first 8 at once): the rest wait at the server."""
    rows = []
    for i in range(16):
        sent = 0 if i < 8 else 100 * (i - 7)  # the closed loop's clock, client side
        rows.append(make_row("one-slot", 256, i, prefill=10, decode=88, overhead=2,
                             start_ms=100 * i, load="c=8", t_sent=sent * MS))
        rows.append(make_row("batching", 256, i, prefill=20, decode=128, overhead=2,
                             start_ms=5000 + 150 * (i // 8), load="c=8"))
    return rows


def _notebook_rows() -> list[Record]:
    """One mode "vllm", 3 runs at each of two prompt lengths (capacities 256 and 512)."""
    return [make_row("vllm", capacity, 0, prefill=capacity / 4, decode=70.0 + rep,
                     start_ms=1000 * i, repetition=rep)
            for i, (capacity, rep) in enumerate((c, r) for c in (256, 512) for r in range(3))]


def _servers_rows() -> list[Record]:
    """Three servers at c=8, 16 requests each; a round of 8 takes 200, 400, 100 ms.
    llama-server's every second answer is one token short (refused: output_tokens)."""
    rows = []
    for mode, ms, t0 in (("vllm", 200, 0), ("llama-server", 400, 2000), ("kvlab-serve", 100,
                                                                          5000)):
        rows += [make_row(mode, 256, i, prefill=10, decode=ms - 12, overhead=2,
                          start_ms=t0 + ms * (i // 8), load="c=8",
                          **({"output_tokens": 7} if mode == "llama-server" and i % 2 else {}))
                 for i in range(16)]
    return rows


NOTEBOOK = experiment("vllm-notebook", embedded("vllm"), workload=dict(
    queries=1, repetitions=3, capacities=[256, 512], output_tokens=8)).text()


def _run(root: Path, name: str, toml: str, rows: list[Record], html: bool = False) -> Path:
    """A run directory evaluated as ``kvlab run`` leaves it (with ``html``, report.html
    too; else report.md is its report)."""
    invocation = InvocationEntry(started="2026-01-01T12:00:00+00:00", modes=[], order=[],
                                 run_order={}, stopped="2026-01-01T12:05:00+00:00",
                                 load_average_started=INVOCATION_LOADS[0],
                                 load_average_stopped=INVOCATION_LOADS[1])
    manifest = {"run_id": name, "host": {"cpu": "Test CPU 9000", "cores": 2},
                "invocations": [invocation.model_dump(mode="json")]}
    path = write_run(root / "runs" / f"{name}-20260101-120000", rows, manifest, toml)
    evaluation = evaluate_run(path)
    if html:
        write_html(path, evaluation=evaluation, resamples=100)
    return path


def _memory(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["kvlab", "memory", *args])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code in (0, None)


def build_results(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Write every step's files under ``root`` and return it."""
    threads = torch.get_num_threads()
    try:
        result = run_kv_bench(BenchSettings(contexts=(8, 16), new_tokens=2, repeats=1,
                                            threads=1))
    finally:
        torch.set_num_threads(threads)
    write_outputs(result, root / "kv-bench")
    memory = root / "memory"
    _memory(["-p", "toy", "-L", "192", "--dtype", "f32", "--measure",
             "--out", str(memory / "toy-measured.json")], monkeypatch)
    _memory(["-p", "gemma-3-270m", "--paged", "16", "--seqs", "300,1800", "-L", "2048",
             "--dtype", "f16", "--budget-mib", "64", "--out", str(memory / "paged.json")],
            monkeypatch)
    _run(root, "quickstart", _experiment("quickstart", ("recompute", "kv-cache")),
         _pair_rows(("recompute", "kv-cache"), (60.0, 20.0)), html=True)
    _run(root, "gemma-embedded-vs-llamacpp",
         _experiment("gemma-embedded-vs-llamacpp", ("kv-cache", "llama-server")),
         _pair_rows(("kv-cache", "llama-server"), (40.0, 30.0)))
    _run(root, "llamacpp-cpu", _experiment("llamacpp-cpu", ("t1", "t2")),
         _pair_rows(("t1", "t2"), (50.0, 30.0)))
    _run(root, "continuous-batching",
         _experiment("continuous-batching", ("one-slot", "batching"),
                     {"kind": "concurrency", "values": [8], "requests": 16}),
         _batching_rows(), html=True)
    _run(root, "vllm-notebook", NOTEBOOK, _notebook_rows())
    servers = {"kind": "concurrency", "values": [8], "requests": 16}
    _run(root, "serving-engines",
         _experiment("serving-engines", ("vllm", "llama-server"), servers, ("kvlab-serve",)),
         _servers_rows())
    _crosscheck(root / "crosscheck")
    return root


def _crosscheck(folder: Path) -> None:
    """A crosscheck.json as kvlab peers crosscheck writes it (two clients, one round)."""
    from kvlab.crosscheck.result import ClientLine, CrossCheck, Figure, save

    def line(client: str, program: str, ttft: float) -> ClientLine:
        return ClientLine(client=client, program=program, version="1", expected=5,
                          recorded=5, answered=5, counted=5, problems=[],
                          ttft_median=Figure(value=ttft, low=ttft - 0.5, high=ttft + 0.5),
                          ttft_p99=Figure(value=ttft + 2), itl_median=Figure(value=0.02),
                          itl_p99=Figure(value=0.2), within_tolerance=True, seconds=9.0)

    folder.mkdir()
    save(CrossCheck(schedule={"ttft_ms": 20.0}, schedule_text="TTFT 20 ms, ITL 20 ms",
                    tolerance_ms=10.0, order=[["kvlab", "guidellm"]],
                    clients=[line("kvlab", "kvlab run", 1.26),
                             line("guidellm", "GuideLLM", 2.29)],
                    round_trips=[], failures=[], server_lateness_p99_ms=None,
                    load_before=[1.5, 1.0, 0.5], load_after=[1.75, 1.0, 0.5],
                    cpu_flags=["avx2"], command="kvlab peers crosscheck",
                    started_at="2026-01-01T00:00:00+00:00"), folder)
