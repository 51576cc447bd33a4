from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlab.engine import EOS_ID, ByteTokenizer
from kvlab.errors import EngineError

tok = ByteTokenizer()


@given(st.text(max_size=40))
@settings(max_examples=60, deadline=None)
def test_round_trip(text: str) -> None:
    ids = tok.encode(text)
    assert ids == list(text.encode("utf-8"))
    assert tok.decode(ids) == text


@given(st.text(max_size=40))
@settings(max_examples=60, deadline=None)
def test_incremental_decoding_equals_whole_decoding(text: str) -> None:
    dec = tok.incremental_decoder()
    pieces = [dec.push(i) for i in tok.encode(text)]
    assert "".join(pieces) + dec.flush() == text


def test_multibyte_character_waits_for_its_last_byte() -> None:
    ids = tok.encode("é€")  # 2 bytes + 3 bytes
    dec = tok.incremental_decoder()
    assert [dec.push(i) for i in ids] == ["", "é", "", "", "€"]


def test_truncated_character_becomes_replacement() -> None:
    dec = tok.incremental_decoder()
    assert dec.push(tok.encode("€")[0]) == ""
    assert dec.flush() == "\ufffd"
    assert tok.decode(tok.encode("€")[:2]) == "\ufffd"


def test_eos_is_the_nul_byte_and_bad_ids_are_refused() -> None:
    assert EOS_ID == 0 and tok.decode([EOS_ID]) == "\x00"
    with pytest.raises(EngineError):
        tok.decode([256])
