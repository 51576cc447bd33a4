"""Check kvlab's KV-cache prediction against what llama-server says it allocated.

With ``-lv 4`` llama.cpp logs one line per KV cache it creates::

    llama_kv_cache: size =   12.00 MiB (  4096 cells,   3 layers,  1/1 seqs),
        K (f16):    6.00 MiB, V (f16):    6.00 MiB          (one line in the log)

A sliding-window model (Gemma 3) gets two caches, announced by
``llama_kv_cache_iswa: creating non-SWA KV cache, size = N cells`` and then
``creating     SWA KV cache``; each is followed by its own ``size =`` line.

The log prints MiB with two decimals, so the check rounds the predicted bytes the same
way before comparing, and compares cells and layers exactly. A disagreement is kept in
the result (:class:`KvCheck`, kept in the run's manifest); :mod:`kvlab.report.kv_check`
shows it, never hides it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kvlab.errors import KvlabError
from kvlab.memory.llamacpp import llama_mib

MIB = 1024 * 1024
RESOLUTION_NOTE = (
    "llama-server logs sizes in MiB with 2 decimals; predicted bytes are rounded the same "
    "way before comparing (resolution 0.01 MiB = 10,486 bytes); cells and layers are exact."
)

_SIZE_LINE = re.compile(
    r"llama_kv_cache: size =\s*(?P<size>[\d.]+) MiB \(\s*(?P<cells>\d+) cells,\s*"
    r"(?P<layers>\d+) layers,\s*(?P<seqs>\d+)/(?P<streams>\d+) seqs\), "
    r"K \((?P<tk>\w+)\):\s*(?P<k>[\d.]+) MiB, V \((?P<tv>\w+)\):\s*(?P<v>[\d.]+) MiB"
)
_FA_LINE = re.compile(r"(?:Flash Attention was auto, set to|flash_attn =) (?P<fa>enabled|disabled)")
_ISWA_LINE = re.compile(r"llama_kv_cache_iswa: creating\s+(?P<kind>non-SWA|SWA) KV cache")


class LoggedKvCache(BaseModel):
    """One ``llama_kv_cache: size = ...`` line, as logged."""

    kind: str  # "non-SWA", "SWA", or "kv" for a model without sliding windows
    cells: int  # per stream
    layers: int
    n_seq_max: int
    n_stream: int
    type_k: str
    type_v: str
    size_mib: float
    k_mib: float
    v_mib: float


class PredictedKvCache(BaseModel):
    """kvlab's prediction for one KV cache (bytes are exact)."""

    kind: str
    cells: int
    layers: int
    n_seq_max: int = 1
    n_stream: int = 1
    k_bytes: int
    v_bytes: int

    @property
    def size_bytes(self) -> int:
        return self.k_bytes + self.v_bytes


class KvCacheComparison(BaseModel):
    """Predicted vs logged for one cache; ``mismatches`` names every field that differs."""

    kind: str
    predicted: PredictedKvCache | None
    logged: LoggedKvCache | None
    match: bool
    mismatches: list[str]


class KvCheck(BaseModel):
    """The whole check: one comparison per cache, an overall verdict and the caveat."""

    caches: list[KvCacheComparison]
    match: bool
    note: str = RESOLUTION_NOTE
    inputs: dict[str, Any] = {}  # capacity, slots, cache types, ubatch the prediction used


def parse_kv_lines(lines: Iterable[str]) -> list[LoggedKvCache]:
    """The KV caches a llama-server log reports, in the order they were created."""
    caches: list[LoggedKvCache] = []
    pending_kind: str | None = None
    for line in lines:
        iswa = _ISWA_LINE.search(line)
        if iswa:
            pending_kind = iswa["kind"]
            continue
        m = _SIZE_LINE.search(line)
        if m:
            caches.append(LoggedKvCache(
                kind=pending_kind or "kv", cells=int(m["cells"]), layers=int(m["layers"]),
                n_seq_max=int(m["seqs"]), n_stream=int(m["streams"]), type_k=m["tk"],
                type_v=m["tv"], size_mib=float(m["size"]), k_mib=float(m["k"]),
                v_mib=float(m["v"]),
            ))
            pending_kind = None
    return caches


def parse_kv_log(path: Path) -> list[LoggedKvCache]:
    """Parse a server log file (see :func:`parse_kv_lines`)."""
    with Path(path).open(encoding="utf-8", errors="replace") as handle:
        return parse_kv_lines(handle)


def log_mib(n_bytes: int) -> float:
    """Bytes as the log prints them: MiB with 2 decimals, via llama.cpp's float math."""
    return float(llama_mib(n_bytes))


def compare_cache(predicted: PredictedKvCache | None,
                  logged: LoggedKvCache | None) -> KvCacheComparison:
    """Compare one predicted cache with one logged cache (either may be missing)."""
    kind = (predicted or logged).kind if (predicted or logged) else "kv"  # type: ignore[union-attr]
    if predicted is None or logged is None:
        missing = "predicted" if predicted is None else "logged"
        return KvCacheComparison(kind=kind, predicted=predicted, logged=logged, match=False,
                                 mismatches=[f"no {missing} cache"])
    mismatches = []
    pairs = [
        ("cells", predicted.cells, logged.cells),
        ("layers", predicted.layers, logged.layers),
        ("seqs", predicted.n_seq_max, logged.n_seq_max),
        ("streams", predicted.n_stream, logged.n_stream),
        ("K MiB", log_mib(predicted.k_bytes), logged.k_mib),
        ("V MiB", log_mib(predicted.v_bytes), logged.v_mib),
        ("size MiB", log_mib(predicted.size_bytes), logged.size_mib),
    ]
    for name, want, got in pairs:
        if abs(want - got) > 1e-9:
            mismatches.append(f"{name}: predicted {want}, logged {got}")
    return KvCacheComparison(kind=kind, predicted=predicted, logged=logged,
                             match=not mismatches, mismatches=mismatches)


def build_check(predicted: list[PredictedKvCache], logged: list[LoggedKvCache],
                inputs: dict[str, Any] | None = None) -> KvCheck:
    """Pair caches by kind (non-SWA, SWA, kv) and compare each pair."""
    kinds = list(dict.fromkeys([c.kind for c in logged] + [c.kind for c in predicted]))
    by_kind_p = {c.kind: c for c in predicted}
    by_kind_l = {c.kind: c for c in logged}
    caches = [compare_cache(by_kind_p.get(k), by_kind_l.get(k)) for k in kinds]
    inputs = dict(inputs or {})
    for cache in caches:  # the log also names the cache types: they must be the ones asked
        for field_name in ("type_k", "type_v"):
            want = inputs.get(field_name)
            got = getattr(cache.logged, field_name, None) if cache.logged else None
            if want is not None and got is not None and want != got:
                cache.mismatches.append(f"{field_name}: asked {want}, logged {got}")
                cache.match = False
    ok = bool(caches) and all(c.match for c in caches)
    return KvCheck(caches=caches, match=ok, inputs=inputs)


# llama.cpp's batch defaults: n_batch = min(n_ctx, -b 2048), n_ubatch = min(n_batch, -ub 512)
_DEFAULT_BATCH = 2048
_DEFAULT_UBATCH = 512


def effective_ubatch(n_ctx: int, ubatch: int | None) -> int:
    """The micro-batch llama.cpp will use with ``-c n_ctx``: it sizes the sliding-window
    cache."""
    return min(n_ctx, _DEFAULT_BATCH, ubatch or _DEFAULT_UBATCH)


def flash_attn_from_log(lines: Iterable[str]) -> bool | None:
    """Whether the server ran with flash attention, as its log says (None if unsaid).

    It matters for the prediction: without it llama.cpp stores V transposed, padded to
    the widest layer.
    """
    for line in lines:
        m = _FA_LINE.search(line)
        if m:
            return m["fa"] == "enabled"
    return None


def predict_for_server(model_path: Path, n_ctx: int, settings: Any,
                       flash_attn: bool | None = None) -> list[PredictedKvCache]:
    """kvlab.memory's prediction for a llama-server launched with ``-c n_ctx`` (the total
    over its slots) and ``settings``."""
    from kvlab.memory import predict_llamacpp_kv, shape_from_gguf

    if flash_attn is None:  # not in the log: "auto" is taken as on, as on CPU builds
        flash_attn = settings.flash_attn != "off"
    prediction = predict_llamacpp_kv(
        shape_from_gguf(model_path), n_ctx, n_seq=settings.slots, kv_unified=False,
        type_k=settings.cache_type_k, type_v=settings.cache_type_v,
        n_ubatch=settings.ubatch or _DEFAULT_UBATCH, n_batch=_DEFAULT_BATCH,
        flash_attn=flash_attn,
    )
    return [
        PredictedKvCache(kind=c.kind, cells=c.cells, layers=c.n_layers, n_seq_max=c.n_seq_max,
                         n_stream=c.n_stream, k_bytes=c.k_bytes, v_bytes=c.v_bytes)
        for c in prediction.caches
    ]


def check_server_log(log_path: Path, model_path: Path, capacity: int, settings: Any) -> KvCheck:
    """Parse the server's log and compare it with kvlab's prediction for ``capacity``
    tokens per slot (the server ran with ``-c capacity x slots``)."""
    from kvlab.memory import ctx_size_for

    text = Path(log_path).read_text(encoding="utf-8", errors="replace").splitlines()
    logged = parse_kv_lines(text)
    flash_attn = flash_attn_from_log(text)
    n_ctx = ctx_size_for(capacity, settings.slots)
    inputs: dict[str, Any] = {
        "capacity": capacity, "n_ctx": n_ctx, "slots": settings.slots, "kv_unified": False,
        "type_k": settings.cache_type_k, "type_v": settings.cache_type_v,
        "n_ubatch": effective_ubatch(n_ctx, settings.ubatch),
        "flash_attn": flash_attn,
    }
    if settings.extra_args:
        inputs["extra_args_not_modelled"] = list(settings.extra_args)
    try:
        predicted = predict_for_server(model_path, n_ctx, settings, flash_attn)
    except KvlabError as exc:  # e.g. an architecture the shape reader does not know
        inputs["prediction_unavailable"] = str(exc)
        predicted = []
    return build_check(predicted, logged, inputs)
