"""``POST /tokenize`` and ``POST /detokenize`` in llama.cpp's and in vLLM's dialect.

The body says which dialect a client speaks:

- llama.cpp (``{content}``): ``{tokens:[ids]}`` (``with_pieces`` -> ``[{id, piece}]``);
  no BOS unless ``add_special`` is true; special-token text is always parsed.
- vLLM (``{prompt}``, no ``content``): ``{count, max_model_len, tokens, token_strs}``;
  BOS is added unless ``add_special_tokens`` is false (vLLM's default is true), and
  ``max_model_len`` is the context of one sequence (``--ctx-size``). vLLM's
  ``bench serve`` sends ``add_special_tokens: false`` to check its prompts' lengths.

``/detokenize`` takes ``{tokens}`` in both and answers llama.cpp's ``content`` and
vLLM's ``prompt`` (the same text). Every field present is type-checked, used or not,
so a body is refused (400) exactly when the ``/openapi.json`` contract says it is.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from kvlab.serve.api_errors import invalid_request
from kvlab.serve.body import read_json_body
from kvlab.serve.params import as_int
from kvlab.serve.state import ServerState

router = APIRouter()

# Optional boolean fields of either dialect; null means absent (llama.cpp's rule).
FLAGS = ("with_pieces", "add_special", "add_special_tokens", "return_token_strs")


def _state(request: Request) -> ServerState:
    return request.app.state.kvlab


def _flags(body: dict[str, Any]) -> dict[str, bool | None]:
    """Every optional flag of the body (None when absent or null); 400 on a non-boolean."""
    out: dict[str, bool | None] = {}
    for name in FLAGS:
        value = body.get(name)
        if value is not None and not isinstance(value, bool):
            raise invalid_request(f"Field '{name}': expected a boolean, got {value!r}")
        out[name] = value
    return out


@router.post("/tokenize")
async def tokenize(request: Request) -> dict[str, Any]:
    """Text -> token ids: llama.cpp's ``{content}`` or vLLM's ``{prompt}`` (see the
    module's docstring for the answers)."""
    body = await read_json_body(request)
    flags = _flags(body)
    for name in ("content", "prompt"):
        if name in body and not isinstance(body[name], str):
            raise invalid_request(f"'{name}' must be a string")
    state = _state(request)
    tokenizer = state.slot.tokenizer
    if "content" in body:
        ids = tokenizer.encode(body["content"], add_special=bool(flags["add_special"]))
        if flags["with_pieces"]:
            return {"tokens": [{"id": i, "piece": tokenizer.decode([i])} for i in ids]}
        return {"tokens": ids}
    if "prompt" in body:
        add_special = flags["add_special_tokens"] is not False  # vLLM's default: true
        ids = tokenizer.encode(body["prompt"], add_special=add_special)
        strs = [tokenizer.decode([i]) for i in ids] if flags["return_token_strs"] else None
        return {"count": len(ids), "max_model_len": state.n_ctx, "tokens": ids,
                "token_strs": strs}
    raise invalid_request("give 'content' (llama.cpp's body) or 'prompt' (vLLM's), "
                          "a string")


@router.post("/detokenize")
async def detokenize(request: Request) -> dict[str, str]:
    """``{tokens:[ids]}`` -> ``{content, prompt}`` (llama.cpp's and vLLM's key)."""
    body = await read_json_body(request)
    tokens = body.get("tokens")
    tokenizer = _state(request).slot.tokenizer
    ids = [as_int(t) for t in tokens] if isinstance(tokens, list) else [None]
    if not all(t is not None and 0 <= t < tokenizer.vocab_size for t in ids):
        raise invalid_request(
            f"'tokens' must be an array of token ids in 0..{tokenizer.vocab_size - 1}")
    text = tokenizer.decode(ids)
    return {"content": text, "prompt": text}
