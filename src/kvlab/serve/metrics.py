"""``GET /metrics``: the server's load in Prometheus' text format, named after vLLM.

Where a gauge or counter means what vLLM's does, it has vLLM's name with kvlab's
prefix (``kvlab:num_requests_running`` is ``vllm:num_requests_running``), so a
dashboard or a scraper written for vLLM reads it with one prefix changed:

- ``num_requests_running`` / ``num_requests_waiting`` (gauges): requests in the
  running batch, and queued for it;
- ``kv_cache_usage_perc`` (gauge, 0..1): used KV blocks over all blocks, on the
  full-attention layers (Gemma's sliding layers are reported by the block gauges);
- ``num_preemptions_total``, ``prompt_tokens_total`` (tokens computed: a prompt's
  reused prefix is not), ``generation_tokens_total``, ``request_success_total``
  (counters); ``prefix_cache_queries_total`` and ``prefix_cache_hits_total`` (tokens
  looked up in the prefix cache, and found there): the one slot's held prefix
  (``cache_prompt``), or continuous batching's cached blocks (absent with
  ``--no-prefix-cache``); a request that sends ``cache_prompt: false`` looks nothing up;
- kvlab's own: ``kv_blocks_in_use{window=...}``, ``kv_blocks_cached{window=...}``
  (held by no sequence, kept for a prefix hit) and ``kv_blocks_total``.

Continuous batching also says where its time goes (:mod:`kvlab.engine.phases`):

- ``step_duration_seconds`` (histogram): whole scheduler steps that computed tokens;
- ``step_phase_seconds{phase=...}`` (histogram): each phase's time per step: schedule,
  batch (the flattened batch built), embed, the layers in three groups, gather (each
  decode row's K/V copied out of the paged pool), head (final norm and output head),
  sample, stream (detokenize, hand to the event loop), finish; ``between``: the gap
  before a step that followed a busy one;
- ``token_delivery_seconds{stage=...}`` (histogram, per token): ``seam`` from sampled
  to taken by its handler on the event loop, ``write`` the handler's SSE write;
- ``step_rows_total`` (counter): tokens sampled by steps (rows per step: over the
  step count); ``weight_bytes_per_step`` and ``copy_bandwidth_bytes_per_second``
  (gauges, the latter measured at load, 0 for a toy model under 64 MiB of weights):
  the memory floor of a step is their ratio.

The one-request slot has no blocks: it reports the request gauges and counters only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, Request
from starlette.responses import Response

from kvlab.serve.generator import Gauges, StepGauges

if TYPE_CHECKING:
    from kvlab.engine.phases import Histogram

PREFIX = "kvlab:"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_HELP = {
    "num_requests_running": ("gauge", "Requests in the running batch."),
    "num_requests_waiting": ("gauge", "Requests waiting to be admitted."),
    "kv_cache_usage_perc": ("gauge", "KV-cache usage, 1 means 100 percent (full-attention "
                            "layers)."),
    "kv_blocks_in_use": ("gauge", "KV blocks held by sequences, per window group."),
    "kv_blocks_cached": ("gauge", "KV blocks held by no sequence, kept for prefix hits."),
    "kv_blocks_total": ("gauge", "KV blocks per layer in the pool."),
    "num_preemptions_total": ("counter", "Sequences preempted (to be recomputed)."),
    "prompt_tokens_total": ("counter", "Prompt tokens computed."),
    "generation_tokens_total": ("counter", "Tokens generated."),
    "request_success_total": ("counter", "Requests that finished."),
    "prefix_cache_queries_total": ("counter", "Tokens looked up in the prefix cache."),
    "prefix_cache_hits_total": ("counter", "Tokens found in the prefix cache (reused)."),
    "step_duration_seconds": ("histogram", "Scheduler steps that computed tokens."),
    "step_phase_seconds": ("histogram", "Time per step in each phase of it."),
    "token_delivery_seconds": ("histogram", "A token's way out: seam (worker to event "
                               "loop) and write (the SSE write)."),
    "step_rows_total": ("counter", "Tokens sampled by scheduler steps."),
    "weight_bytes_per_step": ("gauge", "Bytes of weights one decode step reads."),
    "copy_bandwidth_bytes_per_second": ("gauge", "STREAM-like copy bandwidth measured "
                                        "at load (read + written bytes/s)."),
}


def _line(name: str, value: float, model: str, **labels: str) -> str:
    pairs = {"model_name": model, **labels}
    text = ",".join(f'{k}="{v}"' for k, v in pairs.items())
    return f"{PREFIX}{name}{{{text}}} {value:.10g}"


def render_metrics(gauges: Gauges, model: str) -> str:
    """The exposition text of ``gauges`` (a generator's ``gauges()``)."""
    samples: dict[str, list[str]] = {name: [] for name in _HELP}
    samples["num_requests_running"].append(_line("num_requests_running",
                                                 gauges.running, model))
    samples["num_requests_waiting"].append(_line("num_requests_waiting",
                                                 gauges.waiting, model))
    pool = gauges.pool
    if pool is not None:
        used = pool.blocks_used
        full = used.get("full", max(used.values()))
        samples["kv_cache_usage_perc"].append(
            _line("kv_cache_usage_perc", full / pool.blocks_total, model))
        samples["kv_blocks_total"].append(_line("kv_blocks_total", pool.blocks_total, model))
        for window, n in used.items():
            samples["kv_blocks_in_use"].append(
                _line("kv_blocks_in_use", n, model, window=window))
        for window, n in (pool.blocks_cached or {}).items():
            samples["kv_blocks_cached"].append(
                _line("kv_blocks_cached", n, model, window=window))
        samples["num_preemptions_total"].append(
            _line("num_preemptions_total", pool.preemptions, model))
    for value, name in ((gauges.prompt_tokens, "prompt_tokens_total"),
                        (gauges.generation_tokens, "generation_tokens_total"),
                        (gauges.finished, "request_success_total"),
                        (gauges.prefix_cache_queries, "prefix_cache_queries_total"),
                        (gauges.prefix_cache_hits, "prefix_cache_hits_total")):
        if value is not None:
            samples[name].append(_line(name, value, model))
    if gauges.steps is not None:
        _step_samples(samples, gauges.steps, model)
    out = []
    for name, lines in samples.items():
        if lines:
            kind, text = _HELP[name]
            out += [f"# HELP {PREFIX}{name} {text}", f"# TYPE {PREFIX}{name} {kind}", *lines]
    return "\n".join(out) + "\n"


def _step_samples(samples: dict[str, list[str]], steps: StepGauges, model: str) -> None:
    """The step clock's histograms, counters and the floor's gauges."""
    for phase, hist in steps.phases.items():
        if phase == "step":
            samples["step_duration_seconds"] += _histogram("step_duration_seconds", hist,
                                                           model)
        else:
            samples["step_phase_seconds"] += _histogram("step_phase_seconds", hist, model,
                                                        phase=phase)
    for stage, hist in steps.delivery.items():
        samples["token_delivery_seconds"] += _histogram("token_delivery_seconds", hist,
                                                        model, stage=stage)
    samples["step_rows_total"].append(_line("step_rows_total", steps.rows, model))
    samples["weight_bytes_per_step"].append(
        _line("weight_bytes_per_step", steps.weight_bytes, model))
    samples["copy_bandwidth_bytes_per_second"].append(
        _line("copy_bandwidth_bytes_per_second", steps.copy_bandwidth, model))


def _histogram(name: str, hist: Histogram, model: str, **labels: str) -> list[str]:
    """A histogram's ``_bucket`` lines (cumulative, +Inf last), ``_sum`` and ``_count``."""
    lines = [_line(f"{name}_bucket", n, model, **labels, le=le)
             for le, n in hist.cumulative()]
    lines.append(_line(f"{name}_sum", hist.sum, model, **labels))
    lines.append(_line(f"{name}_count", hist.count, model, **labels))
    return lines


router = APIRouter()


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """The gauges and counters of the slot or scheduler serving now."""
    state = request.app.state.kvlab
    return Response(render_metrics(state.slot.gauges(), state.model_id),
                    media_type=CONTENT_TYPE)
