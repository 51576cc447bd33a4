"""The dataset kinds an experiment's ``[workload.dataset] kind = "..."`` may name.

Adding a kind (say ``"jsonl"``) takes one file and one registry line:

1. ``bench/plan/<kind>.py``: a :class:`~kvlab.bench.plan.dataset.DatasetSettings`
   subclass with ``kind: Literal["<kind>"] = "<kind>"`` and its options as fields (the
   ``[workload.dataset]`` table), whose ``build(workload)`` returns a
   :class:`~kvlab.bench.plan.dataset.Dataset`: ``queries()`` and, per capacity,
   ``prepare(counter, capacity, prompt_fraction, output_tokens)``;
2. its settings class added to :data:`DatasetSettingsUnion` below (``A | B``).

The experiment file, ``kvlab run`` (prompt sizing, prepared.json, the rows) and the
reports then know the kind.
"""

from __future__ import annotations

from typing import Annotated, get_args

from pydantic import Field

from kvlab.bench.plan.builtin import BuiltinDataset
from kvlab.bench.plan.csv_rows import CsvDataset
from kvlab.bench.plan.dataset import DatasetSettings
from kvlab.bench.plan.jsonl import JsonlDataset
from kvlab.bench.plan.random_lengths import RandomDataset
from kvlab.bench.plan.repeated import RepeatedDataset
from kvlab.bench.plan.sessions.jsonl import SessionsDataset
from kvlab.bench.plan.sessions.sharegpt import ShareGptSessions
from kvlab.bench.plan.sessions.synthetic import RandomSessions
from kvlab.bench.plan.sessions.weka import WekaDataset
from kvlab.bench.plan.sharegpt import ShareGptDataset
from kvlab.bench.plan.trace import TraceDataset

# The registry: one settings class per kind, told apart by its ``kind`` field.
DatasetSettingsUnion = Annotated[
    BuiltinDataset | RepeatedDataset | JsonlDataset | CsvDataset | ShareGptDataset
    | RandomDataset | TraceDataset | SessionsDataset | ShareGptSessions | RandomSessions
    | WekaDataset,
    Field(discriminator="kind"),
]


def _kinds(union: object) -> tuple[type[DatasetSettings], ...]:
    members = get_args(get_args(union)[0]) or (get_args(union)[0],)
    return tuple(members)


DATASET_KINDS: dict[str, type[DatasetSettings]] = {
    cls.model_fields["kind"].default: cls for cls in _kinds(DatasetSettingsUnion)
}
"""Kind name -> settings class, in registry order."""
