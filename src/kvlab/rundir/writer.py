"""The one writer of a run directory: records appended and state saved off the event loop.

Every write of a run goes through a :class:`RunWriter`: the Records as they land
(``records.jsonl``), the run's state (``manifest.json``), the prepared prompts
(``prepared.json``) and kvlab ab's ``ab.json``. A thread of its own does the writing,
so the event loop that stamps the requests never waits on the disk (an fsync per record
would add its own loop lag to the measurements).

Durability: each record is handed to the operating system as soon as the thread takes
it (``write`` + ``flush``), so killing kvlab (even ``kill -9``) loses only the rows
still in flight; :meth:`RunWriter.sync` also pushes them to the disk (``fsync``), at
the end of each load point and on every exit, so a power cut loses at most the point
being measured. A JSON file is replaced whole (written beside, then renamed): never
half-written.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from pathlib import Path
from typing import IO

from kvlab.rundir.files import AB_FILE, MANIFEST_FILE, PREPARED_FILE, RECORDS_FILE
from kvlab.rundir.manifest import RunState
from kvlab.rundir.prepared import Prepared
from kvlab.rundir.records import Record


class _Sync:
    """A marker in the queue: fsync the records, then set ``done``."""

    def __init__(self) -> None:
        self.done = threading.Event()


class RunWriter:
    """Appends Records and saves files of one run directory, on its own thread.

    Use it as a context manager (or call :meth:`close`): closing syncs everything to
    the disk. An error of the thread (disk full) is raised by the next call.
    """

    def __init__(self, run_path: Path, records_file: str = RECORDS_FILE) -> None:
        self.path = Path(run_path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._records: IO[str] = (self.path / records_file).open("a", encoding="utf-8")
        self._jobs: queue.SimpleQueue[Record | tuple[Path, str] | _Sync | None] = \
            queue.SimpleQueue()
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="kvlab-writer", daemon=True)
        self._thread.start()

    def append(self, record: Record) -> None:
        """Queue one record (returns at once)."""
        self._check()
        self._jobs.put(record)

    def save(self, state: RunState) -> None:
        """Queue ``manifest.json`` as ``state`` is now (serialized here, so later changes
        to the state are not in it)."""
        self._save(MANIFEST_FILE, state.dumps())

    def save_prepared(self, prepared: Prepared) -> None:
        """Queue ``prepared.json`` as ``prepared`` is now."""
        self._save(PREPARED_FILE, prepared.dumps())

    def save_ab(self, text: str) -> None:
        """Queue ``ab.json`` (kvlab ab's design, looks and verdict, as ``run.ab`` writes
        them)."""
        self._save(AB_FILE, text)

    def _save(self, name: str, text: str) -> None:
        """Queue a file of the run directory, replaced whole."""
        self._check()
        self._jobs.put((self.path / name, text))

    def sync(self) -> None:
        """Block until everything queued is written and the records are on the disk."""
        self._check()
        marker = _Sync()
        self._jobs.put(marker)
        marker.done.wait()
        self._check()

    async def synced(self) -> None:
        """:meth:`sync` without blocking the event loop."""
        await asyncio.to_thread(self.sync)

    def close(self) -> None:
        """Write everything queued, fsync, stop the thread; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._jobs.put(None)
        self._thread.join()
        self._records.close()
        self._check()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise OSError(f"cannot write the run directory {self.path}: {error}") from error

    def _work(self) -> None:
        """The thread: take jobs in order until the None that closes."""
        while True:
            job = self._jobs.get()
            try:
                if isinstance(job, Record):
                    self._records.write(job.model_dump_json() + "\n")
                    self._records.flush()  # in the OS: survives the death of kvlab
                elif isinstance(job, tuple):
                    path, text = job
                    tmp = path.with_name(path.name + ".tmp")
                    tmp.write_text(text, encoding="utf-8")
                    tmp.replace(path)  # never a half-written file
                else:
                    self._records.flush()
                    os.fsync(self._records.fileno())
                    if job is None:
                        return
                    job.done.set()
            except BaseException as exc:  # kept for the caller's next call
                self._error = exc
                if isinstance(job, _Sync):
                    job.done.set()
                if job is None:
                    return
