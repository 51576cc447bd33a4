"""Load workers as Ray actors: a local Ray kvlab starts and stops, or an existing cluster.

Ray (PyPI ``ray``, the optional extra ``kvlab[ray]``) runs the workers: each one is an
actor holding a :class:`~kvlab.bench.workers.worker.LoadWorker` in a process of its own,
on its own event loop. Two ways to get them:

- by default kvlab starts a local Ray (no dashboard, a 100 MB object store) and shuts
  it down when the run ends, on every exit path: the embedded default, with no set-up;
- with ``address`` (``kvlab run --ray-address HOST:PORT``), kvlab joins that cluster and
  places the workers on its alive nodes: ``per_node`` on each (``--workers-per-node``,
  nodes in their listed order), or spread by Ray; it leaves the cluster running.

Each worker asks Ray for one CPU: a load worker needs a core to stamp on time. Records
and calls cross process (and machine) boundaries as Ray objects; nothing else is shared.
kvlab must be installed, at the same version, on every node of a cluster.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from typing import Any

from kvlab import watchdog
from kvlab.bench.client.endpoints import Endpoint
from kvlab.bench.plan.loads.base import Shard
from kvlab.bench.workers.worker import Batch, LoadWorker
from kvlab.errors import ConfigError, WorkerError

INSTALL_HINT = "pip install 'kvlab[ray]' (or pip install ray)"
OBJECT_STORE_BYTES = 100 * 2**20  # a local Ray's object store: records are small
PLACE_TIMEOUT_S = 120.0  # how long Ray may take to place and start every worker


def ray_module(what: str = "--workers") -> Any:
    """The ``ray`` package; ConfigError (one line, how to install it) without it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"{what} runs the load on Ray, which is not installed: "
                          f"{INSTALL_HINT}") from None
    return ray


@dataclass(frozen=True)
class RaySettings:
    """Where the load workers run: ``workers`` actors on a local Ray (``address`` None)
    or on the cluster at ``address``, ``per_node`` on each node when given."""

    workers: int | None  # None: per_node on every alive node of the cluster
    address: str | None = None
    per_node: int | None = None
    http_client: str = "auto"

    def __post_init__(self) -> None:
        if self.workers is None and self.per_node is None:
            raise ConfigError("give --workers N (or --workers-per-node K on a cluster)")
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"--workers must be >= 1, got {self.workers}")
        if self.per_node is not None and self.per_node < 1:
            raise ConfigError(f"--workers-per-node must be >= 1, got {self.per_node}")
        if self.per_node is not None and self.address is None:
            raise ConfigError("--workers-per-node places workers on the nodes of a cluster; "
                              "give its --ray-address (a local Ray has one node)")


class RayLoadWorker(LoadWorker):
    """The actor's body: a LoadWorker that also names the Ray node it runs on."""

    async def facts(self) -> dict[str, Any]:
        import ray

        return {**await super().facts(), "node_id": ray.get_runtime_context().get_node_id()}


class RayHandle:
    """One worker actor, called as a :class:`~kvlab.bench.workers.dispatch.WorkerHandle`;
    a dead actor (its node lost) raises WorkerError."""

    def __init__(self, index: int, actor: Any) -> None:
        self.index = index
        self.actor = actor

    async def _call(self, method: str, *args: Any) -> Any:
        ray = ray_module()
        try:
            return await getattr(self.actor, method).remote(*args)
        except ray.exceptions.RayActorError as exc:
            raise WorkerError(f"load worker {self.index} died: "
                              f"{str(exc).splitlines()[0] if str(exc) else 'actor lost'}"
                              ) from None

    async def now_ns(self) -> int:
        return int(await self._call("now_ns"))

    async def facts(self) -> dict[str, Any]:
        return dict(await self._call("facts"))

    async def load(self, shard: Shard, endpoint: Endpoint, t0_ns: int) -> int:
        return int(await self._call("load", shard, endpoint, t0_ns))

    async def go(self, start_ns: int) -> None:
        await self._call("go", start_ns)

    async def drain(self, wait_s: float) -> Batch:
        batch: Batch = await self._call("drain", wait_s)
        return batch

    async def stop(self) -> Batch:
        batch: Batch = await self._call("stop")
        return batch

    async def call(self, fn: Any, *args: Any) -> Any:
        return await self._call("call", fn, *args)


class RayPool:
    """``settings.workers`` worker actors, started by :meth:`start`, ended by :meth:`close`.

    ``facts`` (for the manifest): the load driver (ray), Ray's version, where (local or the
    address), and per worker its node, host and process."""

    def __init__(self, settings: RaySettings) -> None:
        self.settings = settings
        self.handles: list[RayHandle] = []
        self.facts: dict[str, Any] = {}

    def start(self) -> RayPool:
        """Start (or join) Ray and every worker; WorkerError if they cannot be placed."""
        ray = ray_module()
        settings = self.settings
        try:
            self._init(ray)
            actors = self._place(ray)
            facts = ray.get([a.facts.remote() for a in actors], timeout=PLACE_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            cpus = ray.cluster_resources().get("CPU", 0)
            self.close()
            raise WorkerError(
                f"Ray could not start {len(actors)} load workers within {PLACE_TIMEOUT_S:g} s: "
                f"each asks for one CPU and the cluster has {cpus:g}") from None
        except (ConnectionError, RuntimeError, ValueError) as exc:
            self.close()
            where = settings.address or "a local Ray"
            raise WorkerError(f"cannot start load workers on {where}: "
                              f"{str(exc).splitlines()[0]}") from None
        except BaseException:
            self.close()
            raise
        self.handles = [RayHandle(i, a) for i, a in enumerate(actors)]
        self.facts = {"driver": "ray", "ray_version": ray.__version__,
                      "address": settings.address or "local", "count": len(actors),
                      "per_node": settings.per_node,
                      "nodes": len({f["node_id"] for f in facts}), "workers": facts}
        return self

    def _init(self, ray: Any) -> None:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # nothing leaves the machine
        watchdog.ensure()  # a local Ray's processes and workers end with kvlab
        common: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False,
                                  "namespace": "kvlab"}
        if self.settings.address is None:
            # "local": a new Ray of our own, even where another one runs on this machine
            ray.init(address="local", include_dashboard=False,
                     num_cpus=max(self.settings.workers or 1, os.cpu_count() or 1),
                     object_store_memory=OBJECT_STORE_BYTES, **common)
        else:
            ray.init(address=self.settings.address, **common)

    def _place(self, ray: Any) -> list[Any]:
        """The actors: ``per_node`` on each alive node in turn, else spread by Ray."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        settings = self.settings
        actor = ray.remote(num_cpus=1, max_restarts=0)(RayLoadWorker)
        if settings.per_node is None:
            assert settings.workers is not None
            strategy: Any = "SPREAD" if settings.address is not None else "DEFAULT"
            return [actor.options(scheduling_strategy=strategy).remote(i, settings.http_client)
                    for i in range(settings.workers)]
        nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        room = settings.per_node * len(nodes)
        count = settings.workers if settings.workers is not None else room
        if count > room:
            raise ValueError(f"{count} workers do not fit {settings.per_node} per node on "
                             f"{len(nodes)} alive nodes ({room}); lower --workers or raise "
                             "--workers-per-node")
        return [actor.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
                    nodes[i // settings.per_node], soft=False)).remote(i, settings.http_client)
                for i in range(count)]

    def close(self) -> None:
        """End every worker; shut down the local Ray kvlab started (a cluster's Ray keeps
        running; kvlab only leaves it). Safe to call twice."""
        try:
            import ray
        except ImportError:
            return
        for handle in self.handles:
            with contextlib.suppress(Exception):  # an actor already gone
                ray.kill(handle.actor)
        self.handles = []
        if ray.is_initialized():
            ray.shutdown()

