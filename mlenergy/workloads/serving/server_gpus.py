"""Which GPUs a serving run measures: the server's, and only those.

* ``--gpu-indices`` names them. A launched server is given exactly those GPUs
  (``CUDA_VISIBLE_DEVICES``, :func:`visible_devices_for`), and they are measured.
* Otherwise the server's process tree is found (the launched command; ``--server-pid``; else
  the process listening on the endpoint's port) and the GPUs on which NVML lists one of its
  processes as running are measured, once the server answers
  (:func:`mlenergy.measure.scope.gpus_held_by`).
* When nothing says which GPUs (no process lists, or no local server process) and more than one
  GPU is visible, the run stops and asks for ``--gpu-indices``; one visible GPU is measured.
* With no GPU visible, the scope is the RAPL packages or the server's modelled CPU
  (:mod:`~.power`).

The record's scope names the GPUs and says how they were chosen.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from contextlib import suppress
from dataclasses import dataclass
from urllib.parse import urlsplit

import psutil

from mlenergy.errors import UserError
from mlenergy.measure.devices import discover_gpus
from mlenergy.measure.scope import gpus_held_by

_ASK = "Pass --gpu-indices with the GPUs the server runs on (e.g. --gpu-indices 0,1)"


@dataclass(frozen=True)
class ServerGpus:
    """The GPUs a serving run measures.

    Attributes:
        gpu_indices: Zeus's indices of the GPUs (``None``: no GPU is visible).
        how: How they were chosen, for the record's scope.
    """

    gpu_indices: list[int] | None
    how: str


def process_tree(pid: int) -> set[int]:
    """``pid`` and all its descendants (those alive now)."""
    try:
        root = psutil.Process(pid)
        return {pid, *(p.pid for p in root.children(recursive=True))}
    except psutil.Error:
        return set()


def _is_local(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        try:
            addr = ipaddress.ip_address(socket.gethostbyname(host))
        except (OSError, ValueError):
            return False
    if addr.is_loopback or addr.is_unspecified:
        return True
    local = {
        a.address.split("%")[0]
        for addrs in psutil.net_if_addrs().values()
        for a in addrs
        if a.family in (socket.AF_INET, socket.AF_INET6)
    }
    return str(addr) in local


def listening_pid(endpoint: str) -> int | None:
    """The local process listening on the endpoint's port, or ``None`` (remote, or hidden)."""
    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if not _is_local(parts.hostname or ""):
        return None
    with suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="tcp"):
            listening = conn.status == psutil.CONN_LISTEN and conn.laddr
            if listening and conn.laddr.port == port and conn.pid is not None:
                return int(conn.pid)
    return None


def visible_devices_for(gpu_indices: list[int]) -> str:
    """``CUDA_VISIBLE_DEVICES`` for a launched server that should see exactly these GPUs.

    Indices are Zeus's (within this process's own ``CUDA_VISIBLE_DEVICES``, if set).
    """
    mine = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [x.strip() for x in mine.split(",")] if mine else None
    return ",".join(ids[i] if ids and i < len(ids) else str(i) for i in gpu_indices)


def server_gpus(gpu_indices: list[int] | None, server_pid: int | None, who: str) -> ServerGpus:
    """The GPUs to measure (see the module docstring).

    Args:
        gpu_indices: ``--gpu-indices`` (``None``: not given).
        server_pid: The server's process (launched, ``--server-pid`` or listening), if known.
        who: How the record names that process (``launched server``, ``--server-pid``...).

    Raises:
        UserError: Several GPUs are visible and nothing says which the server uses, or the
            server's processes hold none of them.
    """
    if gpu_indices is not None:
        return ServerGpus(gpu_indices, "--gpu-indices")
    gpus = discover_gpus()
    count = len(gpus) if gpus is not None else 0
    if count == 0:
        return ServerGpus(None, "no GPU visible")
    pids = process_tree(server_pid) if server_pid is not None else set()
    if server_pid is not None and not pids:
        raise UserError(f"the {who} (pid {server_pid}) is not running", _ASK)
    held, readable = gpus_held_by(pids, gpus) if pids else ([], False)
    if held:
        return ServerGpus(
            held, f"held by the {who} process tree (pid {server_pid}; NVML process lists)"
        )
    if pids and readable:
        raise UserError(
            f"NVML lists none of the {who}'s processes (pid {server_pid} and "
            f"{len(pids) - 1} children) on the {count} visible GPU(s)",
            _ASK + ", or --gpu-indices none for a server that uses no GPU",
        )
    if count == 1:
        why = "no process list" if pids else "the server's process is unknown"
        return ServerGpus([0], f"the only visible GPU ({why})")
    if not pids:
        raise UserError(
            f"{count} GPUs are visible and nothing says which the server uses (no local "
            "process listens on the endpoint's port)",
            _ASK + ", or --server-pid",
        )
    raise UserError(
        f"{count} GPUs are visible and their process lists cannot be read to find the {who}",
        _ASK,
    )
