"""OpenAI Responses and Anthropic Messages against the real llama-server (one shared
server, the bundled Gemma 3 270M): what its routes count, what they drop, and how each
row is judged.

llama-server converts both to its chat route. A Responses body passes every field
through, so kvlab's protocol fields hold there; its Messages conversion keeps only
Anthropic's own fields, so ``cache_prompt: false`` is dropped and the slot's cached
prefix is reused and reported as ``cache_read_input_tokens``: the row is refused as
prefix reuse, the real defect named. It stores no responses: a session that continues
by ``previous_response_id`` is refused at its second turn with llama-server's words.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import httpx
import pytest

from kvlab.analysis.validate import Reason, check_row
from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.plan.sessions.runner import SessionGraph, SessionRun, run_session
from kvlab.bench.plan.sizing import api_counter
from kvlab.rundir import ApiKind, Outcome, Record, RunClock
from kvlab.rundir.session_turn import SessionTurn
from kvlab.servers.llamacpp import LlamaCppSettings, LlamaServer
from tests.conftest import llama_server_missing

pytestmark = [pytest.mark.llamacpp]
FORCED = {"temperature": 0, "seed": 42, "ignore_eos": True, "cache_prompt": False}
PROMPT = "Explain in one sentence what a KV cache stores."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    reason = llama_server_missing()
    if reason:
        pytest.skip(reason)
    server = LlamaCppSettings(threads=1).build(1024)
    server.start(tmp_path_factory.mktemp("llama") / "server.log", 120)
    try:
        yield server
    finally:
        server.stop()


def endpoint(server: LlamaServer, api: ApiKind) -> Endpoint:
    return Endpoint(server.base_url, api, model=server.settings.model_name())


def send(server: LlamaServer, api: ApiKind, stream: bool = True, prompt: str = PROMPT,
         **params: object) -> Record:
    spec = RequestSpec(prompt=prompt, max_tokens=16, stream=stream,
                       params={**FORCED, **params}, mode=str(api), capacity=1024,
                       query_id="q")

    async def go() -> Record:
        async with HarnessClient() as client:
            return await client.send(endpoint(server, api), spec, RunClock())

    return asyncio.run(go())


@pytest.mark.parametrize("stream", [True, False])
def test_responses_rows_are_valid_and_count_chats_prompt(server: LlamaServer,
                                                         stream: bool) -> None:
    chat = send(server, ApiKind.OPENAI_CHAT, stream)
    record = send(server, ApiKind.OPENAI_RESPONSES, stream)
    assert record.outcome is Outcome.OK, record.error
    assert (record.output_tokens, record.cached_tokens) == (16, 0)  # forced, not reused
    assert record.prompt_tokens == chat.prompt_tokens  # the same chat template
    assert record.response_id and record.response_id.startswith("resp_")
    assert record.usage_reasoning_tokens is None  # llama-server leaves the details out
    assert record.timings is not None or not stream  # its timings on the last event
    assert check_row(record) == []


def test_messages_drop_cache_prompt_and_the_reuse_is_refused(server: LlamaServer) -> None:
    send(server, ApiKind.OPENAI_CHAT)  # the slot now holds this prompt
    record = send(server, ApiKind.ANTHROPIC_MESSAGES)
    assert record.outcome is Outcome.OK and record.output_tokens == 16
    assert record.cached_tokens and record.cached_tokens > 0  # cache_read_input_tokens
    assert record.prompt_tokens == send(server, ApiKind.OPENAI_CHAT).prompt_tokens
    (violation,) = check_row(record)
    assert violation.reason is Reason.PREFIX_REUSE
    assert f"{record.cached_tokens} of {record.prompt_tokens}" in violation.detail


def test_messages_count_tokens_counts_the_prompt_as_the_api_holds_it(server: LlamaServer
                                                                     ) -> None:
    """Prompt sizing's ``api-count`` (used where a server has no /tokenize)."""
    async def count() -> tuple[str | None, int, int]:
        async with httpx.AsyncClient() as client:
            counter = await api_counter(client, endpoint(server, ApiKind.ANTHROPIC_MESSAGES))
            assert counter is not None
            return counter.sizing.method, await counter(PROMPT), await counter("hi")
    method, counted, short = asyncio.run(count())
    assert method == "api-count"
    assert counted == send(server, ApiKind.OPENAI_CHAT).prompt_tokens  # template included
    assert 0 < short < counted


def _session(server: LlamaServer, api: ApiKind, server_history: bool,
             reuse: bool = False) -> list[Record]:
    """One 3-turn session, sent as a sessions load sends it (``reuse``: with
    cache_prompt true, as sessions-chat.toml measures)."""
    turns = tuple(SessionTurn("s0", i, messages=(("user", f"Question {i}: {PROMPT}"),))
                  for i in (1, 2, 3))
    params = {**FORCED, "cache_prompt": reuse}
    specs = {t.query_id: RequestSpec(prompt="", max_tokens=8, params=params,
                                     mode=str(api), capacity=1024, query_id=t.query_id,
                                     server_history=server_history)
             for t in turns}
    landed: list[Record] = []

    async def go() -> None:
        async with HarnessClient() as client:
            clock = RunClock()

            async def one(spec: RequestSpec) -> Record:
                return await client.send(endpoint(server, api), spec, clock)

            await run_session(SessionRun(SessionGraph("s0", turns), 0, specs), one, clock,
                              landed.append, "sessions=1", clock.now())

    asyncio.run(go())
    return landed


@pytest.mark.parametrize("api", [ApiKind.OPENAI_RESPONSES, ApiKind.ANTHROPIC_MESSAGES])
def test_a_session_resends_its_history_as_the_apis_messages(server: LlamaServer,
                                                            api: ApiKind) -> None:
    """Reuse allowed: Messages' conversion drops cache_prompt, so under false its first
    turn would already be refused (and end the session)."""
    records = _session(server, api, server_history=False, reuse=True)
    assert [r.turn for r in records] == [1, 2, 3]
    assert all(r.outcome is Outcome.OK and r.output_tokens == 8 for r in records)
    growth = [b.prompt_tokens - a.prompt_tokens  # type: ignore[operator]
              for a, b in itertools.pairwise(records)]
    assert all(g > 8 for g in growth)  # the answer and the new question, each turn
    assert all(check_row(r) == [] for r in records)
    assert records[-1].cached_tokens  # the history came from the slot's cache


def test_a_session_kept_by_the_server_is_refused_with_its_error(server: LlamaServer
                                                                ) -> None:
    first, second = _session(server, ApiKind.OPENAI_RESPONSES, server_history=True)
    assert first.outcome is Outcome.OK and first.response_id
    assert second.previous_response_id == first.response_id
    assert second.body["input"] == [{"type": "message", "role": "user",
                                      "content": f"Question 2: {PROMPT}"}]
    assert second.http_status == 400
    assert "llama.cpp does not support 'previous_response_id'" in (second.error or "")
    (violation,) = check_row(second)
    assert violation.reason is Reason.FAILED and "previous_response_id" in violation.detail

