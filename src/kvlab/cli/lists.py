"""One syntax for every option that takes a list of numbers.

Such an option is declared repeatable (``list[str]``) and each value may itself be a
comma list, so ``-L 2048,8192`` and ``-L 2048 -L 8192`` mean the same. Commands parse
the values with :func:`int_list` or :func:`float_list` and end their help with
:func:`list_help`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from kvlab.errors import ConfigError

N = TypeVar("N", int, float)

LIST_METAVAR = "N[,N...]"  # what --help shows for such an option's value


def list_help(flag: str, a: str, b: str) -> str:
    """The sentence every list option's help ends with, e.g. for ``-L 2048,8192``."""
    return f"Repeat the option or give a comma list: {flag} {a},{b} = {flag} {a} {flag} {b}."


def _numbers(values: Iterable[str] | None, option: str, convert: Callable[[str], N],
             what: str, positive: bool) -> list[N]:
    """Every number of every value, in the order given (repeats kept: ``--seqs
    300,300`` is two sequences)."""
    out: list[N] = []
    for value in values or []:
        for part in str(value).split(","):
            text = part.strip()
            if not text:
                continue
            try:
                number = convert(text)
            except ValueError:
                raise ConfigError(f"{option}: {text!r} is not a {what}; give {what}s, "
                                  f"repeated or as a comma list") from None
            if positive and not number > 0:
                raise ConfigError(f"{option}: {text} must be positive")
            out.append(number)
    if values and not out:
        raise ConfigError(f"{option}: give at least one {what}")
    return out


def int_list(values: Iterable[str] | None, option: str, positive: bool = True) -> list[int]:
    """``["2048,8192", "512"]`` -> ``[2048, 8192, 512]``; ConfigError naming ``option``
    for anything that is not an integer (or, with ``positive``, not above 0).
    A missing option (None or ``[]``) gives ``[]``: the caller applies its default."""
    return _numbers(values, option, int, "whole number", positive)


def float_list(values: Iterable[str] | None, option: str,
               positive: bool = True) -> list[float]:
    """As :func:`int_list`, for numbers that may have a fraction (``"0.5,2"``)."""
    return _numbers(values, option, float, "number", positive)
