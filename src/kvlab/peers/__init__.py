"""Peers' result files read into kvlab Records, so compare and verdicts work on them.

Three shapes are read (each module says which file and version it follows):

- GuideLLM ``benchmarks.json`` (:mod:`.guidellm`),
- vLLM ``bench serve`` JSON saved with ``--save-detailed`` (:mod:`.vllm`),
- AIPerf ``profile_export.jsonl`` (:mod:`.aiperf`).

``read_peer_file`` recognises the shape from the content, never from the name, and
refuses a file of any other shape with one line naming the file and the shapes read.
Every Record it returns has ``imported_from`` set to the file's path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvlab.errors import ConfigError
from kvlab.peers import aiperf, guidellm, vllm
from kvlab.peers.common import first_missing, to_records
from kvlab.records import ApiKind, Record

__all__ = ["SHAPES", "missing_field", "read_peer_file", "tool_of"]

SHAPES: tuple[str, ...] = (guidellm.SHAPE, vllm.SHAPE, aiperf.SHAPE)
_READERS: dict[str, Any] = {"guidellm": guidellm, "vllm": vllm, "aiperf": aiperf}


def _parse(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the file ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return aiperf.parse_lines(text)


def read_peer_file(path: Path | str, requested_tokens: int | None = None) -> list[Record]:
    """The requests of a GuideLLM, vLLM or AIPerf result file as imported Records.

    ``requested_tokens`` is the output length the benchmark asked for, needed when the
    file does not state it (vLLM). Raises ConfigError for an unknown shape or a missing
    requested length, ValidationFailure when any request's output-token count differs
    from the requested one.
    """
    path = Path(path)
    data = _parse(path)
    tool = tool_of(data)
    if tool is not None:
        reader = _READERS[tool]
        gap = first_missing(data, reader.REQUIRED)
        if gap is not None:
            raise ConfigError(f"{path}: a {tool} result without the field {gap}, which "
                              f"kvlab reads (as {tool} {reader.VERSION} writes it); has "
                              f"{tool}'s format changed?")
        try:
            found, chat = reader.requests(data)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise ConfigError(f"{path}: a {tool} result kvlab cannot read "
                              f"({type(exc).__name__}: {exc}); it reads "
                              f"{'; '.join(SHAPES)}") from None
    elif vllm.summary_only(data):
        raise ConfigError(f"{path}: a vLLM result without per-request data; rerun "
                          "vllm bench serve with --save-result --save-detailed")
    else:
        raise ConfigError(f"{path}: not a result file kvlab reads; it reads "
                          f"{'; '.join(SHAPES)}")
    if not found:
        raise ConfigError(f"{path}: a {tool} result with no request in it")
    api = ApiKind.OPENAI_CHAT if chat else ApiKind.OPENAI_COMPLETION
    if tool == "vllm":
        return to_records(found, tool=tool, path=path, api=api, requested=requested_tokens,
                          hint=vllm.length_hint)
    return to_records(found, tool=tool, path=path, api=api, requested=requested_tokens)


def tool_of(data: Any) -> str | None:
    """Which peer wrote ``data`` (a parsed result file), or None."""
    return next((name for name, reader in _READERS.items() if reader.matches(data)), None)


def missing_field(path: Path | str) -> str | None:
    """A field the pinned version of the file's peer writes and kvlab reads that the
    file lacks (the first, as a path: ``benchmarks[].requests...``), or None. A test on
    a file the peer made in CI names the field when a new version changes the format."""
    data = _parse(Path(path))
    tool = tool_of(data)
    if tool is None:
        raise ConfigError(f"{path}: not a result file kvlab reads; it reads "
                          f"{'; '.join(SHAPES)}")
    return first_missing(data, _READERS[tool].EXPECTED)
