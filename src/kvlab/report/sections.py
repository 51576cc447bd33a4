"""The registry of report sections: report.md and report.html render these, in this
order (:mod:`kvlab.report.document`, :mod:`kvlab.report.html`).

A new section is one :class:`~kvlab.report.section.Section` (its title and Markdown
body, and its HTML when that says more) and one line here.
"""

from __future__ import annotations

from kvlab.report.client_error import ClientErrorSection
from kvlab.report.comparisons import AaNoiseFloor, Comparisons
from kvlab.report.embeddings import Embeddings
from kvlab.report.figures import Figures
from kvlab.report.knee import KneeSection
from kvlab.report.kv_check import KvCheckSection
from kvlab.report.load import ClientLoad, Load, RunOrder
from kvlab.report.manifest import ManifestEssentials
from kvlab.report.metric_definitions import MetricDefinitions
from kvlab.report.peer_definitions import PeerDefinitions
from kvlab.report.prompts import Prompts
from kvlab.report.protocol import Protocol
from kvlab.report.reasoning import Reasoning
from kvlab.report.section import Section
from kvlab.report.server_counters import ServerCounters
from kvlab.report.server_histograms import ServerHistograms
from kvlab.report.server_memory import ServerMemory
from kvlab.report.sessions import Sessions
from kvlab.report.summary_table import Summaries
from kvlab.report.trace_hits import TraceHits
from kvlab.report.validation import Validation
from kvlab.report.verdicts import Intervals
from kvlab.report.workers import Workers
from kvlab.report.workloads import CapacitySearch, MultiTurn, PrefixCache

SECTIONS: tuple[Section, ...] = (
    Protocol(),
    MetricDefinitions(),
    Validation(),
    Summaries(),
    Comparisons(),
    Intervals(),
    ManifestEssentials(),
    Prompts(),
    RunOrder(),
    Load(),
    Figures(),
    Workers(),
    ClientLoad(),
    ClientErrorSection(),
    KvCheckSection(),
    Reasoning(),
    Embeddings(),
    ServerCounters(),
    ServerHistograms(),
    KneeSection(),
    ServerMemory(),
    CapacitySearch(),
    PrefixCache(),
    TraceHits(),
    MultiTurn(),
    Sessions(),
    PeerDefinitions(),
    AaNoiseFloor(),
)
