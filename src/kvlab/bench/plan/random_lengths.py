"""The ``random`` dataset kind: prompts of drawn token lengths, and prefix sharing on demand.

::

    [workload.dataset]
    kind = "random"
    rows = 32
    seed = 7
    input = { distribution = "uniform", min = 64, max = 256 }   # prompt tokens
    output = { distribution = "fixed", value = 32 }              # default: [workload]
    prefix = "shared"        # "unique" (the default) or "shared"
    prefix_tokens = 128      # shared: the length of each group's prefix (P)
    group_size = 4           # shared: rows per prefix (G)

Lengths come from :mod:`kvlab.bench.plan.lengths` (drawn once, from ``seed``: the same
rows at every capacity and on every run). Each prompt is sized to its length exactly
by the run's token counter (:mod:`kvlab.bench.plan.exact`: kvlab's prose cut to fit).

- ``prefix = "unique"``: every prompt starts with its own tag (its row number in base
  62, lowest digit first), so no two of the first 62 rows share even a first character
  and no prefix cache can reuse one prompt for another (a tokenizer's BOS aside).
- ``prefix = "shared"``: rows ``0..G−1`` share one prefix of exactly P tokens, rows
  ``G..2G−1`` another, and so on; each prefix starts with its group's tag. A row is its
  group's prefix, a blank line, its own tag and prose: P + its drawn input length
  tokens in all. With ``cache_prompt = true`` a server that keeps prefixes answers the
  P tokens from its cache for every row of a group after the first.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from kvlab.bench.plan.dataset import DatasetSettings, WorkloadFacts
from kvlab.bench.plan.exact import fit_tokens, row_tag
from kvlab.bench.plan.lengths import Lengths
from kvlab.bench.plan.workload import PreparedPrompt, Query, Tokenizer, sha256
from kvlab.errors import ConfigError


class RandomDataset(DatasetSettings):
    """``[workload.dataset] kind = "random"``: ``rows`` prompts of drawn lengths."""

    kind: Literal["random"] = "random"
    rows: int = Field(default=32, ge=1)
    seed: int = 42
    input: Lengths  # prompt tokens (shared: of the row's own part, after the prefix)
    output: Lengths | None = None  # output tokens; None: [workload] output_tokens
    prefix: Literal["unique", "shared"] = "unique"
    prefix_tokens: int | None = Field(default=None, ge=1)  # shared: P
    group_size: int | None = Field(default=None, ge=1)  # shared: G

    @model_validator(mode="after")
    def _prefix(self) -> RandomDataset:
        if self.prefix == "shared":
            if self.prefix_tokens is None or self.group_size is None:
                raise ValueError('prefix = "shared" needs prefix_tokens and group_size')
        elif self.prefix_tokens is not None or self.group_size is not None:
            raise ValueError('prefix_tokens and group_size go with prefix = "shared"')
        return self

    def build(self, workload: WorkloadFacts) -> RandomRows:
        rng = random.Random(self.seed)
        inputs = self.input.draw(rng, self.rows)
        outputs = self.output.draw(rng, self.rows) if self.output is not None else None
        width = max(4, len(str(self.rows - 1)))
        rows = [RandomRow(f"r{i:0{width}d}", i, inputs[i],
                          outputs[i] if outputs is not None else None)
                for i in range(self.rows)]
        shared = None
        if self.prefix_tokens is not None and self.group_size is not None:
            shared = (self.prefix_tokens, self.group_size)
        return RandomRows(rows, shared)

    def prompt_rule(self, prompt_fraction: float) -> str:
        """How this kind makes its prompts, for the reports (``prompt_fraction`` does not
        apply)."""
        output = (f"output tokens {self.output.describe()}" if self.output is not None
                  else "output tokens [workload] output_tokens")
        prefix = ("every prompt starts with its own tag" if self.prefix == "unique" else
                  f"groups of {self.group_size} rows share a {self.prefix_tokens}-token "
                  "prefix")
        return (f"Prompts = {self.rows} random rows (seed {self.seed}): prompt tokens "
                f"{self.input.describe()}, {output}, each prompt sized to its length "
                f"exactly; {prefix}. The same prompts for every mode at a capacity.")


@dataclass(frozen=True)
class RandomRow:
    """One drawn row: its id, index, own prompt tokens and output tokens (None: the
    workload's)."""

    id: str
    index: int
    input_tokens: int
    output_tokens: int | None


class RandomRows:
    """Rows of drawn lengths (the :class:`~kvlab.bench.plan.dataset.Dataset` interface);
    ``shared``: (P, G) for shared prefixes, None for unique ones."""

    def __init__(self, rows: list[RandomRow], shared: tuple[int, int] | None) -> None:
        self._rows = rows
        self._shared = shared

    def queries(self) -> list[Query]:
        return [Query(r.id, f"random row {r.index}: {r.input_tokens} prompt tokens")
                for r in self._rows]

    async def prepare(self, counter: Tokenizer, capacity: int, prompt_fraction: float,
                      output_tokens: int) -> tuple[int, list[PreparedPrompt]]:
        """Every prompt sized to its length; ConfigError naming the first row that does
        not fit ``capacity`` (``prompt_fraction`` does not apply: lengths are drawn)."""
        prefix_tokens = self._shared[0] if self._shared else 0
        for row in self._rows:
            target = prefix_tokens + row.input_tokens
            output = row.output_tokens if row.output_tokens is not None else output_tokens
            if target + output > capacity:
                raise ConfigError(f"random row {row.id}: {target} prompt tokens + {output} "
                                  f"output tokens exceed the capacity {capacity}; lower the "
                                  "drawn lengths or raise the capacity")
        prefixes: dict[int, str] = {}
        prompts = []
        for row in self._rows:
            head, group = f"{row_tag(row.index)}. ", None
            if self._shared is not None:
                group = row.index // self._shared[1]
                if group not in prefixes:
                    sized = await fit_tokens(counter, f"{row_tag(group)}: ", prefix_tokens,
                                             f"random prefix of group {group}")
                    prefixes[group] = sized.text
                head = f"{prefixes[group]}\n\n{head}"
            target = prefix_tokens + row.input_tokens
            prompt = await fit_tokens(counter, head, target, f"random row {row.id}")
            prompts.append(PreparedPrompt(
                row.id, f"random row {row.index}", prompt.text, sha256(prompt.text),
                prompt.tokens, output_tokens=row.output_tokens or output_tokens,
                target_tokens=target, prefix_group=None if group is None else f"g{group}",
                prefix_tokens=prefix_tokens or None))
        return 0, prompts
