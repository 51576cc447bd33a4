"""Helpers shared by the dataset kinds' tests: counters, and an experiment around a table."""

from __future__ import annotations

import asyncio
import re
import tomllib
from pathlib import Path

from kvlab.bench.plan.workload import PreparedPrompt
from kvlab.experiment import Experiment, load_experiment
from tests.experiments import embedded, experiment


async def byte_tokens(text: str) -> int:
    """The embedded toy model's count: UTF-8 bytes."""
    return len(text.encode())


async def word_tokens(text: str) -> int:
    """The synthetic server's count: words and punctuation marks."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def common_prefix(texts: list[str]) -> str:
    """The longest text every one of ``texts`` starts with."""
    first, last = min(texts), max(texts)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


def experiment_with(tmp_path: Path, table: str, load: str = "") -> Experiment:
    """An experiment file in ``tmp_path`` whose [workload.dataset] is ``table`` (and
    whose [load] is ``load``), both TOML text."""
    loaded = tomllib.loads(load)["load"] if load else None
    dataset = tomllib.loads(table)
    dataset.update(dataset.pop("workload", {}).get("dataset", {}))  # its own sub-tables
    path = experiment("x", embedded("a"), workload=dict(capacities=[512]), dataset=dataset,
                      load=loaded).write(tmp_path, "e.toml")
    return load_experiment(path)


def prepare(experiment: Experiment, capacity: int = 512, counter=byte_tokens
            ) -> list[PreparedPrompt]:
    """The experiment's prompts at ``capacity``, counted by ``counter``."""
    w = experiment.workload
    _, prompts = asyncio.run(experiment.workload.source().prepare(
        counter, capacity, w.prompt_fraction, w.output_tokens))
    return prompts
