"""The bytes of a stream: one event written, one payload read, one JSON string."""

from __future__ import annotations

import json

import pytest

from kvlab.api.wire import event, json_str, loads


@pytest.mark.parametrize("payload", [b'{"a":[1,2.5,"\\u00e9"]}', b' {"a":1} ', b"[1]",
                                     b'"x"', '{"é":1}'.encode()])
def test_loads_reads_what_json_loads_reads(payload: bytes) -> None:
    assert loads(payload) == json.loads(payload)


@pytest.mark.parametrize("payload", [b'{"a":1} x', b"{", b"", b"\xff"])
def test_loads_refuses_what_json_loads_refuses(payload: bytes) -> None:
    with pytest.raises(ValueError):
        loads(payload)


def test_an_event_and_a_string_are_json_dumps_compact() -> None:
    obj = {"content": 'a "b" \u00e9\n', "n": [1, None]}
    assert event(obj) == b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
    assert json_str('a "b" \u00e9\n').decode() == json.dumps('a "b" \u00e9\n')
