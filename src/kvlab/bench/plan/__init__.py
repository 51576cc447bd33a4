"""Planning the load: what a run sends, and when.

Datasets (the :class:`Dataset` interface, one module per kind, the registry
``datasets``), queries and prompts (workload: :class:`Query`, :class:`PreparedPrompt`,
:class:`Prepared`, what ``prepared.json`` keeps), prompt sizing (:class:`Sizing`),
arrivals, the load strategies (:mod:`~kvlab.bench.plan.loads`), the loops they are
made of (schedule), sessions of turns (:mod:`~kvlab.bench.plan.sessions`), the
``[slo]``/``[search]`` tables and run order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.bench.plan.dataset import Dataset, DatasetSettings
    from kvlab.bench.plan.datasets import DATASET_KINDS, DatasetSettingsUnion
    from kvlab.bench.plan.sizing import Sizing
    from kvlab.bench.plan.workload import Prepared, PreparedPrompt, Query

__all__ = [
    "DATASET_KINDS",
    "Dataset",
    "DatasetSettings",
    "DatasetSettingsUnion",
    "Prepared",
    "PreparedPrompt",
    "Query",
    "Sizing",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "Dataset": "kvlab.bench.plan.dataset",
    "DatasetSettings": "kvlab.bench.plan.dataset",
    "DATASET_KINDS": "kvlab.bench.plan.datasets",
    "DatasetSettingsUnion": "kvlab.bench.plan.datasets",
    "Sizing": "kvlab.bench.plan.sizing",
    "Prepared": "kvlab.bench.plan.workload",
    "PreparedPrompt": "kvlab.bench.plan.workload",
    "Query": "kvlab.bench.plan.workload",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
