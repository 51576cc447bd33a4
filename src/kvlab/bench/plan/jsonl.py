"""The ``jsonl`` dataset kind: prompts from a JSONL file, one object per line, sent as
written (see :mod:`kvlab.bench.plan.textrows`)::

    [workload.dataset]
    kind = "jsonl"
    path = "prompts.jsonl"       # relative to the experiment file
    rows = 100                   # the first N rows (default: all)
    [workload.dataset.columns]   # which key holds what (these are the defaults)
    prompt = "prompt"
    # id = "id"                  # default: line<N>
    # output_tokens = "max_tokens"   # default: [workload] output_tokens for every row
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from kvlab.bench.plan.dataset import FileDatasetSettings, WorkloadFacts
from kvlab.bench.plan.rows import read_jsonl
from kvlab.bench.plan.textrows import Columns, TextRows, mapped_rows


class JsonlDataset(FileDatasetSettings):
    """``[workload.dataset] kind = "jsonl"``: one prompt per line of a JSONL file."""

    kind: Literal["jsonl"] = "jsonl"
    columns: Columns = Field(default_factory=Columns)

    def build(self, workload: WorkloadFacts) -> TextRows:
        return TextRows(mapped_rows(read_jsonl(Path(self.path)), self.columns, self.rows))

    def prompt_rule(self, prompt_fraction: float) -> str:
        """How this kind makes its prompts, for the reports (``prompt_fraction`` does not
        apply)."""
        return (f"Prompts = the rows of {self.path} (key {self.columns.prompt!r}), sent "
                f"as written; {self.columns.output_rule()}. The same prompts for every "
                "mode at a capacity.")
