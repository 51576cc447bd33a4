"""The ``trace`` dataset kind: replay a Mooncake-style trace, its times and shared blocks.

A trace is JSONL, one request per line, in time order::

    {"timestamp": 0, "input_length": 1200, "output_length": 40, "hash_ids": [0, 1, 2]}

- ``timestamp``: the arrival time, ms (any origin; the first request leaves at 0).
  With ``[load] kind = "trace"`` the requests leave at these times, ``values`` times as
  fast (``values = [1.0, 2.0]``: as recorded, then twice as fast); under another load
  the rows are sent as that load says.
- ``input_length``, ``output_length``: the prompt and output tokens the request asks
  for. Each prompt is sized to its length exactly by the run's token counter.
- ``hash_ids`` (optional): one id per block of ``block_tokens`` prompt tokens (512 in
  Mooncake's traces). Block ``j`` of a prompt is the text of its ``hash_ids[j]``, so two
  requests whose ids agree up to block ``j`` send the same text up to there, and a
  server's prefix cache can reuse it. A block without an id is the row's own. Each
  block's text starts with its id's tag (see :func:`~kvlab.bench.plan.exact.row_tag`)
  and is about ``block_tokens`` tokens; the last block is cut so the whole prompt has
  exactly ``input_length`` tokens.

Bad lines are refused with ``file:line``: a missing or negative length, a time before
the line above it, a request that does not fit the capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from kvlab.bench.plan.dataset import FileDatasetSettings, WorkloadFacts
from kvlab.bench.plan.exact import fit_tokens, row_tag
from kvlab.bench.plan.rows import FileRow, read_jsonl
from kvlab.bench.plan.workload import PreparedPrompt, Query, Tokenizer, sha256
from kvlab.errors import ConfigError

BlockKey = int | tuple[int, int]  # a hash id, or (row index, block) for a row's own block


class TraceDataset(FileDatasetSettings):
    """``[workload.dataset] kind = "trace"``: the first ``rows`` requests of a trace."""

    kind: Literal["trace"] = "trace"
    timed: ClassVar[bool] = True  # rows arrive at the trace's times
    block_tokens: int = Field(default=512, ge=2)  # prompt tokens per hash id

    def build(self, workload: WorkloadFacts) -> TraceRows:
        rows = read_jsonl(Path(self.path))[:self.rows]
        requests: list[TraceRequest] = []
        for index, row in enumerate(rows):
            request = trace_request(row, index, self.block_tokens)
            if requests and request.timestamp_ms < requests[-1].timestamp_ms:
                raise row.error(f"out of time order: timestamp {request.timestamp_ms:g} ms "
                                f"is before {requests[-1].timestamp_ms:g} ms on line "
                                f"{requests[-1].row.line}")
            requests.append(request)
        return TraceRows(requests, self.block_tokens)

    def prompt_rule(self, prompt_fraction: float) -> str:
        """How this kind makes its prompts, for the reports (``prompt_fraction`` does not
        apply)."""
        return (f"Prompts = the requests of the trace {self.path}, each sized to its "
                f"input_length exactly, with the same text for equal hash_ids (blocks of "
                f"{self.block_tokens} tokens); each row's output length is its "
                "output_length. The same prompts for every mode at a capacity.")


@dataclass(frozen=True)
class TraceRequest:
    """One line of a trace: when it arrives (ms), what it asks for, and its blocks."""

    row: FileRow
    index: int
    timestamp_ms: float
    input_tokens: int
    output_tokens: int
    blocks: tuple[BlockKey, ...]

    @property
    def id(self) -> str:
        return f"line{self.row.line}"


def trace_request(row: FileRow, index: int, block_tokens: int) -> TraceRequest:
    """One trace line read; ConfigError (``file:line``) for a missing or negative field."""
    timestamp = row.data.get("timestamp")
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)):
        raise row.error("no timestamp (ms)")
    if timestamp < 0:
        raise row.error(f"the timestamp is negative ({timestamp:g} ms)")
    lengths = []
    for key in ("input_length", "output_length"):
        value = row.length(key, key)
        if value is None:
            raise row.error(f"no {key}")
        if value == 0:
            raise row.error(f"{key} is 0; a request asks for at least 1 token")
        lengths.append(value)
    hash_ids = row.data.get("hash_ids", [])
    if not isinstance(hash_ids, list) or not all(
            isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in hash_ids):
        raise row.error("hash_ids must be a list of whole numbers, none negative")
    count = math.ceil(lengths[0] / block_tokens)
    blocks: list[BlockKey] = list(hash_ids[:count])
    blocks += [(index, j) for j in range(len(blocks), count)]
    return TraceRequest(row, index, float(timestamp), lengths[0], lengths[1], tuple(blocks))


def block_name(key: BlockKey) -> str:
    """A block's name in prepared.json: its hash id, or ``"row~block"`` for a row's own."""
    return str(key) if isinstance(key, int) else f"{key[0]}~{key[1]}"


class TraceRows:
    """A trace's requests (the :class:`~kvlab.bench.plan.dataset.Dataset` interface)."""

    def __init__(self, requests: list[TraceRequest], block_tokens: int) -> None:
        self._requests = requests
        self._block_tokens = block_tokens

    def queries(self) -> list[Query]:
        return [Query(r.id, f"{r.input_tokens} prompt + {r.output_tokens} output tokens at "
                            f"{r.timestamp_ms:g} ms") for r in self._requests]

    def arrivals_ms(self) -> list[float]:
        """Each request's arrival time, ms, in row order."""
        return [r.timestamp_ms for r in self._requests]

    async def prepare(self, counter: Tokenizer, capacity: int, prompt_fraction: float,
                      output_tokens: int) -> tuple[int, list[PreparedPrompt]]:
        """Every prompt sized to its ``input_length``; ConfigError (``file:line``) for the
        first request that does not fit ``capacity``."""
        for r in self._requests:
            if r.input_tokens + r.output_tokens > capacity:
                raise r.row.error(f"{r.input_tokens} prompt tokens + {r.output_tokens} "
                                  f"output tokens exceed the capacity {capacity}")
        texts: dict[BlockKey, str] = {}
        prompts = []
        for r in self._requests:
            for key in r.blocks:
                if key not in texts:
                    texts[key] = await self._block(counter, key, r)
            head = "".join(texts[key] for key in r.blocks[:-1])
            try:
                sized = await fit_tokens(counter, head, r.input_tokens, r.row.where,
                                         filler=texts[r.blocks[-1]])
            except ConfigError as exc:
                raise ConfigError(f"{exc}; do its hash_ids match its input_length?") \
                    from None
            prompts.append(PreparedPrompt(
                r.id, f"trace request at {r.timestamp_ms:g} ms", sized.text,
                sha256(sized.text), sized.tokens, output_tokens=r.output_tokens,
                target_tokens=r.input_tokens, source=r.row.where,
                arrival_ms=r.timestamp_ms, blocks=[block_name(k) for k in r.blocks],
                block_tokens=self._block_tokens))
        return 0, prompts

    async def _block(self, counter: Tokenizer, key: BlockKey, r: TraceRequest) -> str:
        """The text of one block: its tag and prose, ``block_tokens − 1`` tokens, then a
        line break."""
        tag = row_tag(key) if isinstance(key, int) else f"{row_tag(key[0])}~{key[1]}"
        sized = await fit_tokens(counter, f"{tag}: ", self._block_tokens - 1,
                                 f"{r.row.where}: block {tag}")
        return sized.text + "\n"
