"""What the synthetic server writes: prompt counts, SSE events, closing answers.

:func:`prompt_token_count` is its stand-in tokenizer; the ``*_partial`` functions
format one content event (with ``%`` on prebuilt templates: ``json.dumps`` per event
would cost more than the client being measured); :func:`closing` builds the final
event(s) of a stream or the whole non-streamed answer, in llama.cpp's and OpenAI's
shapes (ids ``chatcmpl-`` for chat, ``cmpl-`` for text completions).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvlab.serve.synthetic import Schedule

MODEL_ID = "synthetic"
_WORD = re.compile(r"\w+|[^\w\s]")


def prompt_token_count(req: dict[str, Any]) -> int:
    """The synthetic "tokenizer": words and punctuation marks of the prompt (a chat
    is first laid out as ``"<role>: <content>\\n"`` per message, then ``"assistant: "``,
    like kvlab serve's template); a prompt of token ids counts its ids. At least 1."""
    prompt = req.get("prompt")
    if isinstance(prompt, list):
        return max(1, len(prompt))
    if not isinstance(prompt, str):
        given = req.get("messages")
        messages: list[Any] = given if isinstance(given, list) else []
        prompt = "".join(f"{m.get('role')}: {m.get('content')}\n" for m in messages
                         if isinstance(m, dict)) + "assistant: "
    return max(1, len(_WORD.findall(prompt)))


_TOKEN_TEXT = " a"


def llama_partial(first_token: int, n: int, predicted: int, prompt: int) -> bytes:
    ids = ",".join(str(1000 + first_token + i) for i in range(n))
    return (
        b'data: {"index":0,"content":"%s","tokens":[%s],"stop":false,"id_slot":0,'
        b'"tokens_predicted":%d,"tokens_evaluated":%d}\n\n'
        % ((_TOKEN_TEXT * n).encode(), ids.encode(), predicted, prompt)
    )


def chat_partial(rid: bytes, created: int, n: int) -> bytes:
    return (
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"%s"}}],'
        b'"created":%d,"id":"%s","model":"synthetic","system_fingerprint":"synthetic",'
        b'"object":"chat.completion.chunk"}\n\n' % ((_TOKEN_TEXT * n).encode(), created, rid)
    )


def text_partial(rid: bytes, created: int, n: int) -> bytes:
    return (
        b'data: {"choices":[{"finish_reason":null,"index":0,"text":"%s"}],"created":%d,'
        b'"id":"%s","model":"synthetic","object":"text_completion"}\n\n'
        % ((_TOKEN_TEXT * n).encode(), created, rid)
    )


def sse_event(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _timings(sched: Schedule, t_recv: int, sends: list[int]) -> dict[str, Any]:
    """llama.cpp-shaped timings from the actual send times."""
    prompt_ms = (sends[0] - t_recv) / 1e6 if sends else 0.0
    predicted_ms = (sends[-1] - sends[0]) / 1e6 if sends else 0.0
    n = sched.tokens
    return {
        "cache_n": 0,
        "prompt_n": sched.prompt_tokens,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / sched.prompt_tokens,
        "prompt_per_second": 1000 * sched.prompt_tokens / prompt_ms if prompt_ms else 0.0,
        "predicted_n": n,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": predicted_ms / (n - 1) if n > 1 else 0.0,
        "predicted_per_second": 1000 * (n - 1) / predicted_ms if predicted_ms else 0.0,
    }


def closing(api: str, req: dict[str, Any], sched: Schedule, t_recv: int, sends: list[int],
            ridb: bytes, created: int, echo: bool) -> Any:
    """The closing event(s) of a stream, or the whole non-streamed answer."""
    n, p = sched.tokens, sched.prompt_tokens
    timings = _timings(sched, t_recv, sends)
    text = _TOKEN_TEXT * n
    usage = {"completion_tokens": n, "prompt_tokens": p, "total_tokens": n + p,
             "prompt_tokens_details": {"cached_tokens": 0}}
    stream = bool(req.get("stream"))
    if api == "llama":
        final: dict[str, Any] = {
            "index": 0, "content": "" if stream else text, "tokens": [], "id_slot": 0,
            "stop": True, "model": MODEL_ID, "tokens_predicted": n, "tokens_evaluated": p,
            "generation_settings": {"n_predict": n, "stream": stream},
            "prompt": "", "has_new_line": False, "truncated": False,
            "stop_type": "limit", "stopping_word": "", "tokens_cached": p + n,
            "timings": timings}
        if echo:
            final["synthetic_send_ns"] = sends
        return [sse_event(final)] if stream else final
    base = {"created": created, "id": ridb.decode(), "model": MODEL_ID,
            "system_fingerprint": "synthetic"}
    if not stream:
        choice: dict[str, Any] = {"finish_reason": "length", "index": 0}
        if api == "chat":
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        obj = "chat.completion" if api == "chat" else "text_completion"
        return {**base, "object": obj, "choices": [choice], "usage": usage,
                "timings": timings}
    # Both routes as OpenAI (and kvlab serve): a finish chunk, then with include_usage
    # a usage chunk whose choices are empty (the only one vLLM's client reads usage from).
    include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
    obj = "chat.completion.chunk" if api == "chat" else "text_completion"
    choice = {"finish_reason": "length", "index": 0,
              **({"delta": {}} if api == "chat" else {"text": ""})}
    last: dict[str, Any] = {**base, "object": obj, "choices": [choice]}
    out = [last]
    if include_usage:
        last = {**base, "object": obj, "choices": [], "usage": usage}
        out.append(last)
    last["timings"] = timings
    if echo:
        last["synthetic_send_ns"] = sends
    return [sse_event(o) for o in out] + [b"data: [DONE]\n\n"]
