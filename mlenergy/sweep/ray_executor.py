"""The Ray executor: one Ray task per run, in a fresh worker process, GPUs reserved per run.

Each run is a ``ray.remote`` task with ``num_gpus`` = the run's GPUs and ``max_calls=1``, so
every run gets its own worker process and a CUDA fault or an out-of-memory kill ends only that
run. A run whose worker dies is submitted again up to ``retries`` times, then reported as
crashed; a run past ``timeout_s`` is cancelled with ``ray.cancel(force=True)`` and reported as
timed out. Results travel back to the driver as JSON; the driver alone writes the store.

Without an address a local cluster is started on 127.0.0.1 (no dashboard, no usage stats);
``address="auto"`` or ``"HOST:PORT"`` joins a running one (``ray start --head``).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlenergy.errors import UserError
from mlenergy.errors import UserError as _UserError
from mlenergy.records import QualityResult, RunRecord
from mlenergy.sweep.outcome import Outcome, first_line
from mlenergy.sweep.runs import execute_run
from mlenergy.sweep.spec import RunSpec

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
POLL_S = 0.2
"""How often the driver checks running tasks for results and timeouts, in seconds."""


def _run_in_worker(spec_json: str, idle_s: float) -> list[tuple[str, str]]:
    """Body of the Ray task: run one spec, return ``(record type, record JSON)`` pairs."""
    spec = RunSpec.model_validate_json(spec_json)
    try:
        records = execute_run(spec, idle_s)
    except _UserError as exc:
        return [("user-error", exc.message)]
    return [(r.record_type, r.model_dump_json()) for r in records]


def _decode(pairs: list[tuple[str, str]]) -> tuple[list[Any], str | None]:
    records: list[Any] = []
    for kind, text in pairs:
        if kind == "user-error":
            return [], text
        model = RunRecord if kind == "run" else QualityResult
        records.append(model.model_validate_json(text))
    return records, None


def _probe_address(address: str, timeout_s: float = 3.0) -> None:
    """Fail within seconds when ``HOST:PORT`` does not answer (Ray itself retries for minutes).

    Raises:
        UserError: The address is malformed or nothing listens there.
    """
    if address == "auto" or address.startswith("ray://"):
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(
            f"--address {address!r} is not auto or HOST:PORT", "Pass e.g. --address 10.0.0.5:6379"
        )
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise UserError(
            f"no Ray cluster answers at --address {address!r} ({exc.strerror or exc})",
            "Start one with `ray start --head`, or omit --address for a local cluster",
        ) from None


@dataclass
class _Task:
    spec: RunSpec
    ref: Any
    started_s: float
    attempts: int


def _import_ray() -> Any:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError as exc:
        raise UserError(
            f"--ray needs Ray, which is not installed ({exc})",
            "Install the extra: pip install 'mlenergy-lab[ray]'",
        ) from None
    return ray


class RayExecutor:
    """Run every spec as a Ray task.

    Args:
        address: ``None`` starts a local cluster; ``auto`` or ``HOST:PORT`` joins one.
        num_cpus: CPUs of the local cluster (one per concurrent run); ignored when joining.
        idle_s: Seconds of idle power measured before each bench run (0: skip).

    Raises:
        UserError: Ray is missing or the cluster cannot be reached.
    """

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int = 2, idle_s: float = 0.0):
        self.ray = _import_ray()
        self.idle_s = idle_s
        self._owns_cluster = not self.ray.is_initialized()
        if self._owns_cluster:
            self._connect(address, num_cpus)
        self._remote = self.ray.remote(max_calls=1, max_retries=0)(_run_in_worker)

    def _connect(self, address: str | None, num_cpus: int) -> None:
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if address is None:
            kwargs.update(num_cpus=num_cpus, _node_ip_address="127.0.0.1")
        else:
            _probe_address(address)
            kwargs["address"] = address
        previous = os.environ.get("PYTHONPATH")
        try:
            if address is None:  # local workers import this very copy of mlenergy
                os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, previous]))
            self.ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UserError(
                f"cannot reach a Ray cluster at --address {address!r} ({first_line(exc)})",
                "Start one with `ray start --head` or pass its HOST:PORT (omit --address for "
                "a local cluster)",
            ) from None
        finally:
            if previous is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = previous

    def check_resources(self, specs: Sequence[RunSpec]) -> None:
        """Refuse runs that need more GPUs than any node of the cluster has.

        Raises:
            UserError: Naming the GPUs asked for and the largest node's count.
        """
        most = max((s.gpus for s in specs), default=0)
        if most == 0:
            return
        per_node = [
            int(n.get("Resources", {}).get("GPU", 0)) for n in self.ray.nodes() if n.get("Alive")
        ]
        largest = max(per_node, default=0)
        if most > largest:
            raise UserError(
                f"resources.gpus = {most} but the largest node of the Ray cluster has "
                f"{largest} GPU(s)",
                "Lower resources.gpus or add a node with enough GPUs",
            )

    def _slots(self, specs: Sequence[RunSpec]) -> int:
        """Runs that can execute at once (so a submitted run is a started one)."""
        total = self.ray.cluster_resources()
        slots = max(1, int(total.get("CPU", 1)))
        gpus = max((s.gpus for s in specs), default=0)
        if gpus:
            slots = min(slots, max(1, int(total.get("GPU", 0)) // gpus))
        return slots

    def _submit(self, spec: RunSpec, attempts: int) -> _Task:
        ref = self._remote.options(num_gpus=spec.gpus, num_cpus=1).remote(
            spec.model_dump_json(), self.idle_s
        )
        return _Task(spec, ref, time.monotonic(), attempts)

    def run(
        self, specs: Sequence[RunSpec], on_start: Callable[[RunSpec], None]
    ) -> Iterator[Outcome]:
        """Submit up to the cluster's capacity at a time; yield outcomes as runs end."""
        self.check_resources(specs)
        queue = list(specs)
        slots = self._slots(specs)
        active: dict[Any, _Task] = {}
        try:
            while queue or active:
                while queue and len(active) < slots:
                    task = self._submit(queue.pop(0), 1)
                    active[task.ref] = task
                    on_start(task.spec)
                yield from self._collect(active)
        finally:
            for ref in list(active):
                self.ray.cancel(ref, force=True)

    def _collect(self, active: dict[Any, _Task]) -> Iterator[Outcome]:
        ready, _ = self.ray.wait(list(active), num_returns=1, timeout=POLL_S)
        for ref in ready:
            task = active.pop(ref)
            outcome = self._finish(task)
            if outcome is None:  # worker died: run it again
                retry = self._submit(task.spec, task.attempts + 1)
                active[retry.ref] = retry
            else:
                yield outcome
        now = time.monotonic()
        for ref, task in list(active.items()):
            limit = task.spec.timeout_s
            if limit is not None and now - task.started_s > limit:
                self.ray.cancel(ref, force=True)
                del active[ref]
                yield Outcome(
                    task.spec,
                    "timed out",
                    error=f"run exceeded its timeout of {limit:g} s and was cancelled",
                    attempts=task.attempts,
                )

    def _finish(self, task: _Task) -> Outcome | None:
        """The outcome of a finished task, or ``None`` when its crash should be retried."""
        exceptions = self.ray.exceptions
        try:
            records, user_error = _decode(self.ray.get(task.ref))
        except (exceptions.WorkerCrashedError, exceptions.NodeDiedError) as exc:
            if task.attempts <= task.spec.retries:
                return None
            return Outcome(task.spec, "crashed", error=first_line(exc), attempts=task.attempts)
        except exceptions.RayTaskError as exc:
            if task.attempts <= task.spec.retries:
                return None
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            return Outcome(task.spec, "failed", error=first_line(cause), attempts=task.attempts)
        if user_error is not None:
            return Outcome(task.spec, "failed", error=user_error, attempts=task.attempts)
        return Outcome(task.spec, "ok", records, attempts=task.attempts)

    def close(self) -> None:
        """Shut down the local cluster this executor started (joined clusters stay up)."""
        if self._owns_cluster and self.ray.is_initialized():
            self.ray.shutdown()
            self._owns_cluster = False
