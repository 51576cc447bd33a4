"""Rows of a dataset file, each with the line it starts on, and their one-line errors.

Every dataset kind that reads a file goes through here, so a bad row is always refused
the same way: :class:`~kvlab.errors.ConfigError` with ``file:line: what is wrong``.
Files are read whole (a dataset kvlab measures is at most a few thousand rows).

- JSONL: one JSON object per non-blank line.
- CSV: a header line, then one row per record (a quoted field may span lines; a row's
  line is the one it starts on).
- JSON: an array of objects (ShareGPT's layout); each element's line is where it starts.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvlab.errors import ConfigError


@dataclass(frozen=True)
class FileRow:
    """One row of a dataset file: where it is (``path``, 1-based ``line``) and its fields."""

    path: str
    line: int
    data: dict[str, Any]

    @property
    def where(self) -> str:
        """``file:line``, as every message about this row starts."""
        return f"{self.path}:{self.line}"

    def error(self, message: str) -> ConfigError:
        """The one-line error about this row."""
        return ConfigError(f"{self.where}: {message}")

    def text(self, column: str) -> str:
        """The non-empty text of ``column``; ConfigError when the row has none."""
        value = self.data.get(column)
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"no prompt: column {column!r} is missing or empty")
        return value

    def length(self, column: str, what: str) -> int | None:
        """A whole non-negative token count from ``column`` (None when the row has none);
        ConfigError for a negative or non-integer value."""
        value = self.data.get(column)
        if value is None or value == "":
            return None
        try:
            number = float(value) if isinstance(value, str) else value
        except ValueError:
            raise self.error(f"{what} {value!r} is not a number of tokens") from None
        if isinstance(number, bool) or not isinstance(number, (int, float)) \
                or number != int(number):
            raise self.error(f"{what} {value!r} is not a whole number of tokens")
        if number < 0:
            raise self.error(f"{what} is negative ({int(number)})")
        return int(number)


def read_text(path: Path) -> str:
    """A dataset file's text; ConfigError (one line) when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the dataset file ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None


def read_jsonl(path: Path) -> list[FileRow]:
    """The objects of a JSONL file, one per non-blank line."""
    rows = []
    for number, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise ConfigError(f"{path}:{number}: expected a JSON object")
        rows.append(FileRow(str(path), number, item))
    return _some(path, rows)


def read_csv(path: Path, delimiter: str = ",") -> list[FileRow]:
    """The records of a CSV file with a header line, as ``{column: text}``."""
    reader = csv.reader(io.StringIO(read_text(path), newline=""), delimiter=delimiter)
    try:
        header = next(reader)
    except StopIteration:
        raise ConfigError(f"{path}: empty CSV file (expected a header line)") from None
    except csv.Error as exc:
        raise ConfigError(f"{path}:1: not CSV ({exc})") from None
    rows = []
    start = reader.line_num + 1
    try:
        for record in reader:
            if any(cell.strip() for cell in record):
                if len(record) > len(header):
                    raise ConfigError(f"{path}:{start}: {len(record)} fields, the header "
                                      f"has {len(header)}")
                rows.append(FileRow(str(path), start, dict(zip(header, record, strict=False))))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise ConfigError(f"{path}:{start}: not CSV ({exc})") from None
    return _some(path, rows)


def read_json_array(path: Path) -> list[FileRow]:
    """The objects of a JSON array file (or of a JSONL file, one per line)."""
    text = read_text(path)
    start = len(text) - len(text.lstrip())
    if text[start:start + 1] != "[":
        return read_jsonl(path)
    decoder = json.JSONDecoder()

    def line_of(at: int) -> int:
        return text.count("\n", 0, at) + 1

    rows = []
    at = _skip(text, start + 1)
    while at < len(text) and text[at] != "]":
        try:
            item, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{exc.lineno}: not JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise ConfigError(f"{path}:{line_of(at)}: expected a JSON object")
        rows.append(FileRow(str(path), line_of(at), item))
        at = _skip(text, end)
        if at < len(text) and text[at] == ",":
            at = _skip(text, at + 1)
        elif at < len(text) and text[at] != "]":
            raise ConfigError(f"{path}:{line_of(at)}: expected ',' or ']' between items")
    if at >= len(text):
        raise ConfigError(f"{path}:{line_of(len(text.rstrip()))}: the JSON array is not "
                          "closed")
    return _some(path, rows)


def _skip(text: str, at: int) -> int:
    """The index of the first non-blank character at or after ``at``."""
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _some(path: Path, rows: list[FileRow]) -> list[FileRow]:
    if not rows:
        raise ConfigError(f"{path}: no rows in the dataset file")
    return rows


def unique_ids(rows: list[tuple[str, FileRow]]) -> None:
    """ConfigError naming the second row of any id given twice."""
    seen: dict[str, FileRow] = {}
    for row_id, row in rows:
        if row_id in seen:
            raise row.error(f"id {row_id!r} is also the id of line {seen[row_id].line}; "
                            "ids must be unique")
        seen[row_id] = row
