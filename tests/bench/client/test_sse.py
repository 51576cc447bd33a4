"""SSEParser: split reads, CRLF, comments, multi-line data, end of body."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kvlab.bench.client.sse import SSEParser

STREAM = (
    b": ping\n\n"
    b'data: {"a": 1}\n\n'
    b"event: message\nid: 7\ndata: line1\ndata: line2\n\n"
    b'event: message_stop\ndata: {"type": "message_stop"}\n\n'  # Anthropic's, Responses'
    b"event: x\ndata: one\ndata: two\n\n"  # an event line before multi-line data
    b"data:nospace\n\n"
    b"data\n\n"  # a field name alone: empty data
    b"data: [DONE]\n\n"
)
EXPECTED = [b'{"a": 1}', b"line1\nline2", b'{"type": "message_stop"}', b"one\ntwo",
            b"nospace", b"", b"[DONE]"]


def parse_all(pieces: list[bytes]) -> list[bytes]:
    parser = SSEParser()
    out: list[bytes] = []
    for piece in pieces:
        out.extend(parser.feed(piece))
    out.extend(parser.close())
    return out


def test_whole_stream():
    assert parse_all([STREAM]) == EXPECTED


def test_one_byte_reads():
    assert parse_all([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


def test_crlf_and_cr_even_split_between_cr_and_lf():
    crlf = STREAM.replace(b"\n", b"\r\n")
    assert parse_all([crlf]) == EXPECTED
    assert parse_all([crlf[i : i + 1] for i in range(len(crlf))]) == EXPECTED
    assert parse_all([STREAM.replace(b"\n", b"\r")]) == EXPECTED


@given(
    st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12),
    st.sampled_from([b"\n", b"\r\n", b"\r"]),
)
def test_any_split_gives_the_same_events(cuts, newline):
    data = STREAM.replace(b"\n", newline)
    cuts = sorted({min(c, len(data)) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    assert parse_all(pieces) == EXPECTED


def test_comments_only_give_nothing():
    parser = SSEParser()
    assert parser.feed(b":\n\n:\n\n: keep-alive\n\n") == []


def test_event_held_until_blank_line():
    parser = SSEParser()
    assert parser.feed(b'data: {"x"') == []
    assert parser.feed(b": 2}\n") == []
    assert parser.feed(b"\n") == [b'{"x": 2}']


def test_close_is_lenient_for_complete_lines_only():
    parser = SSEParser()
    parser.feed(b"data: last\n")
    assert parser.close() == [b"last"] and not parser.cut_mid_line
    parser = SSEParser()
    parser.feed(b'data: {"cut')
    assert parser.close() == [] and parser.cut_mid_line
