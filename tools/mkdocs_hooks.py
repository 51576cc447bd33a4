"""MkDocs hooks for kvlab's site (``hooks:`` in mkdocs.yml).

1. The command-line reference, generated from the commands themselves:
   ``docs/reference/cli.md`` holds a marker line, replaced at build time with what
   Typer's own generator (``typer kvlab.cli utils docs``) writes for kvlab's app: every
   command, its arguments, options and defaults, read from the same objects ``--help``
   reads. So the page cannot drift from the code. Headings move one level down so the
   page keeps its own title.
2. The vocabulary across tools (``docs/concepts/metrics.md``), generated from
   :mod:`kvlab.analysis.vocabulary` the same way.
3. The API pages render kvlab's docstrings, which use Sphinx's cross-reference roles
   (``:class:`~kvlab.errors.KvlabError```) and ``::`` before a literal block; the roles'
   markers are dropped from the rendered HTML so the name reads as plain code.
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

MARKER = "<!-- kvlab: generated command reference -->"
CLI_PAGE = "reference/cli.md"
VOCABULARY_MARKER = "<!-- kvlab: generated vocabulary -->"
VOCABULARY_PAGE = "concepts/metrics.md"

# ":class:<code>~kvlab.x.Y</code>" as mkdocstrings renders a Sphinx role -> "<code>Y</code>"
_ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj):(<code>)(~?)([\w.]+)(</code>)")
_LITERAL_INTRO = re.compile(r"::</p>")


def generated_reference() -> str:
    """Typer's Markdown for ``kvlab`` (every command and sub-command), headings one level
    down (``# `kvlab``` becomes ``##``)."""
    done = subprocess.run(
        [sys.executable, "-m", "typer", "kvlab.cli", "utils", "docs", "--name", "kvlab"],
        capture_output=True, text=True, check=False, timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"typer utils docs failed ({done.returncode}): {done.stderr.strip()}")
    lines, fenced = [], False
    for line in done.stdout.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        lines.append("#" + line if line.startswith("#") and not fenced else line)
    return "\n".join(lines) + "\n"


def plain_roles(html: str) -> str:
    """Drop Sphinx role markers from rendered docstrings; ``~`` keeps the last name only,
    as Sphinx shows it."""

    def name(match: re.Match[str]) -> str:
        opening, short, target, closing = match.groups()
        shown = target.rsplit(".", 1)[-1] if short else target
        return f"{opening}{shown}{closing}"

    return _LITERAL_INTRO.sub(":</p>", _ROLE.sub(name, html))


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Put the generated reference where the CLI page has its marker, and the
    vocabulary table (kvlab.analysis.vocabulary) where the metrics page has its own."""
    if page.file.src_uri == VOCABULARY_PAGE:
        from kvlab.analysis.vocabulary import markdown_table

        if VOCABULARY_MARKER not in markdown:
            raise RuntimeError(f"{VOCABULARY_PAGE} lost its marker {VOCABULARY_MARKER!r}")
        return markdown.replace(VOCABULARY_MARKER, markdown_table())
    if page.file.src_uri != CLI_PAGE:
        return markdown
    if MARKER not in markdown:
        raise RuntimeError(f"{CLI_PAGE} lost its marker line {MARKER!r}")
    return markdown.replace(MARKER, generated_reference())


def on_page_content(html: str, **_: Any) -> str:
    """Docstrings' Sphinx roles as plain code, on every page (only the API pages have any)."""
    return plain_roles(html)
