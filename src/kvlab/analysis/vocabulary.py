"""One vocabulary across tools: each metric and SLO as kvlab and four peers name it.

Users carry numbers and objectives between kvlab, GuideLLM, AIPerf, vLLM's
``bench serve`` and inference-perf, and each spells them its own way (AIPerf rejects
vLLM's SLO names; GuideLLM copied vLLM's). :data:`VOCABULARY` is the table: a row per
concept (TTFT to any token and to the first answer token, ITL, TPOT, e2e, goodput and
the three per-request SLOs), a cell per tool with its name and definition. The
latency definitions of kvlab, GuideLLM, AIPerf and vLLM are those kvlab computes
(:data:`kvlab.analysis.definitions.SETS`), so the table cannot drift from the code;
the docs page is generated from it (``docs/concepts/metrics.md``).

:func:`slo_field` maps an objective's name in any of the spellings kvlab accepts
(kvlab's, vLLM's, GuideLLM's, AIPerf's: all in ms) to the ``[slo]`` field it means.
inference-perf's constraints are in seconds, so its names are listed, not accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.analysis.definitions import SETS
from kvlab.errors import ConfigError
from kvlab.markdown import table

TOOLS: tuple[str, ...] = ("kvlab", "GuideLLM 0.8.1", "AIPerf 0.13.0", "vLLM bench serve",
                          "inference-perf")


@dataclass(frozen=True)
class Term:
    """A tool's name for a concept and what it means there (None: the tool has none)."""

    name: str | None
    definition: str


@dataclass(frozen=True)
class Concept:
    """One row: a concept, and each tool's term for it (in :data:`TOOLS`' order)."""

    concept: str
    terms: tuple[Term, ...]
    slo_field: str | None = None  # the [slo] field an objective row maps to


def _set(name: str, key: str) -> str:
    return SETS[name].definitions[key]


_NONE = Term(None, "none")
_IP_SLO = "goodput.constraints in seconds (kvlab does not accept them: another unit)"

VOCABULARY: tuple[Concept, ...] = (
    Concept("TTFT, first token of any kind (reasoning included)", (
        Term("ttft_ms", _set("kvlab", "ttft_ms")),
        Term("time_to_first_token_ms", _set("guidellm", "ttft_ms")),
        Term("time_to_first_token", _set("aiperf", "ttft_ms")),
        Term("ttft", _set("vllm", "ttft_ms")),
        Term("time_to_first_token", "first non-empty output token − request send"),
    )),
    Concept("TTFT, first answer token (reasoning excluded)", (
        Term("answer_ttft_ms", _set("kvlab", "first_answer")),
        Term("time_to_first_output_token_ms", _set("guidellm", "first_answer")),
        Term("time_to_first_output_token", _set("aiperf", "first_answer")),
        Term(None, _set("vllm", "first_answer")),
        _NONE,
    )),
    Concept("ITL (inter-token latency)", (
        Term("itl_effective_ms", _set("kvlab", "itl_ms")),
        Term("inter_token_latency_ms", _set("guidellm", "itl_ms")),
        Term("inter_token_latency", _set("aiperf", "itl_ms")),
        Term("itl", _set("vllm", "itl_ms")),
        Term("inter_token_latency", "every gap between output tokens of a request"),
    )),
    Concept("TPOT (time per output token)", (
        Term(None, _set("kvlab", "tpot_ms")),
        Term("time_per_output_token_ms", _set("guidellm", "tpot_ms")),
        Term(None, _set("aiperf", "tpot_ms")),
        Term("tpot", _set("vllm", "tpot_ms")),
        Term("time_per_output_token", "(e2e − TTFT) / (output tokens − 1); "
             "normalized_time_per_output_token: e2e / output tokens"),
    )),
    Concept("e2e (request latency)", (
        Term("e2e_ms", _set("kvlab", "e2e_ms")),
        Term("request_latency", _set("guidellm", "e2e_ms") + " (seconds)"),
        Term("request_latency", _set("aiperf", "e2e_ms")),
        Term("e2el", _set("vllm", "e2e_ms")),
        Term("request_latency", "request completion − request send (seconds)"),
    )),
    Concept("goodput", (
        Term("goodput", "valid rows meeting every [slo] / the point's span (req/s); "
             "[search] goodput: the share of them"),
        Term("request_goodput", "requests meeting every objective / duration; "
             "slo_attainment: their share"),
        Term("goodput", "requests meeting every --goodput objective / duration"),
        Term("request_goodput", "requests meeting every --goodput objective / duration"),
        Term("request_goodput", "good requests / benchmark time; goodput %: their share"),
    )),
    Concept("SLO on TTFT (ms)", (
        Term("[slo] ttft_ms", "a valid row's ttft_ms at most this"),
        Term("ttft_ms", "time_to_first_token_ms at most this"),
        Term("time_to_first_token", "--goodput time_to_first_token:MS"),
        Term("ttft", "--goodput ttft:MS"),
        Term("ttft", _IP_SLO),
    ), slo_field="ttft_ms"),
    Concept("SLO per output token (ms)", (
        Term("[slo] itl_ms", "a valid row's itl_effective_ms at most this"),
        Term("tpot_ms", "compared with inter_token_latency_ms (the first token left out)"),
        Term("inter_token_latency", "--goodput inter_token_latency:MS"),
        Term("tpot", "--goodput tpot:MS, compared with its TPOT"),
        Term("tpot", _IP_SLO + "; also itl, ntpot"),
    ), slo_field="itl_ms"),
    Concept("SLO on e2e (ms)", (
        Term("[slo] e2e_ms", "a valid row's e2e_ms at most this"),
        Term("e2el_ms", "request_latency at most this"),
        Term("request_latency", "--goodput request_latency:MS (to the last content)"),
        Term("e2el", "--goodput e2el:MS"),
        Term("request_latency", _IP_SLO),
    ), slo_field="e2e_ms"),
)

# The spellings an objective may take, all in ms: kvlab's, GuideLLM's, AIPerf's, vLLM's
# (the first four columns of the SLO rows; inference-perf's are seconds).
SLO_SPELLINGS: dict[str, str] = {
    spelling: c.slo_field
    for c in VOCABULARY if c.slo_field is not None
    for spelling in (c.slo_field, *(t.name for t in c.terms[1:4] if t.name))
}


def slo_field(name: str) -> str:
    """The ``[slo]`` field (``ttft_ms``, ``itl_ms``, ``e2e_ms``) an objective named
    ``name`` means; ConfigError listing the spellings accepted otherwise."""
    key = name.strip().lower()
    if key in SLO_SPELLINGS:
        return SLO_SPELLINGS[key]
    raise ConfigError(f"unknown objective {name!r}; kvlab reads "
                      f"{', '.join(sorted(SLO_SPELLINGS))} (ms)")


def parse_goodput(spec: str) -> dict[str, float]:
    """``--goodput``'s text, as vLLM or AIPerf write it (``ttft:200 tpot:50``,
    ``time_to_first_token:200``; spaces or commas between), as ``[slo]`` fields in ms.
    ConfigError in one line for a pair without a number or one objective given twice."""
    out: dict[str, float] = {}
    for pair in spec.replace(",", " ").split():
        name, sep, value = pair.partition(":")
        if not sep:
            name, sep, value = pair.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not sep or not number > 0:
            raise ConfigError(f"--goodput {pair!r}: give NAME:MS with a positive number, "
                              "e.g. --goodput 'ttft:200 tpot:50'")
        field = slo_field(name)
        if field in out:
            raise ConfigError(f"--goodput gives {field} twice ({spec!r})")
        out[field] = number
    if not out:
        raise ConfigError("--goodput is empty; e.g. --goodput 'ttft:200 tpot:50'")
    return out


def markdown_table() -> str:
    """The vocabulary as one Markdown table (a row per concept, a column per tool)."""
    def cell(term: Term) -> str:
        name = f"`{term.name}`: " if term.name else "— "
        return name + term.definition

    lines = table(["", *TOOLS], [[c.concept, *(cell(t) for t in c.terms)]
                                 for c in VOCABULARY])
    return "\n".join(lines) + "\n"
