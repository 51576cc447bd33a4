"""Every run remembered: a DuckDB database of the run directories kvlab wrote.

The run directory stays the source of truth; the database is an index over many of
them that SQL can query: which runs there are (runs, modes, servers), every row with
its validation verdict (records) and what each run's evaluation said (summaries, load
points). Deleting the database loses nothing: ``kvlab history rebuild`` makes it again
from the directories it had read (kept in the runs table and in a sidecar file).

- :mod:`~kvlab.history.location`: where the database lives (``--db``, KVLAB_HISTORY,
  the XDG data directory) and its sidecar of run paths.
- :mod:`~kvlab.history.schema`: the tables, the schema version, opening (and
  rebuilding an older layout).
- :mod:`~kvlab.history.facts`: what one run directory contributes, as plain rows.
- :mod:`~kvlab.history.ingest`: adding runs, in bulk, idempotent and incremental.
- :mod:`~kvlab.history.queries`: the questions users ask (runs, trend, SQL, a run by
  ``history:E@latest``, points across runs).
- :mod:`~kvlab.history.export`: records and summaries as Parquet files.
"""
