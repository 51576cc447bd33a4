"""A run's prompts: each capacity's, prepared on first use and kept in ``prepared.json``.

The first time a capacity comes up, its prompts are sized with the token counter the
server's target offers (:func:`~kvlab.bench.plan.sizing.choose_counter`: its
``/tokenize``, the named tokenizer file, or calibration on its usage) and made by the
plan's dataset; every mode at that capacity then gets the same prompts. The method is
kept in prepared.json and in the manifest (``prompt_sizing``). A resume reads them back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvlab.bench.plan.workload import PreparedPrompt
from kvlab.run.journal import Journal
from kvlab.run.runplan import RunPlan
from kvlab.run.targets import Target
from kvlab.rundir import Prepared


class PromptBook:
    """The prompts of one run directory, per capacity."""

    def __init__(self, plan: RunPlan, journal: Journal) -> None:
        self.plan = plan
        self.journal = journal
        w = plan.workload
        self.prepared = journal.run.prepared or Prepared(
            queries_per_mode=w.rows, modes=[m.name for m in plan.modes],
            capacities=list(w.capacities), output_tokens=w.output_tokens,
            prompt_fraction=w.prompt_fraction)
        self.counts: dict[tuple[str, str], dict[str, int]] = {}  # shared across capacities

    async def of(self, capacity: int, target: Target,
                 params: dict[str, Any]) -> list[PreparedPrompt]:
        """This capacity's prompts, prepared on first use with ``target``'s counter
        (``params``: the mode's body fields, for calibration probes)."""
        if capacity not in self.prepared.prompts:
            w = self.plan.workload
            tokenizer = Path(w.tokenizer) if w.tokenizer else None
            async with target.counter(params, tokenizer) as counting:
                counter = counting.share(self.counts)
                padding, prompts = await w.dataset.prepare(counter, capacity,
                                                           w.prompt_fraction, w.output_tokens)
            self.prepared.padding_tokens[capacity] = padding
            self.prepared.prompts[capacity] = prompts
            self.prepared.sizing[capacity] = counter.sizing
            self.journal.writer.save_prepared(self.prepared)
            state = self.journal.state
            sizing = state.prompt_sizing = state.prompt_sizing or {}
            sizing[str(capacity)] = counter.sizing
            self.journal.save()
        return self.prepared.prompts[capacity]
