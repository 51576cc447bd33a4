"""The engine against llama-server on the same GGUF: tokens, greedy decoding, teacher forcing.

Three checks, on the protocol's prompts (the workload's padding, sized per capacity
with llama-server's own ``/tokenize``, then a query):

- tokenization: the engine's ids equal ``/tokenize`` with ``add_special`` (BOS first,
  as llama-server tokenizes a prompt) for every query at every capacity;
- greedy decoding: both decode 64 tokens at temperature 0 from the same prompt ids;
  llama.cpp computes with quantized activations (Q8 dot products), so long sequences
  are not expected to stay equal; what counts is how many tokens agree before the
  first divergence;
- teacher forcing: the engine reads the prompt plus llama-server's 64 tokens in one
  cached pass, and its top-1 prediction at each step is compared with the token
  llama-server chose there (every step sees llama.cpp's own history). Other
  teacher-forced predictors (Transformers; the engine under llama.cpp's numerics, see
  :mod:`kvlab.studies.llamacpp_numerics`) can be scored the same way, beside it.
"""

from __future__ import annotations

import asyncio
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
import torch

from kvlab.bench.plan.workload import Query, prepare_capacity
from kvlab.engine.generate import generate
from kvlab.engine.lm import LanguageModel, new_cache
from kvlab.errors import EndpointProtocolError


@dataclass
class TokenizerCheck:
    """One prompt tokenized by both."""

    capacity: int
    query_id: str
    server_tokens: int  # BOS included
    equal: bool
    first_difference: int | None  # index of the first differing id; None when equal


# (prompt ids, forced ids) -> logits (len(forced), V): step i sees ids + forced[:i]
Forcer = Callable[[list[int], list[int]], torch.Tensor]


@dataclass
class ForcedCheck:
    """One teacher-forced predictor on one prompt, scored against llama-server's tokens."""

    agree: int  # steps whose top-1 equals llama-server's token
    # Where they differ: the predictor's top-1 logit minus its logit of llama-server's
    # token, and that token's rank in the predictor's order (2 = its second choice).
    margins: list[float] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)


def score_forced(logits: torch.Tensor, forced: list[int]) -> ForcedCheck:
    """Top-1 agreement of ``logits`` (n, V) with ``forced`` (n ids), margins and ranks."""
    top = logits.argmax(-1)  # (n,)
    target = torch.tensor(forced)  # (n,)
    theirs = logits.gather(-1, target[:, None])[:, 0]  # (n,)
    misses = (top != target).nonzero()[:, 0].tolist()
    margins = [float(logits[i, top[i]] - theirs[i]) for i in misses]
    ranks = [int((logits[i] > theirs[i]).sum()) + 1 for i in misses]
    return ForcedCheck(len(forced) - len(misses), margins, ranks)


@dataclass
class DecodeCheck:
    """One prompt decoded by both (greedy) and teacher-forced on llama-server's tokens."""

    query_id: str
    prompt_tokens: int
    agreed_before_divergence: int  # 0..n_predict
    teacher_forced_agree: int  # steps whose top-1 equals llama-server's token
    n_predict: int
    # At each teacher-forced step where they differ: the engine's top-1 logit minus its
    # logit of llama-server's token (small: a near tie that quantization tipped over).
    mismatch_margins: list[float] = field(default_factory=list)
    mismatch_ranks: list[int] = field(default_factory=list)  # llama-server's token's rank
    others: dict[str, ForcedCheck] = field(default_factory=dict)  # other predictors, by name


def forced_summary(checks: list[ForcedCheck], n_predict: int) -> dict[str, Any]:
    """Top-1 rate of a teacher-forced predictor over prompts, and what its misses are."""
    margins = [m for c in checks for m in c.margins]
    steps = n_predict * len(checks)
    return {
        "top1": sum(c.agree for c in checks) / steps if steps else None,
        "agree": sum(c.agree for c in checks), "steps": steps, "misses": len(margins),
        "miss_ranks": dict(sorted(Counter(r for c in checks for r in c.ranks).items())),
        "max_margin": max(margins, default=None),
        "median_margin": statistics.median(margins) if margins else None,
    }


@dataclass
class AgreementReport:
    """Every check and its summary figures."""

    tokenizer: list[TokenizerCheck] = field(default_factory=list)
    decode: list[DecodeCheck] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Counts, the median and minimum agreed prefix, the teacher-forced top-1 rate."""
        agreed = [d.agreed_before_divergence for d in self.decode]
        steps = sum(d.n_predict for d in self.decode)
        forced = sum(d.teacher_forced_agree for d in self.decode)
        return {
            "tokenizer_equal": sum(t.equal for t in self.tokenizer),
            "tokenizer_total": len(self.tokenizer),
            "capacities": sorted({t.capacity for t in self.tokenizer}),
            "queries_decoded": len(self.decode),
            "n_predict": self.decode[0].n_predict if self.decode else None,
            "agreed_median": statistics.median(agreed) if agreed else None,
            "agreed_min": min(agreed) if agreed else None,
            "teacher_forced_top1": forced / steps if steps else None,
            "max_mismatch_margin": max(
                (m for d in self.decode for m in d.mismatch_margins), default=None),
            "teacher_forced": self.forced_summaries(),
        }

    def forced_summaries(self) -> dict[str, dict[str, Any]]:
        """Per teacher-forced predictor ("engine" first): :func:`forced_summary`."""
        if not self.decode:
            return {}
        n = self.decode[0].n_predict
        checks = {"engine": [ForcedCheck(d.teacher_forced_agree, d.mismatch_margins,
                                         d.mismatch_ranks) for d in self.decode]}
        for d in self.decode:
            for name, check in d.others.items():
                checks.setdefault(name, []).append(check)
        return {name: forced_summary(c, n) for name, c in checks.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(),
                "tokenizer": [asdict(t) for t in self.tokenizer],
                "decode": [asdict(d) for d in self.decode]}


def server_tokenize(base_url: str, text: str) -> list[int]:
    """llama-server's ids for a prompt: ``POST /tokenize`` with BOS (``add_special``)."""
    try:
        response = httpx.post(f"{base_url}/tokenize",
                              json={"content": text, "add_special": True}, timeout=60.0)
        response.raise_for_status()
        return [int(t) for t in response.json()["tokens"]]
    except (httpx.HTTPError, KeyError, ValueError, TypeError) as exc:
        raise EndpointProtocolError(f"{base_url}/tokenize failed: {exc}") from None


def server_greedy(base_url: str, ids: list[int], n_predict: int) -> list[int]:
    """llama-server's ``n_predict`` greedy tokens after ``ids`` (temperature 0, EOS
    ignored, no prompt cache), as ids."""
    body = {"prompt": ids, "n_predict": n_predict, "temperature": 0.0, "ignore_eos": True,
            "cache_prompt": False, "return_tokens": True, "seed": 42}
    try:
        response = httpx.post(f"{base_url}/completion", json=body, timeout=300.0)
        response.raise_for_status()
        tokens = [int(t) for t in response.json()["tokens"]]
    except (httpx.HTTPError, KeyError, ValueError, TypeError) as exc:
        raise EndpointProtocolError(f"{base_url}/completion failed: {exc}") from None
    if len(tokens) != n_predict:
        raise EndpointProtocolError(
            f"{base_url}/completion returned {len(tokens)} tokens, asked for {n_predict}")
    return tokens


async def _prompts(base_url: str, queries: list[Query], capacity: int,
                   prompt_fraction: float, output_tokens: int) -> list[tuple[str, str]]:
    async with httpx.AsyncClient() as client:

        async def count(text: str) -> int:  # the server-tokenize count: no BOS
            response = await client.post(f"{base_url}/tokenize", json={"content": text},
                                         timeout=60.0)
            response.raise_for_status()
            return len(response.json()["tokens"])

        _, prepared = await prepare_capacity(count, queries, capacity, prompt_fraction,
                                             output_tokens)
    return [(p.query_id, p.prompt) for p in prepared]


def protocol_prompts(base_url: str, queries: list[Query], capacity: int,
                     prompt_fraction: float = 0.5, output_tokens: int = 64
                     ) -> list[tuple[str, str]]:
    """(query id, prompt text) of each query at ``capacity``, sized as ``kvlab run``
    sizes them (padding cut with the server's token counts)."""
    return asyncio.run(_prompts(base_url, queries, capacity, prompt_fraction, output_tokens))


def check_tokenization(base_url: str, tokenizer: Any, capacity: int,
                       prompts: list[tuple[str, str]]) -> list[TokenizerCheck]:
    """Each prompt through ``tokenizer.encode`` and the server's ``/tokenize``."""
    checks = []
    for query_id, text in prompts:
        theirs = server_tokenize(base_url, text)
        ours = tokenizer.encode(text)
        diff = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
                    None if len(ours) == len(theirs) else min(len(ours), len(theirs)))
        checks.append(TokenizerCheck(capacity, query_id, len(theirs), diff is None, diff))
    return checks


def teacher_forced_logits(model: LanguageModel, ids: list[int], forced: list[int]
                          ) -> torch.Tensor:
    """The engine's logits (n, V) at each of ``n = len(forced)`` steps, step i seeing the
    prompt ``ids`` and ``forced[:i]`` (one cached prefill, one cached chunk)."""
    cache = new_cache(model, len(ids) + len(forced) - 1)
    with torch.inference_mode():
        first = model(torch.tensor([ids]), cache, start_pos=0, last_only=True)  # (1, 1, V)
        cache.advance(len(ids))
        rest = model(torch.tensor([forced[:-1]]), cache, start_pos=cache.length)  # (1, n-1, V)
        cache.advance(len(forced) - 1)
        return torch.cat([first[0], rest[0]]).float()  # (n, V)


def check_decoding(base_url: str, model: LanguageModel, query_id: str, ids: list[int],
                   n_predict: int = 64, forcers: dict[str, Forcer] | None = None
                   ) -> DecodeCheck:
    """Greedy agreement and teacher-forced top-1 on one prompt (llama-server's ids);
    each of ``forcers`` is teacher-forced on the same tokens and scored beside."""
    theirs = server_greedy(base_url, ids, n_predict)
    ours = generate(model, ids, n_predict).tokens
    agreed = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b),
                  n_predict)
    plain = score_forced(teacher_forced_logits(model, ids, theirs), theirs)
    others = {name: score_forced(forcer(ids, theirs), theirs)
              for name, forcer in (forcers or {}).items()}
    return DecodeCheck(query_id, len(ids), agreed, plain.agree, n_predict, plain.margins,
                       plain.ranks, others)


def run_agreement(
    loaded: Any, *, queries: list[Query], capacities: list[int], decode_capacity: int,
    n_predict: int = 64, server_threads: int = 2, log_dir: Any = None,
    on_step: Any = None, forcers: dict[str, Forcer] | None = None,
) -> AgreementReport:
    """Start llama-server on ``loaded``'s GGUF (context = the largest capacity), check
    tokenization at every capacity and decoding at ``decode_capacity``, stop it.

    ``loaded``: a :class:`kvlab.engine.models.LoadedModel`. ``on_step(label)`` is called
    after each prompt (for a progress bar). ``forcers``: other teacher-forced
    predictors scored beside the engine (see :func:`check_decoding`).
    """
    import tempfile
    from pathlib import Path

    from kvlab.servers.llamacpp import LlamaCppSettings, LlamaServer

    step = on_step or (lambda label: None)
    settings = LlamaCppSettings(model=loaded.path, threads=server_threads)
    server = LlamaServer(settings, max([*capacities, decode_capacity]))
    log = Path(log_dir or tempfile.mkdtemp(prefix="kvlab-agree-")) / "llama-server.log"
    report = AgreementReport()
    server.start(log)
    try:
        url = server.base_url
        by_capacity: dict[int, list[tuple[str, str]]] = {}
        for capacity in sorted({*capacities, decode_capacity}):
            by_capacity[capacity] = protocol_prompts(url, queries, capacity,
                                                     output_tokens=n_predict)
        for capacity in capacities:
            for check in check_tokenization(url, loaded.tokenizer, capacity,
                                            by_capacity[capacity]):
                report.tokenizer.append(check)
                step(f"tokenize {capacity} {check.query_id}")
        for query_id, text in by_capacity[decode_capacity]:
            ids = server_tokenize(url, text)
            report.decode.append(check_decoding(url, loaded.model, query_id, ids, n_predict,
                                                forcers))
            step(f"decode {query_id}")
    finally:
        server.stop()
    return report

