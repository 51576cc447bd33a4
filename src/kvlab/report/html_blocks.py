"""The pieces report.html is drawn with: its style, tables, images, and the Markdown a
section writes turned into HTML.

:func:`markdown_block` reads the little Markdown report sections write (pipe tables,
``- `` bullets, ``### `` headings, lines; ``**bold**`` and ``code`` inline), so a
section's one body serves report.md as it is and report.html through this.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from html import escape

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;
max-width:1120px;color:#1d1d1f;padding:0 16px}
h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:28px;
border-bottom:1px solid #ddd;padding-bottom:3px}h3{font-size:14px;margin:14px 0 4px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:12.5px}
th,td{border:1px solid #d8d8d8;padding:3px 7px;text-align:right}
th{background:#f3f3f5}td.l,th.l{text-align:left}
.faster{color:#17803d;font-weight:600}.slower{color:#b3261e;font-weight:600}
.nodiff{color:#6b6b6b}.warn{background:#fff4e5;border-left:4px solid #f0a020;padding:6px 10px}
.muted{color:#6b6b6b}img{max-width:100%;border:1px solid #eee;margin:6px 0}
pre{background:#f7f7f9;padding:8px;overflow:auto;font-size:11.5px}
code{background:#f3f3f5;padding:0 3px}
"""

_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")


def inline(text: str) -> str:
    """One line of Markdown text as HTML: escaped, ``**bold**`` and ``code`` drawn."""
    return _CODE.sub(r"<code>\1</code>", _BOLD.sub(r"<b>\1</b>", escape(text)))


def table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """An HTML table; the first ``left`` columns are left-aligned. Cells are escaped."""
    def cells(tag: str, values: Sequence[str]) -> str:
        return "".join(
            f'<{tag}{" class=l" if i < left else ""}>{inline(str(v))}</{tag}>'
            for i, v in enumerate(values)
        )
    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    return f"<table><thead><tr>{cells('th', header)}</tr></thead><tbody>{body}</tbody></table>"


def img(png: bytes | None, alt: str) -> str:
    """A PNG inlined as a data URL ("" for no image)."""
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def section(title: str, inner: str) -> str:
    """A section: its title as ``<h2>`` and its HTML."""
    return f"<h2>{escape(title)}</h2>\n{inner}"


def markdown_block(text: str) -> str:
    """A section's Markdown body as HTML (see the module's docstring)."""
    out: list[str] = []
    rows: list[list[str]] = []

    def flush() -> None:
        if rows:
            kept = [r for r in rows if not all(set(c) <= set("-: ") for c in r)]
            out.append(table(kept[0], kept[1:]))
            rows.clear()

    for line in text.splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
            continue
        flush()
        if line.startswith("### "):
            out.append(f"<h3>{inline(line[4:])}</h3>")
        elif line.startswith("- "):
            out.append(f"<li>{inline(line[2:])}</li>")
        elif line.strip():
            out.append(f"<p>{inline(line)}</p>")
    flush()
    return "\n".join(out)
