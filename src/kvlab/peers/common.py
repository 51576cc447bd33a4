"""What every peer reader shares: one imported Record, and the output-token check.

An imported row keeps the peer's own clock readings, moved to nanoseconds from the
file's first request start, and leaves ``None`` what the peer does not record (llama.cpp
timings, cached tokens, the terminator, the prompt when the file has none). Its
``mode`` is the tool's name and its ``capacity`` 0 (no peer records one), so two files
of one tool compare with ``kvlab compare`` like two runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kvlab.errors import ConfigError, ValidationFailure
from kvlab.rundir import ApiKind, Outcome, Record


@dataclass
class Request:
    """One request as a peer file states it. Times are ns from the file's first start;
    None: not in the file."""

    index: int  # position in the file
    t_sent: int
    t_end: int
    requested_tokens: int | None
    output_tokens: int | None
    ok: bool
    t_first_chunk: int | None = None  # first event the tool saw (may be empty)
    t_first_content: int | None = None  # first token of any kind (reasoning included)
    t_first_answer: int | None = None  # first answer (not reasoning) token
    t_last_content: int | None = None
    chunk_ns: list[int] = field(default_factory=list)
    prompt_tokens: int | None = None
    prompt: str | None = None
    text: str = ""
    error: str | None = None
    load: str | None = None
    warmup: bool = False


Miscount = tuple[int, int | None, int]  # (request index, output tokens counted, requested)


def force_the_length(wrong: Sequence[Miscount]) -> str:
    """The usual cause of a wrong output length: the server stopped at end-of-sequence."""
    return "force the length: ignore_eos"


def to_records(requests: Sequence[Request], *, tool: str, path: Path, api: ApiKind,
               requested: int | None,
               hint: Callable[[Sequence[Miscount]], str] = force_the_length) -> list[Record]:
    """kvlab Records of a peer file's requests, after the output-token check.

    ``requested`` (the --requested-tokens option) fills in a request count the file
    does not state and must agree with one it does. Raises ValidationFailure naming the
    file when a request's output-token count differs from what was requested (``hint``
    says why and what to do, from the miscounted requests), and ConfigError when nobody
    says what was requested.
    """
    source = str(path)
    seen: dict[tuple[str | None, str], int] = {}
    out: list[Record] = []
    wrong: list[Miscount] = []
    for r in requests:
        want = r.requested_tokens if r.requested_tokens is not None else requested
        if want is None:
            raise ConfigError(f"{path}: the file does not say how many output tokens were "
                              "requested; give --requested-tokens N")
        if requested is not None and r.requested_tokens not in (None, requested):
            raise ConfigError(f"{path}: request {r.index} asked for {r.requested_tokens} "
                              f"output tokens, not the {requested} given")
        if r.ok and not r.warmup and r.output_tokens != want:
            wrong.append((r.index, r.output_tokens, want))
        if r.prompt is not None:
            sha = hashlib.sha256(r.prompt.encode("utf-8")).hexdigest()
            query = f"p{sha[:12]}"
        else:
            sha, query = "", f"r{r.index:05d}"
        repetition = seen.get((r.load, query), 0)
        seen[(r.load, query)] = repetition + 1
        out.append(Record(
            run_id=path.stem, mode=tool, capacity=0, query_id=query,
            repetition=repetition, position=r.index, warmup=r.warmup, load=r.load,
            api=api, path="", stream=True, prompt_sha256=sha, prompt=r.prompt,
            requested_tokens=want, t_sent=r.t_sent, t_first_chunk=r.t_first_chunk,
            t_first_content=r.t_first_content, t_first_answer=r.t_first_answer,
            t_last_content=r.t_last_content,
            t_end=r.t_end, chunk_ns=r.chunk_ns, chunk_tokens=[None] * len(r.chunk_ns),
            prompt_tokens=r.prompt_tokens, output_tokens=r.output_tokens,
            imported_from=source, outcome=Outcome.OK if r.ok else Outcome.MALFORMED,
            error=None if r.ok else (r.error or "the tool marked it failed")[:200],
            text=r.text,
        ))
    if wrong:
        shown = "; ".join(f"request {i}: {got} output tokens, {want} requested"
                          for i, got, want in wrong[:3])
        raise ValidationFailure(
            f"{path}: {len(wrong)} of {len(requests)} requests did not produce the "
            f"requested output tokens ({shown}{' …' if len(wrong) > 3 else ''}); "
            f"their times measure different work, so kvlab refuses the file ({hint(wrong)})")
    return out


def ns(seconds: float) -> int:
    """Seconds (a float clock reading or duration) to integer nanoseconds."""
    return round(seconds * 1e9)


def first_missing(data: object, fields: Sequence[str]) -> str | None:
    """The first of ``fields`` that ``data`` lacks, or None when it has them all.

    A field is a dotted path from the top of the file; ``[]`` steps into every item of
    a list (``benchmarks[].requests``): the field must be in each. A list that is empty
    has nothing to lack. The name returned is the path as given, so a refusal (or a
    test on a new version of a peer) names the very field that changed.
    """
    for path in fields:
        if not _has(data, path.split(".")):
            return path
    return None


def _has(node: object, steps: list[str]) -> bool:
    if not steps:
        return True
    step, rest = steps[0], steps[1:]
    each = step.endswith("[]")
    key = step.removesuffix("[]")
    if key:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    if each:
        if not isinstance(node, list):
            return False
        return all(_has(item, rest) for item in node)
    return _has(node, rest)
