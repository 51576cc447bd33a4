"""/v1/embeddings against the real llama-server (``--embeddings --pooling mean``, one
shared server), through kvlab's client, and against kvlab's own engine.

llama-server declares its width in ``/v1/models`` (``meta.n_embd``), which is what each
vector is held to. Its mean-pooled vectors are kvlab serve's: the same GGUF, the same
tokens (BOS included), the final norm, the mean, unit length; they differ by llama.cpp's
arithmetic (its matrix products quantize activations to 8 bits), so the cosine between
them is held near 1, not to float rounding.
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
from kvlab.servers.llamacpp import LlamaCppSettings, LlamaServer
from tests.conftest import llama_server_missing

pytestmark = [pytest.mark.llamacpp]
TEXTS = ("Explain in one sentence what a KV cache stores.",
         "The key and value cache keeps what attention has already read. " * 6, "hi")
# Observed: 0.9972 at worst (the 2-token "hi"), 0.9995 for sentences. The floor leaves
# room for another CPU's kernels in llama.cpp's 8-bit products.
COSINE_FLOOR = 0.99


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    reason = llama_server_missing()
    if reason:
        pytest.skip(reason)
    server = LlamaCppSettings(threads=1, slots=2, pooling="mean").build(512)
    server.start(tmp_path_factory.mktemp("llama-embed") / "server.log", 120)
    try:
        yield server
    finally:
        server.stop()


def embed(server: LlamaServer, inputs: tuple[str, ...], width: int | None) -> Record:
    endpoint = Endpoint(server.base_url, ApiKind.OPENAI_EMBEDDINGS,
                        model=server.settings.model_name())
    spec = RequestSpec(prompt=inputs[0], max_tokens=0, stream=False, inputs=inputs,
                       dimension_expected=width, mode="llama", capacity=512, query_id="q")

    async def go() -> Record:
        async with HarnessClient() as client:
            return await client.send(endpoint, spec, RunClock())

    return asyncio.run(go())


def test_a_batch_is_one_vector_per_input_of_the_declared_width(server: LlamaServer) -> None:
    endpoint = Endpoint(server.base_url, ApiKind.OPENAI_EMBEDDINGS, model="m")
    width = declared_width(endpoint)
    assert width == 640  # Gemma 3 270M's hidden size
    record = embed(server, TEXTS, width)
    assert record.outcome is Outcome.OK, record.error
    assert (record.inputs, record.vectors, record.dimensions, record.non_finite) == (
        3, 3, [640], 0)
    assert record.requested_tokens == 0 and record.output_tokens is None
    assert check_row(record) == []
    wrong = embed(server, TEXTS, 384)  # had the server declared another width
    assert [v.detail.split(",")[0] for v in check_row(wrong)] == [
        "vectors of 640 values"]


def test_its_vectors_are_kvlab_engines_mean_pooled_states(
        server: LlamaServer, gemma_model: Gemma3, gemma_tokenizer: GGUFTokenizer) -> None:
    import numpy as np

    answer = httpx.post(f"{server.base_url}/v1/embeddings", timeout=120,
                        json={"input": list(TEXTS)}).json()
    batch = [gemma_tokenizer.encode(text) for text in TEXTS]
    assert answer["usage"]["prompt_tokens"] == sum(len(ids) for ids in batch)  # BOS too
    ours = pooled(gemma_model, batch, 640)
    for theirs, mine in zip(answer["data"], ours, strict=True):
        a, b = np.array(theirs["embedding"]), np.array(mine)
        assert float(a @ b) / float(np.linalg.norm(a) * np.linalg.norm(b)) > COSINE_FLOOR
