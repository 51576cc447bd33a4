"""A run's JSON-lines files (``gauges.jsonl``, ``process_memory.jsonl``): one pydantic
model a line, appended as samples land and read back skipping what does not read (a
torn final line from an interrupted write)."""

from __future__ import annotations

from pathlib import Path
from typing import IO, TypeVar

from pydantic import BaseModel

Row = TypeVar("Row", bound=BaseModel)


def read_jsonl(path: Path, model: type[Row]) -> list[Row]:
    """Every line of ``path`` that reads as ``model`` ([] when the file does not exist);
    a line that does not (a torn final line) is skipped."""
    if not path.is_file():
        return []
    out: list[Row] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(model.model_validate_json(line))
        except ValueError:
            continue
    return out


class JsonlAppender:
    """Appends one model a line to a run's JSON-lines file (opened on creation), each
    line flushed (handed to the operating system) before :meth:`append` returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._out: IO[str] = path.open("a", encoding="utf-8")

    def append(self, row: BaseModel) -> None:
        """Write ``row`` as one line."""
        self._out.write(row.model_dump_json() + "\n")
        self._out.flush()

    def close(self) -> None:
        self._out.close()
