"""The embedded server: the reference engine behind llama.cpp- and OpenAI-shaped APIs.

``kvlab serve`` runs :func:`create_app` with uvicorn: the toy preset, or a real model
from a GGUF (``--model gemma-3-270m``). Generation is serialized, one slot. Routes:
``/health``, ``/props``, ``/tokenize``, ``/detokenize``, ``/apply-template``,
``/completion`` (``/completions``), ``/v1/models``, ``/v1/chat/completions``,
``/v1/completions``. The names below are imported lazily so that importing a sibling
module (``kvlab.serve.synthetic``) does not pull in FastAPI.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BackgroundServer", "ServeSettings", "create_app", "serve"]

_HOMES = {
    "BackgroundServer": "kvlab.serve.runner",
    "serve": "kvlab.serve.runner",
    "ServeSettings": "kvlab.serve.state",
    "create_app": "kvlab.serve.app",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'kvlab.serve' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
