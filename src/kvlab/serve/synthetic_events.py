"""What the synthetic server states: its prompt counts, its text and how it finished.

:func:`prompt_token_count` is its stand-in tokenizer; :func:`token_text` the text of
``n`` tokens; :func:`finish_of` how an answer ended, which the API's dialect
(:mod:`kvlab.api`) writes as its closing events or whole answer. Token events are the
dialect's too (byte templates: ``json.dumps`` per event would cost more than the
client being measured).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kvlab.api.dialect import Finish

if TYPE_CHECKING:
    from kvlab.serve.synthetic import Schedule

_WORD = re.compile(r"\w+|[^\w\s]")


def prompt_token_count(req: dict[str, Any], field: str = "prompt") -> int:
    """The synthetic "tokenizer": words and punctuation marks of the prompt in ``field``
    (a chat is first laid out as ``"<role>: <content>\\n"`` per message, then
    ``"assistant: "``, like kvlab serve's template); a prompt of token ids counts its
    ids. At least 1."""
    prompt = req.get(field)
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
        return max(1, len(prompt))
    if not isinstance(prompt, str):
        given = req.get("messages")
        messages: list[Any] = given if isinstance(given, list) else []
        prompt = "".join(f"{m.get('role')}: {m.get('content')}\n" for m in messages
                         if isinstance(m, dict)) + "assistant: "
    return max(1, len(_WORD.findall(prompt)))


MODEL_ID = "synthetic"
_TOKEN_TEXT = " a"


def token_text(n: int) -> str:
    """The text of ``n`` synthetic tokens."""
    return _TOKEN_TEXT * n


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


def finish_of(sched: Schedule, t_recv: int, sends: list[int], stream: bool) -> Finish:
    """How a synthetic answer ended: every token of the schedule, at its limit."""
    n, p = sched.tokens, sched.prompt_tokens
    return Finish(text=token_text(n), tail="", n_output=n, stop_type="limit",
                  truncated=False, cached=0, timings=_timings(sched, t_recv, sends),
                  settings={"n_predict": n, "stream": stream}, tokens_cached=p + n)
