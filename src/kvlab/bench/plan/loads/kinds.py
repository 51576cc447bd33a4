"""The load kinds an experiment's ``[load] kind = "..."`` may name.

Adding a kind (say ``"burst"``) takes one file and one registry line:

1. ``bench/plan/loads/<kind>.py``: a :class:`~kvlab.bench.plan.loads.base.LoadTable`
   subclass with ``kind: Literal["<kind>"] = "<kind>"`` and its options as fields (the
   ``[load]`` table), whose ``points(default_requests)`` returns its load points; and
   the point, a :class:`~kvlab.bench.plan.loads.base.LoadStrategy` (label, in-flight
   limit, size, ``run`` on the run's clock, ``shard`` over load workers) whose ``kind``
   is a :class:`~kvlab.labels.PointKind` (a new grammar of labels is one line of
   :data:`~kvlab.labels.POINT_KINDS`);
2. its settings class added to :data:`LoadSettings` below (``A | B``).

The experiment file, ``kvlab run`` (the plan, every load driver, resume) and the reports
then know the kind.
"""

from __future__ import annotations

from typing import Annotated, get_args

from pydantic import Field

from kvlab.bench.plan.loads.base import LoadTable
from kvlab.bench.plan.loads.concurrency import ConcurrencyLoad
from kvlab.bench.plan.loads.rate import RateLoad
from kvlab.bench.plan.loads.sequential import SequentialLoad
from kvlab.bench.plan.loads.sessions import SessionsLoad
from kvlab.bench.plan.loads.trace import TraceLoad

# The registry: one settings class per kind, told apart by its ``kind`` field.
LoadSettings = Annotated[
    SequentialLoad | ConcurrencyLoad | RateLoad | TraceLoad | SessionsLoad,
    Field(discriminator="kind"),
]

LOAD_KINDS: dict[str, type[LoadTable]] = {
    cls.model_fields["kind"].default: cls for cls in get_args(get_args(LoadSettings)[0])
}
"""Kind name -> settings class, in registry order."""
