"""Fuzzing kvlab's HTTP/1.1 response framing: random splits, chunk sizes and faults.

Each example is one answer written into a socket pair piece by piece and read back by
kvlab's own client within a timeout (:mod:`tests.bench.client.rawwire`). A valid answer must
give exactly its body; a bad length or chunk header a :class:`ProtocolError`; a cut
stream :class:`Disconnected`. Never a hang, never a wrong body.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlab.bench.client.rawhttp import Disconnected, ProtocolError
from tests.bench.client.rawwire import exchange

BAD_LENGTHS = ["-1", "x", "1e3", "0x10", "+5", "5_0", "", "5 5", "9" * 30]
BAD_SIZES = ["zz", "-5", "+5", "0x5", "5_0", "", "f" * 17, "g", "5 5"]


@st.composite
def answers(draw: st.DrawFn) -> tuple[bytes, bytes | None, type[Exception] | None]:
    """(wire bytes, the body a client must read or None, the error it must raise)."""
    body = draw(st.binary(max_size=200))
    framing = draw(st.sampled_from(["length", "chunked", "close", "no-content"]))
    fault = draw(st.sampled_from([None, None, "truncate", "bad-length", "bad-size",
                                  "no-crlf-after-data", "no-crlf-after-size"]))
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" if draw(st.booleans()) else b""
    head = [b"HTTP/1.1 200 OK", b"Content-Type: text/event-stream"]
    if framing == "no-content":
        wire = interim + b"HTTP/1.1 204 No Content\r\n\r\n"
        return wire, b"", None
    if framing == "length":
        length = str(len(body)).encode()
        if fault == "bad-length":
            length = draw(st.sampled_from(BAD_LENGTHS)).encode()
        head.append(b"Content-Length: " + length)
        payload = body
    elif framing == "chunked":
        head.append(b"Transfer-Encoding: chunked")
        cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=6)))
        chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True) if b > a]
        bad = draw(st.integers(0, max(0, len(chunks) - 1)))
        parts = []
        for i, chunk in enumerate(chunks):
            size = format(len(chunk), draw(st.sampled_from(["x", "X"]))).encode()
            if i == bad and fault == "bad-size":
                size = draw(st.sampled_from(BAD_SIZES)).encode()
            ext = b";ext=1" if draw(st.booleans()) else b""
            after_size = b"" if i == bad and fault == "no-crlf-after-size" else b"\r\n"
            after_data = b"XY" if i == bad and fault == "no-crlf-after-data" else b"\r\n"
            parts.append(size + ext + after_size + chunk + after_data)
        if not chunks and fault in ("bad-size", "no-crlf-after-size", "no-crlf-after-data"):
            parts.append(b"zz\r\n")  # a fault needs a chunk to sit in
        trailers = b"X-Trailer: 1\r\n" if draw(st.booleans()) else b""
        payload = b"".join(parts) + b"0\r\n" + trailers + b"\r\n"
    else:  # read to close: the body is whatever comes before EOF
        payload = body
    wire = interim + b"\r\n".join(head) + b"\r\n\r\n" + payload
    if fault == "truncate" and framing != "close":
        return wire[: draw(st.integers(0, len(wire) - 1))], None, Disconnected
    if fault == "bad-length" and framing == "length":
        return wire, None, ProtocolError
    if fault in ("bad-size", "no-crlf-after-data") and framing == "chunked":
        return wire, None, ProtocolError
    if fault == "no-crlf-after-size" and framing == "chunked":
        return wire, None, (ProtocolError, Disconnected)  # type: ignore[return-value]
    if fault == "truncate":  # read to close: a cut is the end
        cut = draw(st.integers(len(wire) - len(payload), len(wire)))
        return wire[:cut], wire[len(wire) - len(payload) : cut], None
    return wire, body, None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=answers(), data=st.data())
def test_framing_survives_splits_and_refuses_bad_bytes(answer, data) -> None:
    wire, body, error = answer
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=8)))
    pieces = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True) if b > a]
    try:
        answer_read = exchange(pieces)
    except TimeoutError:
        raise AssertionError(f"hung on {wire!r}") from None
    except (ProtocolError, Disconnected) as exc:
        assert error is not None and isinstance(exc, error), (exc, wire)
        return
    assert error is None, (f"no {error} for", wire, answer_read.body)
    assert answer_read.body == body
    assert answer_read.status in (200, 204)
