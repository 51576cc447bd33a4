"""The ``csv`` dataset kind: prompts from a CSV file with a header line, sent as written
(see :mod:`kvlab.bench.plan.textrows`)::

    [workload.dataset]
    kind = "csv"
    path = "prompts.csv"         # relative to the experiment file
    delimiter = ","              # "\t" for a TSV
    [workload.dataset.columns]
    prompt = "question"
    id = "qid"
    output_tokens = "answer_tokens"
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from kvlab.bench.plan.dataset import FileDatasetSettings, WorkloadFacts
from kvlab.bench.plan.rows import read_csv
from kvlab.bench.plan.textrows import Columns, TextRows, mapped_rows


class CsvDataset(FileDatasetSettings):
    """``[workload.dataset] kind = "csv"``: one prompt per record of a CSV file."""

    kind: Literal["csv"] = "csv"
    columns: Columns = Field(default_factory=Columns)
    delimiter: str = Field(default=",", min_length=1, max_length=1)

    def build(self, workload: WorkloadFacts) -> TextRows:
        rows = read_csv(Path(self.path), self.delimiter)
        return TextRows(mapped_rows(rows, self.columns, self.rows))

    def prompt_rule(self, prompt_fraction: float) -> str:
        """How this kind makes its prompts, for the reports (``prompt_fraction`` does not
        apply)."""
        return (f"Prompts = the rows of {self.path} (column {self.columns.prompt!r}), sent "
                f"as written; {self.columns.output_rule()}. The same prompts for every "
                "mode at a capacity.")
