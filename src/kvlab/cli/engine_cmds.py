"""Commands over the reference engine: prove, kv-bench."""

from __future__ import annotations
