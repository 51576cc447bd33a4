"""What a server's ``/metrics`` names mean: which counter is its prompt tokens, its
cached tokens, its preemptions, which gauge its queue and its KV use.

Each server kind declares its :class:`MetricNames` (``ServerSettings.metric_names``);
the run records them beside the server's facts in the manifest, and the analysis of
its counters reads them from there, never from a kind's name. An endpoint kvlab did not
launch, or a run recorded before kinds recorded their names, is recognised by its
prompt counter among :data:`KNOWN` (:func:`recognised`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

from pydantic import TypeAdapter, ValidationError

COUNTERS = ("prompt_tokens", "generation_tokens", "preemptions", "prefix_cache_queries",
            "prefix_cache_hits")
"""The counters kvlab reads of a server, under its own names (:attr:`MetricNames.names`)."""


@dataclass(frozen=True)
class MetricNames:
    """How one server names its counters (``None``: the server has no such counter).
    ``server``: what the reports call it; ``prompt_counts``: "all" prompt tokens, or
    only those "computed" (cached left out).

    And its gauges of the queue (names without the prefix; None: it has none):
    ``running`` (requests being computed), ``waiting`` (requests held back, for any
    reason), ``kv_waiting`` (the name and one label of a gauge that counts only the
    requests held back for want of KV), ``kv_usage`` (the pool's use, 0..1)."""

    server: str
    prefix: str
    names: dict[str, str | None] = field(default_factory=dict)  # COUNTERS -> name
    prompt_counts: Literal["all", "computed"] = "all"
    running: str | None = None
    waiting: str | None = None
    kv_waiting: tuple[str, str] | None = None  # (name, 'label="value"')
    kv_usage: str | None = None

    def full(self, counter: str) -> str | None:
        """The full name of one of :data:`COUNTERS` (None: the server has none)."""
        name = self.names.get(counter)
        return None if name is None else self.prefix + name

    def to_dict(self) -> dict[str, object]:
        """JSON-ready, for the manifest."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> MetricNames:
        """What :meth:`to_dict` wrote, validated field by field; ValueError for anything
        else."""
        try:
            return _READER.validate_python(dict(data))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the table"
            raise ValueError(f"not a server's metric names ({where}: {first['msg']})"
                             ) from None


_READER = TypeAdapter(MetricNames)


VLLM = MetricNames("vllm", "vllm:", {
    "prompt_tokens": "prompt_tokens_total", "generation_tokens": "generation_tokens_total",
    "preemptions": "num_preemptions_total",
    "prefix_cache_queries": "prefix_cache_queries_total",
    "prefix_cache_hits": "prefix_cache_hits_total"}, "all",
    running="num_requests_running", waiting="num_requests_waiting",
    kv_waiting=("num_requests_waiting_by_reason", 'reason="capacity"'),
    kv_usage="kv_cache_usage_perc")
"""vLLM's (``vllm/v1/metrics/loggers.py``)."""

LLAMACPP = MetricNames("llamacpp", "llamacpp:", {
    "prompt_tokens": "prompt_tokens_total", "generation_tokens": "tokens_predicted_total",
    "preemptions": None, "prefix_cache_queries": None,
    "prefix_cache_hits": "prompt_tokens_cached_total"}, "computed",
    running="requests_processing", waiting="requests_deferred")
"""llama-server's (``--metrics``)."""

EMBEDDED = MetricNames("embedded", "kvlab:", {
    "prompt_tokens": "prompt_tokens_total", "generation_tokens": "generation_tokens_total",
    "preemptions": "num_preemptions_total",
    "prefix_cache_queries": "prefix_cache_queries_total",
    "prefix_cache_hits": "prefix_cache_hits_total"}, "computed",
    running="num_requests_running", waiting="num_requests_waiting",
    kv_usage="kv_cache_usage_perc")
"""The embedded server's (``kvlab serve``, :mod:`kvlab.serve.metrics`)."""

KNOWN: tuple[MetricNames, ...] = (VLLM, LLAMACPP, EMBEDDED)
"""The names an endpoint's readings are recognised by when no kind recorded its own."""


def _has(samples: dict[str, float], name: str) -> bool:
    return any(k.split("{")[0] == name for k in samples)


def recognised(samples: dict[str, float]) -> MetricNames | None:
    """The known names whose prompt counter ``samples`` carries (None: none)."""
    return next((m for m in KNOWN if (full := m.full("prompt_tokens")) is not None
                 and _has(samples, full)), None)
