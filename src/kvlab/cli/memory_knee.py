"""``kvlab memory --knee SERVER``: the concurrency knee of a served model, one row per
KV budget."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from kvlab.cli._app import console
from kvlab.cli.lists import float_list, int_list
from kvlab.errors import ConfigError
from kvlab.memory import ModelShape
from kvlab.memory.budget_metrics import kvlab_blocks, vllm_blocks
from kvlab.memory.formula import MIB
from kvlab.memory.knee import (
    VLLM_CPU_BLOCK_SIZE,
    VLLM_CPU_MAX_BATCHED_TOKENS,
    VLLM_CPU_MAX_NUM_SEQS,
    Knee,
    Workload,
    kvlab_knee,
    llamacpp_knee,
    vllm_knee,
)
from kvlab.memory.served import PoolName
from kvlab.memory.vllm_blocks import kv_space_bytes, vllm_blocks_for_bytes
from kvlab.servers.kinds import OLD_SPELLINGS, SERVER_KINDS


@dataclass(frozen=True)
class KneeArgs:
    """The command line of ``--knee``, checked: one server, one workload, its budgets.

    ``kv_blocks`` / ``kv_space_gib`` / ``contexts``: one row per value; ``metrics``: a
    /metrics URL or file the budget is read from. None means the server's default.
    """

    server: str
    work: Workload
    kv_blocks: list[int] = field(default_factory=list)
    kv_space_gib: list[float] = field(default_factory=list)
    metrics: str | None = None
    block_size: int | None = None
    slots: int | None = None
    prefill_budget: int | None = None
    contexts: list[int] = field(default_factory=list)
    unified: bool = False
    ubatch: int = 512
    batch: int = 2048
    dtype: str | None = None

    def __post_init__(self) -> None:
        pools = _pools()
        if self.server not in pools:
            why = ("the kind declares no KV pool (kv_pool)" if self.server in SERVER_KINDS
                   else "no such server kind")
            raise ConfigError(f"--knee {self.server!r}: {why}; give one of "
                              f"{', '.join(pools)}")
        budgets = {"--kv-blocks": self.kv_blocks, "--kv-space-gib": self.kv_space_gib,
                   "--metrics": self.metrics, "-L/--context (-c)": self.contexts}
        allowed = self.pool.budgets
        given = [name for name, value in budgets.items() if value]
        wrong = [name for name in given if name not in allowed]
        if wrong:
            raise ConfigError(f"--knee {self.server} takes its budget from "
                              f"{' or '.join(sorted(allowed))}, not {wrong[0]}")
        if len(given) != 1:
            raise ConfigError(f"--knee {self.server} needs one KV budget: "
                              f"{' or '.join(sorted(allowed))}")
        if not self.pool.paged and (self.block_size or self.prefill_budget):
            raise ConfigError(f"--knee {self.server} has no blocks: drop --block-size and "
                              "--prefill-budget (its budget is -L as -c, and --slots as -np)")

    @property
    def pool(self) -> _Pool:
        """How the server's kind holds its KV budget, as --knee reads it."""
        return _POOLS[_pools()[self.server]]


def read_metrics(source: str) -> str:
    """A /metrics text from a URL (http...) or a saved file."""
    if source.startswith(("http://", "https://")):
        import httpx

        try:
            answer = httpx.get(source, timeout=10.0)
            answer.raise_for_status()
        except httpx.HTTPError as exc:
            raise ConfigError(f"--metrics {source}: {exc}; is the server up?") from None
        return answer.text
    path = Path(source)
    if not path.is_file():
        raise ConfigError(f"--metrics {source}: no such file or URL; give a /metrics URL "
                          "or a saved copy")
    return path.read_text(encoding="utf-8", errors="replace")


def _llamacpp_knees(shape: ModelShape, args: KneeArgs) -> list[tuple[str, Knee]]:
    slots = args.slots or 1
    return [(f"-c {c} -np {slots}" + (" -kvu" if args.unified else ""),
             llamacpp_knee(shape, args.work, c, slots, kv_unified=args.unified,
                           type_k=args.dtype or "f16", type_v=args.dtype or "f16",
                           n_ubatch=args.ubatch, n_batch=args.batch))
            for c in args.contexts]


def _paged_knees(shape: ModelShape, args: KneeArgs) -> list[tuple[str, Knee]]:
    budgets = [(f"{b} blocks", b) for b in args.kv_blocks]
    if args.metrics:
        blocks = kvlab_blocks(read_metrics(args.metrics))
        budgets.insert(0, (f"{blocks} blocks ({args.metrics})", blocks))
    return [(label, kvlab_knee(shape, args.work, blocks, args.block_size or 16,
                               slots=args.slots or 16,
                               prefill_budget=args.prefill_budget or 256,
                               dtype=args.dtype or "f32"))
            for label, blocks in budgets]


def _vllm_knees(shape: ModelShape, args: KneeArgs) -> list[tuple[str, Knee]]:
    budgets: list[tuple[str, int, int | None]] = []  # (label, blocks, block size read)
    if args.metrics:
        blocks, size = vllm_blocks(read_metrics(args.metrics))
        budgets.append((f"{blocks} blocks ({args.metrics})", blocks, size))
    budgets += [(f"{b} blocks", b, None) for b in args.kv_blocks]
    dtype = args.dtype or "bf16"
    block = args.block_size or VLLM_CPU_BLOCK_SIZE
    for gib in args.kv_space_gib:
        blocks = vllm_blocks_for_bytes(shape, kv_space_bytes(gib), block, dtype)
        budgets.append((f"{gib:g} GiB = {blocks} blocks", blocks, None))
    out = []
    for label, blocks, size_read in budgets:
        if size_read is not None and args.block_size and size_read != args.block_size:
            raise ConfigError(f"--block-size {args.block_size} differs from the server's "
                              f"block_size {size_read} in --metrics; drop --block-size")
        out.append((label, vllm_knee(
            shape, args.work, blocks, size_read or block,
            max_num_seqs=args.slots or VLLM_CPU_MAX_NUM_SEQS,
            max_num_batched_tokens=args.prefill_budget or VLLM_CPU_MAX_BATCHED_TOKENS,
            dtype=dtype)))
    return out


@dataclass(frozen=True)
class _Pool:
    """What ``--knee SERVER`` means for a server whose KV pool follows one rule (the
    kind's ``kv_pool``): where its budget may come from, whether it has blocks, and its
    knee per budget."""

    budgets: frozenset[str]
    paged: bool
    knees: Callable[[ModelShape, KneeArgs], list[tuple[str, Knee]]]


_POOLS: dict[PoolName, _Pool] = {
    "vllm-blocks": _Pool(frozenset({"--kv-blocks", "--kv-space-gib", "--metrics"}), True,
                         _vllm_knees),
    "llamacpp-slots": _Pool(frozenset({"-L/--context (-c)"}), False, _llamacpp_knees),
    "paged-blocks": _Pool(frozenset({"--kv-blocks", "--metrics"}), True, _paged_knees),
}


def _pools() -> dict[str, PoolName]:
    """Each server kind with a KV pool (its settings' ``kv_pool``) -> that pool."""
    return {kind: cls.kv_pool for kind, cls in SERVER_KINDS.items()
            if cls.kv_pool is not None}


def current_kind(name: str) -> str:
    """``--knee``'s SERVER as a kind: an older spelling (``kvlab``) is read as its kind,
    with one deprecation line on stderr."""
    new = OLD_SPELLINGS.get(name)
    if new is None:
        return name
    print(f"--knee {name} is deprecated; write --knee {new}", file=sys.stderr)
    return new


def knees(shape: ModelShape, args: KneeArgs) -> list[tuple[str, Knee]]:
    """(the budget as given, the knee) per budget."""
    return args.pool.knees(shape, args)


def knee_view(shape: ModelShape, args: KneeArgs, title: str) -> dict[str, Any]:
    """One row per budget: what one sequence holds, the knee and what lies past it."""
    rows = knees(shape, args)
    unit = rows[0][1].unit
    table = Table(title=f"{title} - {args.server}: {args.work.prompt_tokens} prompt + "
                        f"{args.work.output_tokens} output tokens per request",
                  caption="\n".join(dict.fromkeys(
                      f"{label}: {k.layout}; {k.rule}" for label, k in rows)),
                  caption_justify="left")
    for col in ("budget", "KV MiB", f"{unit}/seq", f"usable {unit}", "max seqs", "fits",
                "first past", "past it", "bound by", "use at knee"):
        table.add_column(col, justify="right")
    docs = []
    for label, k in rows:
        table.add_row(label, f"{k.budget_bytes / MIB:.2f}", str(k.per_seq), str(k.capacity),
                      str(k.max_seqs), str(k.fits), str(k.first_past), str(k.past),
                      str(k.bound), f"{k.usage(k.fits):.1%}")
        docs.append({"budget": label, **k.as_dict()})
    return {"shape": shape.describe(), "rows": docs, "_table": table}


def knee_document(server: str, shapes: list[ModelShape], bad: list[str],
                  args: dict[str, Any], json_out: bool,
                  title: Callable[[ModelShape], str]) -> dict[str, Any]:
    """``--knee``: the arguments checked into :class:`KneeArgs`, one view per model."""
    if bad:
        raise ConfigError(f"--knee predicts a server's concurrency; drop {bad[0]}")
    if args["prompt_tokens"] is None or args["output_tokens"] is None:
        raise ConfigError("--knee needs the workload: --prompt-tokens N --output-tokens N")
    slots = int_list(args["seqs"], "--slots")
    if len(slots) > 1:
        raise ConfigError("--knee takes one --slots value (the server's cap on running "
                          "sequences)")
    server = current_kind(server)
    knee_args = KneeArgs(
        server=server, work=Workload(args["prompt_tokens"], args["output_tokens"]),
        kv_blocks=int_list(args["kv_blocks"], "--kv-blocks"),
        kv_space_gib=float_list(args["kv_space_gib"], "--kv-space-gib"),
        metrics=args["metrics"], block_size=args["block_size"],
        slots=slots[0] if slots else None, prefill_budget=args["prefill_budget"],
        contexts=int_list(args["context"], "-L/--context"), unified=args["unified"],
        ubatch=args["ubatch"], batch=args["batch"], dtype=args["dtype"])
    for value, flag in ((knee_args.block_size, "--block-size"),
                        (knee_args.prefill_budget, "--prefill-budget")):
        if value is not None and value <= 0:
            raise ConfigError(f"{flag} must be positive, got {value}")
    docs = []
    for shape in shapes:
        doc = knee_view(shape, knee_args, title(shape))
        table = doc.pop("_table")
        if not json_out:
            console.print(table)
        docs.append(doc)
    return {"mode": "knee", "server": server,
            "workload": {"prompt_tokens": knee_args.work.prompt_tokens,
                         "output_tokens": knee_args.work.output_tokens,
                         "kv_tokens": knee_args.work.kv_tokens},
            "models": docs}
