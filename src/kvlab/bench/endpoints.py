"""One request against one API -> one Record of raw facts.

CONTRACT (fixed; the implementation is being written):

    endpoint = Endpoint(base_url="http://127.0.0.1:8080", api=ApiKind.LLAMACPP_COMPLETION)
    spec = RequestSpec(prompt="...", max_tokens=64, stream=True,
                       params={"temperature": 0, "seed": 42, "ignore_eos": True,
                               "cache_prompt": False},
                       run_id="...", mode="kv-cache", capacity=512, query_id="q01")
    async with HarnessClient(max_connections=1) as client:
        record = await client.send(endpoint, spec, clock)   # never raises for a failed
                                                            # request: outcome says it

``params`` are merged into the API-specific body last (so an experiment's extra body
fields, e.g. vLLM's ``chat_template_kwargs``, win). ``send`` never raises for HTTP
errors, timeouts or disconnects: they become a Record with the matching outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvlab.bench.records import ApiKind


@dataclass(frozen=True)
class Endpoint:
    """Where and how to send requests. ``api_key`` never appears in repr or output."""

    base_url: str
    api: ApiKind
    model: str | None = None  # model id for OpenAI APIs (None: llama.cpp ignores it)
    api_key: str | None = field(default=None, repr=False)
    name: str = "endpoint"
    timeout_s: float = 120.0  # per request, whole response


@dataclass(frozen=True)
class RequestSpec:
    """One request to send, with the identity its Record will carry."""

    prompt: str
    max_tokens: int
    stream: bool = True
    params: dict[str, Any] = field(default_factory=dict)
    run_id: str = ""
    mode: str = ""
    capacity: int = 0
    query_id: str = ""
    repetition: int = 0
    position: int = 0
    warmup: bool = False
    load: str | None = None
    t_scheduled: int | None = None  # ns since run start, for scheduled (load) sends
