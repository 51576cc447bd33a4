"""The Record: the raw facts of one request, and the append-only JSONL store.

A Record holds only what was observed: client clock readings, what the server
reported, the outcome and the generated text. Metrics (TTFT, ITL, ...) are derived
later by pure functions in :mod:`kvlab.analysis.metrics`.

Clock fields are integer nanoseconds from ``time.perf_counter_ns()``, relative to the
run's start (the ``t0_ns`` of its :class:`RunClock`). A record a load worker sent
(``worker`` set) is on that worker's own clock, whose origin is the run's start moved
by the worker's measured offset: its durations never mix two clocks, and its place on
the run's time axis is good to that offset's error bound. ``None`` means "not observed"
(for example no first chunk on a non-streamed request, or no headers on a refused
connection).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kvlab.api.dialects import ApiKind  # which API a request used (its dialect's key)


class Outcome(StrEnum):
    """How a request ended, from the client's point of view."""

    OK = "ok"
    HTTP_ERROR = "http_error"  # a non-2xx status; see http_status and error
    TIMEOUT = "timeout"  # no complete answer within the request timeout
    DISCONNECTED = "disconnected"  # connection refused, reset or closed mid-stream
    MALFORMED = "malformed"  # a body or event that does not follow the API
    WRONG_API = "wrong_api"  # an answer in another API's shape than the one asked


RECORD_SCHEMA = 2  # the schema_version kvlab's client writes


class RunClock:
    """Monotonic nanoseconds relative to a run's start (``perf_counter_ns``)."""

    def __init__(self, t0_ns: int | None = None) -> None:
        self.t0_ns = time.perf_counter_ns() if t0_ns is None else t0_ns

    def now(self) -> int:
        """Nanoseconds since the run started."""
        return time.perf_counter_ns() - self.t0_ns


class Record(BaseModel):
    """One request's raw facts. See design.md, "The Record"."""

    model_config = ConfigDict(extra="forbid")

    # which Record layout wrote it: 1 (no field, before kvlab 42's client clock), 2
    # (t_sent once the request is written, connection set-up in its own fields)
    schema_version: int = 1

    # identity
    run_id: str
    mode: str
    capacity: int  # the context capacity this mode was configured with (tokens)
    query_id: str
    repetition: int = 0
    position: int = 0  # index in the run's execution order
    warmup: bool = False
    load: str | None = None  # load point label, e.g. "c=8" or "rate=4.0"; None = sequential
    # the load worker that sent it (kvlab run --workers; manifest.json "workers" says
    # where it ran and its clock's offset to the run's); None: the run's own process
    worker: int | None = None
    # a session's turn (a sessions load): the session it belongs to and its index in
    # the session's chain (from 1); its body holds the whole conversation sent and
    # prompt_sha256 is of those messages. None: not a session's turn
    session: str | None = None
    turn: int | None = None

    # request
    api: ApiKind
    path: str  # URL path, e.g. "/completion"
    stream: bool
    body: dict[str, Any] = Field(default_factory=dict)  # request body, no secrets
    prompt_sha256: str
    prompt: str | None = None
    requested_tokens: int

    # client clock (ns since run start)
    t_scheduled: int | None = None  # when the schedule wanted it sent (load tests)
    # when the request was written to its connection (schema 2: after the connection
    # was had, so TTFT holds no set-up); schema 1: before the pool gave a connection
    t_sent: int
    t_headers: int | None = None
    t_first_chunk: int | None = None
    # first and last output chunk of ANY kind: a reasoning model's thinking
    # (delta.reasoning / reasoning_content) is output, so TTFT counts from here
    t_first_content: int | None = None
    t_last_content: int | None = None
    # first chunk of the answer itself (delta.content / text, not reasoning): the time
    # to first answer token; equals t_first_content when nothing was reasoning. None:
    # no answer chunk came, or not streamed, or a record from before kvlab read it
    t_first_answer: int | None = None
    t_end: int
    chunk_ns: list[int] = Field(default_factory=list)  # arrival of each output chunk
    chunk_tokens: list[int | None] = Field(default_factory=list)  # tokens in each chunk
    reasoning_chunks: list[int] = Field(default_factory=list)  # chunk_ns indexes that
    # carried reasoning (one may carry answer text too); [] when none did
    # Most any read of this answer waited in the socket before the client's loop took
    # it (ns). Times above are the kernel's arrival stamps, so this lag is not in them,
    # unless it outgrew the gap between two events (they then share the later stamp).
    # None where reads carry no kernel stamp (aiohttp, https://, not Linux).
    read_lag_ns: int | None = None
    # Connection set-up, apart from TTFT (schema 2): when this request began opening its
    # own connection, when the socket was connected and when TLS was done (None for
    # plain HTTP; through aiohttp, TCP and TLS end together: t_connected None). All None
    # when it went on a connection opened before it (``connection_reused`` True: kept
    # alive, or opened by the point's warm-up) or in a record of schema 1.
    t_connect_start: int | None = None
    t_connected: int | None = None
    t_tls: int | None = None
    connection_reused: bool | None = None  # None: not observed (schema 1, a peer's file)
    # how long a callback queued as the request was written waited for the client's
    # event loop (ns): the loop's lag at the send; None: not observed (schema 1)
    loop_lag_ns: int | None = None

    # server-reported
    prompt_tokens: int | None = None  # tokens_evaluated / usage.prompt_tokens
    output_tokens: int | None = None  # tokens_predicted / usage.completion_tokens
    cached_tokens: int | None = None
    stop_type: str | None = None  # llama.cpp stop_type or OpenAI finish_reason
    truncated: bool | None = None
    timings: dict[str, Any] | None = None  # llama.cpp "timings", verbatim
    saw_terminator: bool | None = None  # [DONE] or final stop:true; None if not streamed
    saw_usage: bool | None = None  # usage object seen; None if not applicable
    # usage.completion_tokens_details.reasoning_tokens, verbatim; None: not reported
    usage_reasoning_tokens: int | None = None
    # prompt tokens the server wrote into its cache (Anthropic's
    # cache_creation_input_tokens); None: not reported
    cache_creation_tokens: int | None = None
    # the answer's id where a later request may continue it (OpenAI Responses'
    # previous_response_id), and the one this request continued; None: none
    response_id: str | None = None
    previous_response_id: str | None = None

    # an embeddings request (openai-embeddings; None for a generation): the texts it
    # carried, the vectors that came back, their distinct lengths, the values among
    # them that were not finite numbers, and the vector length it had to have (the
    # request's ``dimensions``, else the server's declared width; None: unknown)
    inputs: int | None = None
    vectors: int | None = None
    dimensions: list[int] | None = None
    non_finite: int | None = None
    dimension_expected: int | None = None

    # provenance: None for a request kvlab sent; else the peer result file it was read
    # from (peers): its facts are the peer's clock, and facts it lacks are None
    imported_from: str | None = None

    # outcome
    outcome: Outcome
    http_status: int | None = None
    error: str | None = None  # short excerpt, never a secret
    text: str = ""  # the answer (reasoning left out)
    reasoning_text: str = ""  # the reasoning streamed or returned, "" when none
    # what the client noticed in an answer that is not a failure, one line each (e.g.
    # the usage's reasoning count differs from the reasoning tokens streamed)
    notes: list[str] = Field(default_factory=list)

    @property
    def key(self) -> tuple[str, int, str, int, bool, str | None]:
        """Identity of the work a row did; resume skips keys already recorded."""
        return (self.mode, self.capacity, self.query_id, self.repetition, self.warmup, self.load)


class RecordStore:
    """Append-only JSONL file of Records, each pushed to disk before ``append`` returns:
    for tools and tests that write a records file by hand. A run writes its records
    through its one writer instead (:class:`kvlab.rundir.writer.RunWriter`, off the
    event loop)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")

    def append(self, record: Record) -> None:
        """Write one record and push it to disk before returning."""
        self._file.write(record.model_dump_json() + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> RecordStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_records(path: Path) -> list[Record]:
    """All records of a JSONL file; a torn last line (a crash mid-write) is skipped."""
    return list(iter_records(path))


def iter_records(path: Path) -> Iterator[Record]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield Record.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValueError):
            if number == len(lines):
                return  # torn final line from an interrupted write
            raise


def measured(records: Iterable[Record]) -> list[Record]:
    """The records that count: warm-ups removed."""
    return [r for r in records if not r.warmup]
