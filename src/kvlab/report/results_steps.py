"""The results page's lines for the steps that are not runs: kv-bench's decode timing
and ``kvlab memory``'s measured and paged KV bytes, each file read by a typed model.

A file that is missing says the step did not run; one that does not read as its model
(an older kvlab, a hand edit, a step cut short) is a line naming the file and the first
field it lacks, never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from kvlab.report.results_runs import Headline

KV_BENCH_FILE = Path("kv-bench") / "kv-bench.json"
MEMORY_DIR = Path("memory")
HEADLINE_CONTEXT = 2048  # kv-bench's headline row: naive vs cached decode at 2048 tokens


class _Read(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Machine(_Read):
    """What a step file records of its machine: CPU, logical cores, the load averages
    at its end (1, 5, 15 minutes)."""

    cpu: str | None = None
    cores: int | None = None
    load_average: list[float] | None = None

    def one_minute(self) -> list[float]:
        return self.load_average[:1] if self.load_average else []


class KvBenchRow(_Read):
    """One context of ``kvlab kv-bench``: seconds per decoded token, naive and cached."""

    context: int
    naive_decode_s_per_token: float
    cached_decode_s_per_token: float
    decode_speedup: float


class KvBenchSettings(_Read):
    model: str | None = None
    preset: str | None = None
    threads: int | None = None


class KvBenchFile(_Read):
    """kv-bench.json as the page reads it."""

    rows: list[KvBenchRow] = []
    settings: KvBenchSettings = KvBenchSettings()
    machine: Machine = Machine()


class MeasuredRow(_Read):
    """A row of ``kvlab memory --measure``: KV bytes allocated for real and the formula's."""

    context: int
    type_k: str
    measured_bytes: int
    bytes: int
    matches: bool


class PagedRow(_Read):
    """A row of ``kvlab memory --paged``: the waste of paged blocks and contiguous slots,
    and with a budget how many sequences fit each way."""

    capacity: int
    block: int
    lengths: list[int]
    waste: float
    contiguous_unused: float
    max_seqs_paged: int | None = None
    max_seqs_contiguous: int | None = None
    budget_bytes: int | None = None


class _Shape(_Read):
    name: str = "?"


class MemoryModel(_Read):
    shape: _Shape = _Shape()
    rows: list[dict[str, object]] = []


class MemoryFile(_Read):
    """A ``kvlab memory --out`` file: its mode (formula, paged, ...) and its models."""

    mode: str | None = None
    models: list[MemoryModel] = []
    machine: Machine = Machine()


_Model = TypeVar("_Model", bound=BaseModel)


def _read(path: Path, model: type[_Model]) -> _Model | str | None:
    """``path`` as ``model``; None when it is missing or not JSON (a step cut short), and
    the reason in words when it is JSON of another shape."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        return _why(exc)


def _why(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "the file"
    return f"its file lacks what this page reads ({where}: {first['msg']}); rerun the step"


def _memory_files(root: Path) -> list[tuple[str, MemoryFile | str]]:
    folder = root / MEMORY_DIR
    found = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return [(str(p.relative_to(root)), d) for p in found
            if (d := _read(p, MemoryFile)) is not None]


def step_machines(root: Path) -> list[Machine]:
    """The machines kv-bench's and the memory steps' files recorded, in that order."""
    bench = _read(root / KV_BENCH_FILE, KvBenchFile)
    found = [bench.machine] if isinstance(bench, KvBenchFile) else []
    return found + [d.machine for _, d in _memory_files(root) if isinstance(d, MemoryFile)]


def kv_bench_headline(step: str, root: Path) -> Headline:
    """Naive vs cached decode per token at 2048 tokens (else the largest context)."""
    doc = _read(root / KV_BENCH_FILE, KvBenchFile)
    if isinstance(doc, str):
        return Headline(step, doc, str(KV_BENCH_FILE))
    if doc is None or not doc.rows:
        return Headline(step, f"no {KV_BENCH_FILE} (step not run)")
    rows = {r.context: r for r in doc.rows}
    row = rows[HEADLINE_CONTEXT] if HEADLINE_CONTEXT in rows else rows[max(rows)]
    model = doc.settings.model or doc.settings.preset or "?"
    threads = "?" if doc.settings.threads is None else doc.settings.threads
    text = (f"decode per token at {row.context} tokens ({model}, {threads} thread(s)): naive "
            f"{row.naive_decode_s_per_token * 1e3:.2f} ms, cached "
            f"{row.cached_decode_s_per_token * 1e3:.2f} ms, "
            f"{row.decode_speedup:.1f}x faster with the cache")
    return Headline(step, text, str(KV_BENCH_FILE), doc.machine.one_minute())


def _rows(model: MemoryModel, kind: type[_Model], keep: Callable[[dict[str, object]], bool]
          ) -> list[_Model]:
    return [kind.model_validate(r) for r in model.rows if keep(r)]


def measured_headline(step: str, root: Path) -> Headline:
    """KV bytes allocated for real against the formula (``kvlab memory --measure``)."""
    for source, doc in _memory_files(root):
        if isinstance(doc, str):
            continue  # a memory file of another shape: the paged line names it, if paged
        for model in doc.models if doc.mode == "formula" else []:
            try:
                rows = _rows(model, MeasuredRow, lambda r: "measured_bytes" in r)
            except ValidationError as exc:
                return Headline(step, _why(exc), source)
            if rows:
                parts = [f"{r.context} tokens, {r.type_k}: measured {r.measured_bytes:,} B "
                         + (f"= formula {r.bytes:,} B" if r.matches
                            else f"DIFFERS from formula {r.bytes:,} B") for r in rows]
                return Headline(step, f"{model.shape.name}, " + "; ".join(parts), source,
                                doc.machine.one_minute())
    return Headline(step, f"no {MEMORY_DIR}/*.json with measured bytes (step not run)")


def paged_headline(step: str, root: Path) -> Headline:
    """Unfilled KV bytes: paged blocks vs contiguous slots (``kvlab memory --paged``)."""
    for source, doc in _memory_files(root):
        if isinstance(doc, str) or doc.mode != "paged" or not doc.models:
            continue
        model = doc.models[0]
        try:
            rows = _rows(model, PagedRow, lambda r: True)
        except ValidationError as exc:
            return Headline(step, _why(exc), source)
        parts = []
        for r in rows:
            fit = (f", {r.max_seqs_paged} vs {r.max_seqs_contiguous} sequences fit "
                   f"{(r.budget_bytes or 0) / 2**20:g} MiB" if r.max_seqs_paged is not None
                   else "")
            parts.append(f"capacity {r.capacity}, {len(r.lengths)} sequences: "
                         f"{r.waste:.1%} of paged blocks unfilled vs "
                         f"{r.contiguous_unused:.1%} of contiguous slots unused{fit}")
        block = rows[0].block if rows else "?"
        return Headline(step, f"{model.shape.name}, blocks of {block} tokens: "
                        + "; ".join(parts), source, doc.machine.one_minute())
    return Headline(step, f"no {MEMORY_DIR}/*.json of a paged cache (step not run)")
