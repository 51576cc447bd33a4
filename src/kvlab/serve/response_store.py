"""The conversations kvlab serve keeps for OpenAI Responses' ``previous_response_id``.

A Responses request may name an earlier answer instead of resending the conversation:
the server then prepends what it stored (that request's messages and its answer) to
the new input. kvlab serve stores every Responses answer unless the request says
``store: false`` (OpenAI's default is to store), the newest :data:`KEEP` of them; a
name it does not hold is a 400 that says so.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from kvlab.api.dialect import Message
from kvlab.serve.api_errors import invalid_request

KEEP = 4096  # stored conversations, the oldest dropped first


class ResponseStore:
    """Conversations by response id, bounded, safe across threads."""

    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._by_id: OrderedDict[str, tuple[Message, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, response_id: str, messages: list[Message], answer: str) -> None:
        """Keep the conversation ending with ``answer``, under ``response_id``."""
        with self._lock:
            self._by_id[response_id] = (*messages, {"role": "assistant", "content": answer})
            while len(self._by_id) > self._keep:
                self._by_id.popitem(last=False)

    def conversation(self, response_id: str) -> list[Message]:
        """The stored conversation of ``response_id`` (400 if none is stored)."""
        with self._lock:
            found = self._by_id.get(response_id)
        if found is None:
            raise invalid_request(f"'previous_response_id': no stored response "
                                  f"{response_id!r} (stored only with store true, the "
                                  f"newest {self._keep})")
        return [dict(m) for m in found]
