"""The sections of workloads that reuse the KV cache or search for a capacity: "Capacity
search", "Prefix cache" and "Multi-turn growth", rendered from the run's Evaluation
(:mod:`kvlab.analysis.capacity`, :mod:`~kvlab.analysis.cache_hits` and
:mod:`~kvlab.analysis.turns`); they compute nothing. A section a run has nothing
for is left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvlab.analysis.cache_hits import CacheSplit
from kvlab.analysis.capacity import GOODPUT, CapacityResult
from kvlab.analysis.evaluate import Evaluation
from kvlab.analysis.stats import Distribution
from kvlab.analysis.turns import ConversationCheck
from kvlab.markdown import row
from kvlab.report.section import ReportInput, Section

CAPACITY_TITLE = "Capacity search"
CACHE_TITLE = "Prefix cache"
TURNS_TITLE = "Multi-turn growth"
MAX_ROWS_SHOWN = 40  # per group; every row is in evaluation.json and records.csv


def _value(metric: str, value: float | None) -> str:
    """A probe's statistic: ms, or a share for goodput."""
    if value is None:
        return "—"
    return f"{value:.1%}" if metric == GOODPUT else f"{value:.1f}"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _dist(d: Distribution) -> str:
    if not d.count:
        return "—"
    return f"{_ms(d.mean)} / {_ms(d.p50)} / {_ms(d.p95)} ({d.count})"


def capacity_body(results: Sequence[CapacityResult]) -> str:
    """The capacity search's rates and answers ("" when the run had no search)."""
    if not results:
        return ""
    lines = [
        "The highest request rate at which every objective held, found by bisection over "
        "rate points (each run at least twice when repetitions > 1; points whose schedule "
        "slipped are left out). A rate is judged on its valid rows; one whose refused "
        "rows exceed [search] max_refused is missed. The answer is interpolated between "
        "the highest rate met and the lowest rate missed; its 95 % interval is a "
        "bootstrap over the valid rows of every rate tried.", ""]
    for r in results:
        head = f"{r.mode} @ {r.capacity}: " + "; ".join(r.objectives) + ". "
        if r.status == "found" and r.rate is not None and r.bracket is not None:
            interval = (f" (95 % interval {r.interval.low:.4g}–{r.interval.high:.4g})"
                        if r.interval else "")
            head += (f"Capacity {r.rate:.4g} requests/s{interval}, between "
                     f"{r.bracket[0]:g} (met) and {r.bracket[1]:g} (missed).")
        elif r.status == "below_low":
            head += "Missed already at the lowest rate tried: the capacity is below it."
        elif r.status == "above_high":
            head += "Met even at the highest rate tried: the capacity is above it."
        else:
            head += "No rate was judged."
        lines += [head, ""]
        names = [o.split(" <=")[0].split(" >=")[0] for o in r.objectives]
        lines += ["| rate (req/s) | points | slipped | valid | refused | "
                  + " | ".join(names) + " | verdict |", "|" + "---|" * (len(names) + 6)]
        for p in r.probes:
            values = [_value(k, p.values.get(k)) for k in r.metrics]
            verdict = {True: "met", False: "missed", None: "undecided"}[p.met]
            if p.refused_miss:
                verdict += " (refused rows)"
            lines.append(row([f"{p.rate:g}", len(p.points), len(p.slipped),
                              f"{p.count.valid} of {p.count.of}",
                              p.count.refused_text(), *values, verdict]))
        lines += [f"- {n}" for n in r.notes]
        lines.append("")
    lines.append("— : the percentile falls on valid rows without the metric (such a row "
                 "counts as slower than any).")
    return "\n".join(lines) + "\n"


def capacity_lines(results: Sequence[CapacityResult]) -> list[str]:
    """One line per search: the answer and what it is the answer to (a terminal's)."""
    out = []
    for r in results:
        what = "; ".join(r.objectives)
        if r.status == "found" and r.rate is not None and r.bracket is not None:
            interval = (f" (95 % interval {r.interval.low:.4g}–{r.interval.high:.4g})"
                        if r.interval else "")
            out.append(f"capacity: {r.mode} @ {r.capacity}: {r.rate:.4g} requests/s"
                       f"{interval} for {what}; met at {r.bracket[0]:g}, missed at "
                       f"{r.bracket[1]:g}")
        else:
            words = {"below_low": "below the lowest rate tried",
                     "above_high": "above the highest rate tried"}
            out.append(f"capacity: {r.mode} @ {r.capacity}: "
                       f"{words.get(r.status, 'not found')} for {what}")
        out += [f"capacity: {r.mode} @ {r.capacity}: {note}" for note in r.notes
                if note.startswith("missed at")]
    return out


def cache_body(splits: Sequence[CacheSplit]) -> str:
    """Cached tokens per row and TTFT split by cache hit ("" when no row allowed reuse)."""
    if not splits:
        return ""
    lines = [
        "Where requests allowed prefix reuse (cache_prompt = true): rows whose server "
        "answered part of the prompt from its prefix cache (hits), the share of prompt "
        "tokens it answered, and TTFT (ms, mean / p50 / p95 (rows)) of hits and misses.",
        "", "| mode | capacity | load | rows | hits | cached share | TTFT hit | TTFT miss |",
        "|---|---|---|---|---|---|---|---|"]
    for s in splits:
        share = "—" if s.cached_share is None else f"{s.cached_share:.1%}"
        lines.append(row([s.mode, s.capacity, s.load or 'sequential', len(s.rows), s.hits, share,
                          _dist(s.ttft_hit_ms), _dist(s.ttft_miss_ms)]))
    for s in splits:
        shown = s.rows[:MAX_ROWS_SHOWN]
        lines += ["", f"Cached / prompt tokens per row, {s.mode} @ {s.capacity} "
                  f"{s.load or 'sequential'}: " + ", ".join(
                      f"{r.query_id}" + (f" rep {r.repetition}" if r.repetition else "")
                      + f" {r.cached_tokens}/{r.prompt_tokens if r.prompt_tokens else '?'}"
                      for r in shown)
                  + (f" (and {len(s.rows) - len(shown)} more in evaluation.json)"
                     if len(s.rows) > len(shown) else "") + "."]
    return "\n".join(lines) + "\n"


def turns_body(checks: Sequence[ConversationCheck]) -> str:
    """Whether each conversation's prompts grew as sized ("" without multi-turn rows)."""
    if not checks:
        return ""
    ok = sum(1 for c in checks if c.status == "grows as sized")
    lines = [
        "Turn k sends the earlier turns and their answers: turn to turn, the prompt "
        "tokens the server counted must grow by what the sizing counted (what the server "
        f"adds to every request cancels). {ok} of {len(checks)} conversations grew as "
        "sized.", "",
        "| mode | capacity | load | conversation | rep | sized per turn | server-counted "
        "per turn | check |", "|---|---|---|---|---|---|---|---|"]
    for c in checks:
        counted = ", ".join("—" if n is None else str(n) for n in c.counted)
        check = c.status + (f": {c.detail}" if c.detail else "")
        lines.append(row([c.mode, c.capacity, c.load or 'sequential', c.conversation, c.repetition,
                          ', '.join(map(str, c.sized)), counted, check]))
    return "\n".join(lines) + "\n"


def sections(evaluation: Evaluation) -> list[tuple[str, str]]:
    """(title, body) of each section the run has something for, in report order."""
    found = [(CAPACITY_TITLE, capacity_body(evaluation.capacity)),
             (CACHE_TITLE, cache_body(evaluation.prefix_cache)),
             (TURNS_TITLE, turns_body(evaluation.turns))]
    return [(title, body) for title, body in found if body]


def workloads_markdown(evaluation: Evaluation) -> str:
    """The sections as report.md text ("" when the run has none of them)."""
    return "".join(f"\n## {title}\n\n{body}" for title, body in sections(evaluation))


class CapacitySearch(Section):
    """The highest rate meeting the objectives, per (mode, capacity)."""

    heading = CAPACITY_TITLE

    def body(self, report: ReportInput) -> str:
        return capacity_body(report.evaluation.capacity)


class PrefixCache(Section):
    """Cached tokens per row and TTFT split by cache hit, where reuse was allowed."""

    heading = CACHE_TITLE

    def body(self, report: ReportInput) -> str:
        return cache_body(report.evaluation.prefix_cache)


class MultiTurn(Section):
    """How multi-turn prompts grew against their plan."""

    heading = TURNS_TITLE

    def body(self, report: ReportInput) -> str:
        return turns_body(report.evaluation.turns)
