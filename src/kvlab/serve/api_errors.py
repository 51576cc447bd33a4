"""HTTP errors in llama.cpp's shape: ``{"error": {"code", "message", "type", ...}}``.

Handlers raise :class:`ApiError`; the app turns it into a JSON response. The types and
status codes follow llama-server (``server-common.cpp``), so a client that handles
llama.cpp's errors handles ours. On the OpenAI routes (:func:`is_openai_path`) the
error object also carries OpenAI's ``param`` (null), so it is OpenAI's shape too
(``message``, ``type``, ``param``, ``code``).
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

STATUS_OF_TYPE: dict[str, int] = {
    "invalid_request_error": 400,
    "exceed_context_size_error": 400,
    "authentication_error": 401,
    "not_found_error": 404,
    "method_not_allowed": 405,
    "server_error": 500,
    "not_supported_error": 501,
    "unavailable_error": 503,
}


class ApiError(Exception):
    """An error answered to the client; ``extra`` keys go into the error object."""

    def __init__(self, error_type: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.status = STATUS_OF_TYPE[error_type]
        self.extra = extra

    def body(self, openai: bool = False) -> dict[str, Any]:
        """The JSON body, e.g. ``{"error": {"code": 400, "message": ..., "type": ...}}``;
        ``openai``: with ``"param": null`` as well."""
        error = {"code": self.status, "message": self.message, "type": self.error_type,
                 **self.extra}
        if openai:
            error.setdefault("param", None)
        return {"error": error}

    def response(self, openai: bool = False,
                 headers: dict[str, str] | None = None) -> JSONResponse:
        """The error as a JSON response with its HTTP status."""
        return JSONResponse(self.body(openai), status_code=self.status, headers=headers)


OPENAI_PATHS = ("/v1/", "/chat/completions", "/models")


def is_openai_path(path: str) -> bool:
    """Whether ``path`` is one of the OpenAI-shaped routes (``/v1/...`` and its aliases)."""
    return path.startswith(OPENAI_PATHS[0]) or path in OPENAI_PATHS[1:]


def invalid_request(message: str) -> ApiError:
    """400 ``invalid_request_error``."""
    return ApiError("invalid_request_error", message)


def exceed_context(n_prompt: int, n_ctx: int) -> ApiError:
    """400 ``exceed_context_size_error`` for a prompt of ``n_prompt`` >= ``n_ctx`` tokens."""
    return ApiError(
        "exceed_context_size_error",
        f"request ({n_prompt} tokens) exceeds the available context size ({n_ctx} tokens), "
        "try increasing it",
        n_prompt_tokens=n_prompt,
        n_ctx=n_ctx,
    )


LOADING = ApiError("unavailable_error", "Loading model")
INVALID_API_KEY = ApiError("authentication_error", "Invalid API Key")
