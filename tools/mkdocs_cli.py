"""MkDocs hook: the command-line reference, generated from the commands themselves.

``docs/reference/cli.md`` holds a marker line; at build time this hook replaces it with
what Typer's own generator (``typer kvlab.cli utils docs``) writes for kvlab's app: every
command, its arguments, options and defaults, read from the same objects ``--help``
reads. So the page cannot drift from the code. Headings move one level down so the
page keeps its own title.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

MARKER = "<!-- kvlab: generated command reference -->"
PAGE = "reference/cli.md"


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


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Put the generated reference where the CLI page has its marker."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise RuntimeError(f"{PAGE} lost its marker line {MARKER!r}")
    return markdown.replace(MARKER, generated_reference())
