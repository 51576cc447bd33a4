"""Build a :class:`ModelShape` from a GGUF file's metadata, the keys llama.cpp reads.

The header is read sequentially with the ``gguf`` package's constants; tensor data is
never read (see :func:`read_gguf_metadata` for why not ``gguf.GGUFReader``).

Keys (``{arch}`` = ``general.architecture``): ``block_count``, ``context_length``,
``embedding_length``, ``attention.head_count``, ``attention.head_count_kv`` (scalar or
per-layer array; default head_count), ``attention.key_length`` / ``value_length``
(default embedding_length / head_count), ``attention.key_length_swa`` /
``value_length_swa`` (default: the global ones), ``attention.sliding_window``,
``attention.sliding_window_pattern`` (int, or one bool per layer).

Which architectures slide follows llama.cpp (``src/models/<arch>.cpp``): gemma2
(pattern 2, window 4096 unless given), gemma3 (pattern 6 when the window is > 0),
cohere2 (4), gpt-oss (2); any other architecture slides only when its file carries an
explicit ``sliding_window_pattern`` with a positive window; phi3 never does (llama.cpp
disables Phi's window).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, BinaryIO

from gguf import GGUF_MAGIC, GGUFValueType

from kvlab.errors import ConfigError, ModelFileError
from kvlab.memory.shapes import ModelShape, swa_flags

# arch -> (default pattern, default window or None when the window must be in the file)
_SWA_ARCHS: dict[str, tuple[int, int | None]] = {
    "gemma2": (2, 4096),
    "gemma3": (6, None),
    "cohere2": (4, None),
    "gpt-oss": (2, None),
}
_NO_SWA_ARCHS = {"phi3"}


def read_gguf_metadata(path: str | Path, *, max_array: int = 4096) -> dict[str, Any]:
    """The metadata key/values of a GGUF file: strings decoded, arrays as lists.

    Only the header is read, sequentially; arrays longer than ``max_array`` (the
    vocabulary, merges, scores) are skipped with a seek and left out, and tensor data
    is never touched. ``gguf.GGUFReader`` would do the same job but builds numpy
    objects for every vocabulary entry: about 30 s and 700 MB of RAM on the 240 MB
    Gemma 3 270M file, against well under a second here. ModelFileError when the file
    is missing, truncated or not a GGUF (versions 2 and 3).
    """
    p = Path(path)
    if not p.is_file():
        raise ModelFileError(f"GGUF file {str(p)!r} does not exist or is not a file")
    try:
        with p.open("rb") as f:
            return _read_header(f, max_array)
    except ModelFileError:
        raise
    except (OSError, struct.error, UnicodeDecodeError, ValueError, EOFError) as exc:
        raise ModelFileError(f"{str(p)!r} is not a readable GGUF file: {exc}") from None


# GGUF value types (gguf.GGUFValueType) -> struct format of one scalar
_SCALARS = {
    GGUFValueType.UINT8: "B",
    GGUFValueType.INT8: "b",
    GGUFValueType.UINT16: "H",
    GGUFValueType.INT16: "h",
    GGUFValueType.UINT32: "I",
    GGUFValueType.INT32: "i",
    GGUFValueType.FLOAT32: "f",
    GGUFValueType.BOOL: "?",
    GGUFValueType.UINT64: "Q",
    GGUFValueType.INT64: "q",
    GGUFValueType.FLOAT64: "d",
}
_SKIPPED = object()


def _read_header(f: BinaryIO, max_array: int) -> dict[str, Any]:
    def exact(n: int) -> bytes:
        data = f.read(n)
        if len(data) != n:
            raise EOFError("the file ends inside its header")
        return data

    magic = exact(4)
    if struct.unpack("<I", magic)[0] != GGUF_MAGIC:
        raise ModelFileError(f"{f.name!r} is not a GGUF file (magic {magic!r})")
    order = "<"
    version = struct.unpack("<I", exact(4))[0]
    if version & 0xFFFF == 0:  # written on a big-endian machine
        order, version = ">", struct.unpack(">I", struct.pack("<I", version))[0]
    if version not in (2, 3):
        raise ModelFileError(f"{f.name!r}: GGUF version {version} is not supported (2 or 3)")

    def unpack(fmt: str) -> Any:
        fmt = order + fmt
        return struct.unpack(fmt, exact(struct.calcsize(fmt)))[0]

    def string() -> str:
        return exact(unpack("Q")).decode("utf-8")

    def value(vtype: int, keep: bool = True) -> Any:
        if vtype == GGUFValueType.STRING:
            if keep:
                return string()
            f.seek(unpack("Q"), 1)
            return _SKIPPED
        if vtype == GGUFValueType.ARRAY:
            etype, count = unpack("I"), unpack("Q")
            keep_items = keep and count <= max_array
            if not keep_items and etype in _SCALARS:
                f.seek(count * struct.calcsize(order + _SCALARS[GGUFValueType(etype)]), 1)
                return _SKIPPED
            items = [value(etype, keep_items) for _ in range(count)]
            return items if keep_items else _SKIPPED
        return unpack(_SCALARS[GGUFValueType(vtype)])

    _n_tensors, n_kv = unpack("Q"), unpack("Q")
    meta: dict[str, Any] = {}
    for _ in range(n_kv):
        key = string()
        item = value(unpack("I"))
        if item is not _SKIPPED:
            meta[key] = item
    return meta


def shape_from_gguf(path: str | Path, name: str | None = None) -> ModelShape:
    """The KV shape llama.cpp derives from a GGUF file's metadata."""
    p = Path(path)
    meta = read_gguf_metadata(p)
    return shape_from_gguf_metadata(
        meta, name=name or str(meta.get("general.name") or p.stem), source=f"gguf {p}"
    )


def shape_from_gguf_metadata(meta: dict[str, Any], *, name: str, source: str) -> ModelShape:
    """The KV shape from already-read GGUF metadata (see the module docstring)."""
    arch = meta.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise ModelFileError(f"{source}: missing key general.architecture")

    def get(key: str, default: Any = None) -> Any:
        return meta.get(f"{arch}.{key}", default)

    n_layers = _scalar(get("block_count"), f"{arch}.block_count", source, required=True)
    heads = get("attention.head_count")
    if heads is None:
        raise ModelFileError(f"{source}: missing key {arch}.attention.head_count")
    n_heads_layers = _per_layer(heads, n_layers, f"{arch}.attention.head_count", source)
    if len(set(n_heads_layers)) != 1:
        raise ModelFileError(f"{source}: per-layer attention.head_count is not supported")
    n_heads = n_heads_layers[0]
    kv = get("attention.head_count_kv", n_heads)
    kv_heads = _per_layer(kv, n_layers, f"{arch}.attention.head_count_kv", source)

    n_embd = get("embedding_length")
    key_len, value_len = get("attention.key_length"), get("attention.value_length")
    if (key_len is None or value_len is None) and n_embd is None:
        raise ModelFileError(
            f"{source}: missing key {arch}.embedding_length (needed because "
            f"attention.key_length/value_length are absent)"
        )
    default_dim = int(n_embd) // n_heads if n_embd is not None else 0
    head_k = _scalar(key_len if key_len is not None else default_dim, "key_length", source)
    head_v = _scalar(value_len if value_len is not None else default_dim, "value_length", source)
    head_k_swa = get("attention.key_length_swa")
    head_v_swa = get("attention.value_length_swa")

    n_swa, is_swa = _sliding_layout(arch, meta, n_layers, source)
    ctx = get("context_length")
    try:
        return ModelShape(
            name=name,
            n_layers=n_layers,
            n_heads=n_heads,
            kv_heads=kv_heads,
            head_dim_k=head_k,
            head_dim_v=head_v,
            head_dim_k_swa=int(head_k_swa) if head_k_swa is not None else None,
            head_dim_v_swa=int(head_v_swa) if head_v_swa is not None else None,
            is_swa=is_swa,
            n_swa=n_swa,
            d_model=int(n_embd) if n_embd is not None else None,
            n_ctx_train=int(ctx) if ctx is not None else None,
            source=source,
        )
    except ConfigError as exc:
        raise ModelFileError(str(exc)) from None


def _scalar(value: Any, key: str, source: str, required: bool = False) -> int:
    if value is None and required:
        raise ModelFileError(f"{source}: missing key {key}")
    if isinstance(value, list) or value is None or int(value) <= 0:
        raise ModelFileError(f"{source}: {key} must be a positive integer, got {value!r}")
    return int(value)


def _per_layer(value: Any, n_layers: int, key: str, source: str) -> tuple[int, ...]:
    """A scalar repeated per layer, or a per-layer array checked for length."""
    if isinstance(value, list):
        if len(value) != n_layers:
            raise ModelFileError(f"{source}: {key} has {len(value)} entries for {n_layers} layers")
        return tuple(int(v) for v in value)
    return (int(value),) * n_layers


def _sliding_layout(
    arch: str, meta: dict[str, Any], n_layers: int, source: str
) -> tuple[int, tuple[bool, ...]]:
    """(window, per-layer flags) following llama.cpp's per-architecture rules."""
    no_swa = (0, (False,) * n_layers)
    if arch in _NO_SWA_ARCHS:
        return no_swa
    default_pattern, default_window = _SWA_ARCHS.get(arch, (None, None))
    window = meta.get(f"{arch}.attention.sliding_window", default_window)
    pattern = meta.get(f"{arch}.attention.sliding_window_pattern")
    if window is None or int(window) <= 0:
        return no_swa
    if isinstance(pattern, list):
        if len(pattern) != n_layers:
            raise ModelFileError(
                f"{source}: {arch}.attention.sliding_window_pattern has {len(pattern)} "
                f"entries for {n_layers} layers"
            )
        flags = tuple(bool(v) for v in pattern)
    elif pattern is not None:
        flags = swa_flags(n_layers, int(pattern))
    elif default_pattern is not None:
        flags = swa_flags(n_layers, default_pattern)
    else:
        return no_swa  # llama.cpp does not read a window for this architecture
    return (int(window), flags) if any(flags) else no_swa
