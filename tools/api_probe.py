"""Ask a real server what it returns on each API kvlab speaks: the facts behind the
tables of docs/apis/.

Launches one server kind as kvlab launches it (llamacpp, vllm or embedded, the bundled
Gemma 3 270M, one thread), then, with kvlab's own client and protocol fields
(``ignore_eos``, ``cache_prompt: false``, temperature 0, seed 42):

- per generating API (chat, Responses, Messages), streamed and whole: the outcome, the
  output tokens against the 16 asked, the prompt tokens against chat's for the same
  prompt, the cached tokens, the usage keys the final event carried, and validation's
  verdict;
- the same ~300-token prompt sent twice per API: the cached tokens of the second (the
  prefix-reuse check under ``cache_prompt: false``);
- Messages' ``/v1/messages/count_tokens`` beside the usage of the same prompt;
- Responses' ``previous_response_id`` after a stored answer: the server's answer;
- with ``--pooling mean``: ``/v1/embeddings`` of a batch of 3 (vectors, lengths, the
  width ``/v1/models`` declares, the usage's prompt tokens, non-finite values).

Prints one JSON object per check; ``--json FILE`` writes them all.

    python tools/api_probe.py --server llamacpp --json docs/apis/probes/llamacpp.json
    python tools/api_probe.py --server vllm --pooling mean
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import httpx

from kvlab.analysis.validate import check_row
from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.client.models import declared_width
from kvlab.bench.client.sse import SSEParser
from kvlab.rundir import ApiKind, Record, RunClock
from kvlab.servers.base import ServerSettings
from kvlab.servers.embedded import EmbeddedSettings
from kvlab.servers.llamacpp import LlamaCppSettings
from kvlab.servers.vllm import VllmSettings

FORCED = {"temperature": 0, "seed": 42, "ignore_eos": True, "cache_prompt": False}
ASKED = 16
PROMPT = "Explain in one sentence what a KV cache stores."
LONG = "The key and value cache keeps what attention has already read. " * 24
GENERATING = (ApiKind.OPENAI_CHAT, ApiKind.OPENAI_RESPONSES, ApiKind.ANTHROPIC_MESSAGES)


def settings_of(kind: str, pooling: str | None, store: bool) -> ServerSettings:
    """The server kind's settings as the experiment files give them."""
    if kind == "llamacpp":
        return LlamaCppSettings(threads=1, pooling=pooling)  # type: ignore[arg-type]
    if kind == "vllm":
        return VllmSettings(threads=1, enforce_eager=True, kv_cache_space_gib=1,
                            pooling=pooling, store_responses=store)  # type: ignore[arg-type]
    return EmbeddedSettings(model="gemma-3-270m", dtype="int8", threads=1)


async def send(endpoint: Endpoint, prompt: str, stream: bool, max_tokens: int = ASKED,
               **extra: Any) -> Record:
    spec = RequestSpec(prompt=prompt, max_tokens=max_tokens, stream=stream,
                       params={**FORCED, **extra.pop("params", {})}, mode="probe",
                       capacity=1024, query_id="q", **extra)
    async with HarnessClient() as client:
        return await client.send(endpoint, spec, RunClock())


def usage_keys(endpoint: Endpoint, api: ApiKind) -> list[str]:
    """The keys of the usage the last event of a raw stream carried (nested keys as
    ``a.b``)."""
    dialect = endpoint.dialect
    body = {**dialect.body(PROMPT, 4, True, endpoint.model), **FORCED}
    raw = httpx.post(endpoint.url(dialect.path), json=body, timeout=120,
                     headers=dialect.headers(None)).content
    events = [json.loads(e) for e in SSEParser().feed(raw + b"\n\n")
              if e.strip() and e != b"[DONE]"]
    found: dict[str, Any] = {}
    for event in events:
        usage = event.get("usage") or (event.get("response") or {}).get("usage") \
            or (event.get("message") or {}).get("usage")
        if isinstance(usage, dict):
            found.update(usage)
    return sorted(_flat(found))


def _flat(usage: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in usage.items():
        if isinstance(value, dict):
            out += _flat(value, f"{prefix}{key}.")
        else:
            out.append(prefix + key)
    return out


def row(record: Record) -> dict[str, Any]:
    """What a record says, in the docs' words."""
    return {"outcome": str(record.outcome), "output_tokens": record.output_tokens,
            "asked": record.requested_tokens, "prompt_tokens": record.prompt_tokens,
            "cached_tokens": record.cached_tokens, "saw_usage": record.saw_usage,
            "stop_type": record.stop_type, "error": record.error,
            "refused": [f"{v.reason}: {v.detail}" for v in check_row(record)]}


async def probe_generation(base_url: str, model: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    chat_prompt: int | None = None
    for api in GENERATING:
        endpoint = Endpoint(base_url, api, model=model)
        for stream in (True, False):
            record = await send(endpoint, PROMPT, stream)
            if api is ApiKind.OPENAI_CHAT and stream:
                chat_prompt = record.prompt_tokens
            out.append({"check": "generate", "api": str(api), "stream": stream,
                        "chat_prompt_tokens": chat_prompt, **row(record)})
        out.append({"check": "usage keys", "api": str(api),
                    "keys": usage_keys(endpoint, api)})
        twice = [await send(endpoint, LONG, True, max_tokens=2) for _ in range(2)]
        out.append({"check": "same long prompt twice", "api": str(api),
                    "first": row(twice[0]), "second": row(twice[1])})
    messages = Endpoint(base_url, ApiKind.ANTHROPIC_MESSAGES, model=model)
    counted = httpx.post(messages.url("/v1/messages/count_tokens"), timeout=60,
                         json=messages.dialect.count_body(PROMPT, model))
    out.append({"check": "count_tokens", "status": counted.status_code,
                "answer": counted.text[:300], "chat_prompt_tokens": chat_prompt})
    responses = Endpoint(base_url, ApiKind.OPENAI_RESPONSES, model=model)
    first = await send(responses, PROMPT, False, params={"store": True})
    second = await send(responses, "And in French?", True, previous_response_id=first.response_id,
                        messages=({"role": "user", "content": "And in French?"},))
    out.append({"check": "previous_response_id", "first_id": first.response_id,
                "second": row(second)})
    return out


async def probe_embeddings(base_url: str, model: str) -> list[dict[str, Any]]:
    endpoint = Endpoint(base_url, ApiKind.OPENAI_EMBEDDINGS, model=model)
    width = await asyncio.to_thread(declared_width, endpoint)
    record = await send(endpoint, PROMPT, False, max_tokens=0,
                        inputs=(PROMPT, LONG, "hi"), dimension_expected=width)
    return [{"check": "embeddings", "declared_width": width, "vectors": record.vectors,
             "inputs": record.inputs, "dimensions": record.dimensions,
             "non_finite": record.non_finite, "prompt_tokens": record.prompt_tokens,
             **row(record)}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=("llamacpp", "vllm", "embedded"), required=True)
    parser.add_argument("--pooling", choices=("mean", "last", "cls"), default=None,
                        help="launch it for embeddings (llama-server, vLLM)")
    parser.add_argument("--store", action="store_true",
                        help="vLLM: keep Responses answers (previous_response_id)")
    parser.add_argument("--json", type=Path, default=None, help="write the checks here")
    args = parser.parse_args()
    settings = settings_of(args.server, args.pooling, args.store)
    server = settings.build(1024)
    assert server is not None, "a launched kind builds its server"
    with tempfile.TemporaryDirectory() as tmp:
        server.start(Path(tmp) / "server.log", 300)
        try:
            probe = probe_embeddings if args.pooling else probe_generation
            checks = asyncio.run(probe(server.base_url, settings.model_name()))
            if args.server == "embedded":
                checks += asyncio.run(probe_embeddings(server.base_url,
                                                       settings.model_name()))
        finally:
            server.stop()
        facts = {"server": args.server, "pooling": args.pooling,
                 "argv": server.facts().get("argv")}
    for check in checks:
        print(json.dumps(check))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**facts, "checks": checks}, indent=1) + "\n")


if __name__ == "__main__":
    main()
