"""The embedded server: the reference engine behind llama.cpp- and OpenAI-shaped APIs.

``kvlab serve`` runs :func:`create_app` with uvicorn. Generation is serialized, one
slot. Routes: ``/health``, ``/props``, ``/tokenize``, ``/detokenize``,
``/completion`` (``/completions``), ``/v1/models``, ``/v1/chat/completions``,
``/v1/completions``.
"""

from kvlab.serve.app import create_app
from kvlab.serve.runner import BackgroundServer, serve
from kvlab.serve.state import ServeSettings

__all__ = ["BackgroundServer", "ServeSettings", "create_app", "serve"]
