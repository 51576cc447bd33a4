"""``POST /v1/embeddings``: the served model's mean-pooled, normalized hidden states.

An embedding of a text is what llama-server's ``--embeddings --pooling mean`` gives for
the same model: the text tokenized with BOS, run through every layer, the final norm
applied to each position's hidden state, the mean over the positions, scaled to unit
length (llama.cpp's default ``embd_normalize`` 2). A batch is one forward pass: the
inputs right-padded to the longest, which changes nothing of the real positions since
attention is causal (a position reads only those before it). The language-model head
is computed for one position only, so an embedding costs the layers alone.

The work runs on a thread of its own (never the event loop); the weights are only
read, so it may overlap a generation on the slot's thread, sharing the CPU.
``input`` is a string, an array of strings, or token ids (an array of ids, or of id
arrays), as OpenAI's API takes it; ``encoding_format`` must be ``float`` (base64 is
refused: say so rather than answer in a shape the client did not ask), and
``dimensions`` cuts each vector to its first N values, renormalized (OpenAI's rule for
its matryoshka models; N above the width is a 400).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import APIRouter, Request

from kvlab.api.openai_embeddings import vectors_answer
from kvlab.serve.api_errors import invalid_request
from kvlab.serve.body import read_json_body
from kvlab.serve.params import as_int
from kvlab.serve.state import ServerState

router = APIRouter()
MAX_INPUTS = 2048  # texts in one request, as OpenAI's API allows
_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kvlab-embed")


def _inputs(body: dict[str, Any]) -> list[Any]:
    """The request's inputs, each a string or a list of token ids (400 if not)."""
    given = body.get("input")
    if isinstance(given, str) or (isinstance(given, list) and given
                                  and all(as_int(t) is not None for t in given)):
        return [given]
    if not isinstance(given, list) or not given:
        raise invalid_request("'input' is required: a string or a non-empty array")
    if len(given) > MAX_INPUTS:
        raise invalid_request(f"'input' holds {len(given)} inputs, over {MAX_INPUTS}")
    return given


def _dimensions(body: dict[str, Any], width: int) -> int:
    value = body.get("dimensions")
    if value is None:
        return width
    n = as_int(value)
    if n is None or not 1 <= n <= width:
        raise invalid_request(f"Field 'dimensions': must be an integer in 1..{width}, got "
                              f"{value!r}")
    return n


def pooled(model: Any, batch: list[list[int]], width: int) -> list[list[float]]:
    """Unit-length mean-pooled final hidden states of each token list (its first
    ``width`` values, renormalized)."""
    import torch

    lengths = [len(ids) for ids in batch]
    ids = torch.zeros((len(batch), max(lengths)), dtype=torch.long)  # (B, T) right-padded
    for i, row in enumerate(batch):
        ids[i, :len(row)] = torch.tensor(row)
    seen: list[torch.Tensor] = []
    hook = model.blocks[-1].register_forward_hook(lambda _m, _i, out: seen.append(out))
    try:
        with torch.inference_mode():
            model(ids, logits_at=torch.zeros(1, dtype=torch.long))  # the head: 1 position
            hidden = model.norm(seen[0]).float()  # (B, T, C)
    finally:
        hook.remove()
    mask = torch.zeros(hidden.shape[:2])  # (B, T): 1 on each row's real positions
    for i, n in enumerate(lengths):
        mask[i, :n] = 1.0
    mean = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)  # (B, C)
    cut = mean[:, :width]  # (B, width)
    return torch.nn.functional.normalize(cut, dim=-1).tolist()


@router.post("/v1/embeddings")
async def embeddings(request: Request) -> dict[str, Any]:
    """One vector per input (see the module's docstring)."""
    state: ServerState = request.app.state.kvlab
    body = await read_json_body(request)
    if body.get("encoding_format", "float") != "float":
        raise invalid_request("Field 'encoding_format': only \"float\" is served")
    batch = [state.prompt_ids(text, "input") for text in _inputs(body)]
    width = _dimensions(body, state.source.config.d_model)
    model = state.slot.model
    vectors = await asyncio.get_running_loop().run_in_executor(
        _WORKER, pooled, model, batch, width)
    return vectors_answer(state.model_id, vectors, sum(len(b) for b in batch))
