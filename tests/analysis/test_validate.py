"""Each refusal, on hand-built rows and on rows a fault-injecting server produced."""

from __future__ import annotations

import asyncio

import pytest

from kvlab.analysis.validate import Reason, check_pairs, check_row, check_rows
from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.rundir import ApiKind, Outcome, RunClock
from tests.fakeserver import FakeServer
from tests.rows import row


def reasons(r) -> list[Reason]:
    return [v.reason for v in check_row(r)]


def test_a_valid_row_passes() -> None:
    assert check_row(row()) == []


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"output_tokens": 63}, Reason.OUTPUT_TOKENS),
        ({"truncated": True}, Reason.TRUNCATED),
        ({"t_end": 0}, Reason.DURATION),
        ({"saw_terminator": False}, Reason.NO_TERMINATOR),
        ({"saw_usage": False}, Reason.NO_USAGE),
        ({"outcome": Outcome.TIMEOUT, "error": "120 s"}, Reason.FAILED),
    ],
)
def test_each_refusal_is_named(overrides, reason) -> None:
    r = row(query_id="q07", repetition=2, mode="m", capacity=1024, **overrides)
    found = check_row(r)
    assert [v.reason for v in found] == [reason]
    v = found[0]
    assert (v.mode, v.capacity, v.query_id, v.repetition) == ("m", 1024, "q07", 2)
    assert "q07" in str(v) and str(reason) in str(v)


def test_usage_not_applicable_is_not_refused() -> None:
    assert check_row(row(saw_usage=None)) == []


def test_warmups_are_not_validated() -> None:
    assert check_rows([row(warmup=True, output_tokens=1), row(query_id="q02")]) == []


def test_pairs_must_share_prompt_and_prompt_tokens() -> None:
    a = [row(mode="a"), row(mode="a", query_id="q02"), row(mode="a", query_id="q03")]
    b = [
        row(mode="b"),
        row(mode="b", query_id="q02", prompt_sha256="t" * 64),
        row(mode="b", query_id="q03", prompt_tokens=251),
        row(mode="b", query_id="q04"),
    ]
    found = {v.query_id: v for v in check_pairs("a", a, "b", b)}
    assert "q01" not in found
    assert found["q02"].reason is Reason.PROMPT_DIFFERS
    assert found["q03"].reason is Reason.PROMPT_TOKENS_DIFFER
    assert found["q04"].reason is Reason.MISSING_PAIR
    assert found["q02"].other_mode == "b"


@pytest.fixture(scope="module")
def fake():
    with FakeServer() as server:
        yield server


@pytest.mark.parametrize(
    ("api", "fault", "reason"),
    [
        (ApiKind.LLAMACPP_COMPLETION, "wrong_tokens", Reason.OUTPUT_TOKENS),
        (ApiKind.LLAMACPP_COMPLETION, "truncated", Reason.TRUNCATED),
        (ApiKind.OPENAI_CHAT, "no_usage", Reason.NO_USAGE),
        (ApiKind.OPENAI_CHAT, "cut", Reason.STREAM_CUT),
        (ApiKind.LLAMACPP_COMPLETION, "no_done", Reason.STREAM_CUT),
        (ApiKind.OPENAI_CHAT, "malformed", Reason.MALFORMED),
    ],
)
def test_real_faulty_rows_are_refused(fake, api, fault, reason) -> None:
    endpoint = Endpoint(fake.base_url, api, model="fake-model", timeout_s=10)
    spec = RequestSpec(prompt="hello", max_tokens=8, params={"fake_fault": fault},
                       mode="m", capacity=128, query_id="q01")

    async def send():
        async with HarnessClient() as client:
            return await client.send(endpoint, spec, RunClock())

    record = asyncio.run(send())
    assert reason in reasons(record), (record.outcome, record.error)
    ok = asyncio.run(_ok(endpoint))
    assert check_row(ok) == []


async def _ok(endpoint):
    spec = RequestSpec(prompt="hello", max_tokens=8, mode="m", capacity=128, query_id="q02")
    async with HarnessClient() as client:
        return await client.send(endpoint, spec, RunClock())



@pytest.mark.parametrize("body", [{"cache_prompt": False}, {}])
def test_cached_prompt_tokens_without_reuse_asked_are_refused(body) -> None:
    """vLLM's prefix cache answered 896 of 969 prompt tokens: refused and named, whether
    the body said cache_prompt false or nothing (reuse must be asked for)."""
    found = check_row(row(body=body, prompt_tokens=969, cached_tokens=896, query_id="q03"))
    assert [v.reason for v in found] == [Reason.PREFIX_REUSE]
    assert "896 of 969 prompt tokens" in found[0].detail
    assert "q03" in str(found[0]) and "prefix_reuse" in str(found[0])


@pytest.mark.parametrize(("body", "cached"), [({"cache_prompt": True}, 896),
                                              ({"cache_prompt": False}, 0),
                                              ({"cache_prompt": False}, None)])
def test_asked_reuse_and_zero_or_unknown_cached_tokens_pass(body, cached) -> None:
    assert check_row(row(body=body, cached_tokens=cached)) == []
