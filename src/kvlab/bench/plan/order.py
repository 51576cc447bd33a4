"""Run order: which mode runs when, so that drift and order effects can cancel.

- ``blocked``: each mode runs all its rows at a capacity, one mode after the other
  (A A A ... B B B ...). Simple, but a machine that warms up or slows down over the
  run favours whichever mode ran first.
- ``abba``: at each capacity the rows of every mode are split in two halves, run as
  A1 B1 B2 A2 (with more modes: forward then mirrored, A1 B1 C1 C2 B2 A2). Both modes'
  rows are then centred on the same moment, so a linear drift cancels in the mean.
  Launched servers are stopped and restarted at each switch of mode; two adjacent
  blocks of the same mode share one server.
- ``interleaved``: request by request, A B A B ..., with every mode's server up at
  once. Only where that is possible without one mode disturbing another: not with
  launched llama.cpp servers (they would share the GPU/CPU memory being measured);
  there ``abba`` is used instead and the manifest says so.

Public API::

    used = resolve_order("interleaved", modes)      # OrderChoice(requested, used, reason)
    blocks = plan_blocks(["A", "B"], {"A": [512], "B": [512]}, "abba")
    rows_of_block = split(rows, block.part, block.parts)
    launches = server_launches(blocks)             # adjacent blocks sharing one server
    pairs = interleave({"A": rows_a, "B": rows_b})  # [("A", r0), ("B", r0), ...]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeVar

OrderKind = Literal["blocked", "abba", "interleaved"]
T = TypeVar("T")


@dataclass(frozen=True)
class OrderChoice:
    """The order asked for, the order used, and why they differ (None: they do not)."""

    requested: OrderKind
    used: OrderKind
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Block:
    """One stretch of a run: ``part`` of ``parts`` equal shares of a mode's rows."""

    mode: str
    capacity: int
    part: int = 0
    parts: int = 1


def resolve_order(requested: OrderKind, servers: Mapping[str, str],
                  alone: Mapping[str, str] | None = None) -> OrderChoice:
    """The order that can be used for modes ``{name: server kind}``. ``alone``: the
    kinds whose server is too heavy to run beside another, with the program each
    launches (default: llama.cpp's, the settings' ``interleaves`` False)."""
    alone = {"llamacpp": "llama-server"} if alone is None else alone
    if requested != "blocked" and len(servers) < 2:
        return OrderChoice(requested, "blocked", "one mode: nothing to alternate")
    if requested == "interleaved":
        launched = sorted(name for name, kind in servers.items() if kind in alone)
        if launched:
            programs = sorted({alone[servers[name]] for name in launched})
            return OrderChoice(requested, "abba",
                               f"interleaving needs every server up at once; "
                               f"{', '.join(launched)} launch {', '.join(programs)}")
    return OrderChoice(requested, requested)


def plan_blocks(modes: Sequence[str], capacities: Mapping[str, Sequence[int]],
                order: OrderKind) -> list[Block]:
    """The sequence of blocks for ``order`` (``interleaved`` plans as ``blocked`` per
    capacity with every mode in one block each; the runner alternates inside)."""
    if order == "blocked":
        return [Block(m, c) for m in modes for c in capacities[m]]
    all_caps = sorted({c for m in modes for c in capacities[m]})
    blocks: list[Block] = []
    for capacity in all_caps:
        here = [m for m in modes if capacity in capacities[m]]
        if order == "interleaved":
            blocks += [Block(m, capacity) for m in here]
            continue
        blocks += [Block(m, capacity, 0, 2) for m in here]
        blocks += [Block(m, capacity, 1, 2) for m in reversed(here)]
    return blocks


def split(rows: Sequence[T], part: int, parts: int) -> list[T]:
    """The ``part``-th of ``parts`` contiguous shares of ``rows`` (sizes differ by <= 1)."""
    if not 0 <= part < parts:
        raise ValueError(f"part {part} is not within 0..{parts - 1}")
    n = len(rows)
    return list(rows[part * n // parts:(part + 1) * n // parts])


def server_launches(blocks: Sequence[Block]) -> list[list[Block]]:
    """Blocks grouped by launch: adjacent blocks of the same (mode, capacity) share one
    server, started before the first and stopped after the last."""
    launches: list[list[Block]] = []
    for block in blocks:
        last = launches[-1][-1] if launches else None
        if last is not None and (last.mode, last.capacity) == (block.mode, block.capacity):
            launches[-1].append(block)
        else:
            launches.append([block])
    return launches


def interleave(rows: Mapping[str, Sequence[T]]) -> list[tuple[str, T]]:
    """Request-by-request alternation in the mapping's mode order: A r0, B r0, A r1, ...;
    a mode with more rows finishes alone."""
    out: list[tuple[str, T]] = []
    longest = max((len(v) for v in rows.values()), default=0)
    for i in range(longest):
        out += [(mode, items[i]) for mode, items in rows.items() if i < len(items)]
    return out


def sequence_of(blocks: Sequence[Block]) -> list[list[Any]]:
    """The plan as JSON for the manifest: [[mode, capacity, part, parts], ...]."""
    return [[b.mode, b.capacity, b.part, b.parts] for b in blocks]
