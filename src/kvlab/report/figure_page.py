"""One figure as a page of its own: self-contained HTML (inline CSS, the PNG inlined,
nothing fetched), for the figures ``kvlab history`` draws across runs."""

from __future__ import annotations

import base64
from html import escape

from kvlab.report.html import CSS


def figure_page(png: bytes, title: str, caption: str = "") -> str:
    """``png`` under ``title`` and ``caption`` as one HTML document."""
    data = base64.b64encode(png).decode("ascii")
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{escape(title)}</h1><p class=muted>{escape(caption)}</p>"
            f'<img alt="{escape(title)}" src="data:image/png;base64,{data}"></body></html>\n')
