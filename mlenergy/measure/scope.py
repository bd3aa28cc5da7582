"""Which devices a run measures: the one scope rule of bench, sweeps, notebooks and ``%%energy``.

The rule
--------
1. A run measures the GPUs its model occupies: the CUDA indices of its torch device
   (``"cuda:1"`` -> ``[1]``, ``"cuda"`` -> the current CUDA device), of its device map
   (``{"model.layers.0": 0, "model.layers.1": "cuda:1"}`` -> ``[0, 1]``), or of its parameters
   when only the module is known. A model on the CPU (or MPS, or disk) occupies no GPU and is
   charged none.
2. The user can say otherwise: ``--gpu-indices 0,1`` / ``BenchOptions(gpu_indices=[0, 1])``
   (an empty list measures no GPU). Indices are CUDA indices as torch numbers them, i.e. within
   ``CUDA_VISIBLE_DEVICES``, which is also how Zeus numbers them.
3. The headline energy (``energy_j``, labelled ``measured:zeus-nvml``) is the energy of those GPUs
   only, as ML.ENERGY's rows report it. CPU package and DRAM energy (RAPL), where Zeus can read
   them, are measured beside it and kept as their own figures (``host_energy_j``, labelled
   ``measured:zeus-rapl``); they are never added to a GPU figure.
4. When no model is named (a bare ``%%energy`` cell, ``measured_window()``), the work occupies
   the GPUs this process holds memory on when the window opens (none when torch has not
   initialised CUDA); name the model or the GPUs to be exact.
5. With no GPU in scope the headline is the RAPL packages (``measured:zeus-rapl``) or, without
   counters, the CPU power model (``modelled:cpu-tdp``).
6. A server measured from outside (``bench --endpoint/--launch``) occupies the GPUs on which
   NVML lists one of its processes as running (:func:`gpus_held_by`); see
   :mod:`mlenergy.workloads.serving.server_gpus`.

Every record names the devices it covers in its :class:`~mlenergy.records.MeasuredScope`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mlenergy.errors import UserError
from mlenergy.measure.meter import EnergyMeter

if TYPE_CHECKING:
    from mlenergy.measure.meter import EnergyMeter


def _index_of(device: Any) -> int | None:
    """CUDA index of one device spec (str, int, ``torch.device``), ``None`` if not a GPU."""
    if isinstance(device, bool):
        return None
    if isinstance(device, int):
        return device if device >= 0 else None
    text = str(device).strip().lower()
    if not text.startswith("cuda"):
        return None
    _, _, index = text.partition(":")
    if index:
        try:
            return int(index)
        except ValueError:
            raise UserError(
                f"device {device!r} is not a CUDA device string", "Use cuda or cuda:<index>"
            ) from None
    return _current_cuda_index()


def _current_cuda_index() -> int:
    """Index that ``"cuda"`` means: torch's current device, else 0."""
    try:
        import torch

        if torch.cuda.is_available():
            return int(torch.cuda.current_device())
    except Exception:  # no torch or no CUDA: "cuda" names GPU 0
        pass
    return 0


def gpus_in_use() -> list[int]:
    """CUDA indices on which this process holds memory (none if torch has not started CUDA)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    try:
        if not torch.cuda.is_initialized():
            return []
        return [i for i in range(torch.cuda.device_count()) if torch.cuda.memory_allocated(i) > 0]
    except Exception:  # a broken CUDA setup holds no memory we can see
        return []


def _devices_of_module(module: Any) -> list[Any]:
    device_map = getattr(module, "hf_device_map", None)
    if isinstance(device_map, Mapping) and device_map:
        return list(device_map.values())
    devices: list[Any] = []
    for tensors in (module.parameters(), module.buffers()):
        devices += [t.device for t in tensors]
    return devices


def occupied_gpus(where: Any) -> list[int]:
    """The GPUs a model occupies, by rule 1 of the module docstring.

    Args:
        where: A torch device string or ``torch.device``, a device map (``{module: device}``),
            a list of devices, a ``torch.nn.Module`` (its ``hf_device_map``, else its
            parameters' devices), or an object with ``.model`` (a loaded model) or ``.device``.
            ``None`` means no model is named: the GPUs this process holds memory on.

    Returns:
        Sorted, distinct CUDA indices (empty for a model on the CPU).
    """
    if where is None:
        return gpus_in_use()
    if isinstance(where, Mapping):
        devices: Iterable[Any] = where.values()
    elif isinstance(where, str | int) or type(where).__name__ == "device":
        devices = [where]
    elif isinstance(where, list | tuple | set):
        devices = where
    elif hasattr(where, "parameters"):
        devices = _devices_of_module(where)
    elif hasattr(where, "model") and hasattr(where.model, "parameters"):
        devices = _devices_of_module(where.model)
    elif hasattr(where, "device"):
        devices = [where.device]
    else:
        raise UserError(
            f"cannot tell which devices a {type(where).__name__} occupies",
            "Pass a torch device, a device map or the model",
        )
    return sorted({i for d in devices if (i := _index_of(d)) is not None})


def measured_gpus(where: Any, gpu_indices: Iterable[int] | None = None) -> list[int]:
    """The GPUs a run measures: ``gpu_indices`` when given, else those the model occupies.

    Args:
        where: What :func:`occupied_gpus` accepts.
        gpu_indices: The user's override (``--gpu-indices``); ``[]`` measures no GPU.
            Validity against the machine is checked by the meter (Zeus's devices).

    Returns:
        CUDA indices to measure.

    Raises:
        UserError: A negative, non-integer or repeated override index.
    """
    if gpu_indices is None:
        return occupied_gpus(where)
    indices = list(gpu_indices)
    for i in indices:
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise UserError(
                f"gpu index {i!r} is not a non-negative integer", "Pass e.g. --gpu-indices 0,1"
            )
    if len(set(indices)) != len(indices):
        raise UserError(f"gpu indices {indices} repeat an index", "List each GPU once")
    return indices


def parse_gpu_indices(text: str | None) -> list[int] | None:
    """Parse ``--gpu-indices`` (``"0,1"``; ``""`` or ``"none"`` for no GPU; ``None``: unset).

    Raises:
        UserError: An item that is not a non-negative integer.
    """
    if text is None:
        return None
    stripped = text.strip().lower()
    if stripped in ("", "none"):
        return []
    out = []
    for item in stripped.split(","):
        try:
            value = int(item.strip())
        except ValueError:
            raise UserError(
                f"--gpu-indices item {item.strip()!r} is not an integer",
                "Pass e.g. --gpu-indices 0,1 (or none)",
            ) from None
        out.append(value)
    return measured_gpus(None, out)


def meter_for(
    where: Any, gpu_indices: Iterable[int] | None = None, **meter_options: Any
) -> EnergyMeter:
    """An :class:`~mlenergy.measure.EnergyMeter` over the devices the scope rule picks.

    Args:
        where: The model, its device or its device map (see :func:`occupied_gpus`).
        gpu_indices: The user's override of the GPUs to measure.
        **meter_options: Passed to :class:`~mlenergy.measure.EnergyMeter` (``cpu_tdp_w``,
            ``power_timeline``...); ``cpu_indices`` defaults to every readable RAPL package,
            measured beside the GPUs (or as the headline when no GPU is in scope).

    Returns:
        The meter; its :attr:`~mlenergy.measure.EnergyMeter.scope` names the devices.
    """
    return EnergyMeter(gpu_indices=measured_gpus(where, gpu_indices), **meter_options)


def gpu_process_ids(gpus: Any, index: int) -> set[int] | None:
    """Ids of the processes NVML lists as running on GPU ``index`` (compute and graphics).

    Zeus's GPU objects do not expose these lists; this reads them from the device's NVML
    handle (emulated GPUs state theirs).

    Args:
        gpus: Zeus's GPU collection.
        index: The GPU's index in Zeus's numbering (within ``CUDA_VISIBLE_DEVICES``).

    Returns:
        The process ids, or ``None`` when the list cannot be read (another vendor, no
        permission, an old driver).
    """
    devices = getattr(gpus, "gpus", None)
    if devices is None or not 0 <= index < len(devices):
        return None
    device = devices[index]
    stated = getattr(device, "running_process_ids", None)
    if callable(stated):
        ids = stated()
        return None if ids is None else {int(i) for i in ids}
    handle = getattr(device, "handle", None)
    if handle is None:
        return None
    try:
        import pynvml

        procs = [
            *pynvml.nvmlDeviceGetComputeRunningProcesses(handle),
            *pynvml.nvmlDeviceGetGraphicsRunningProcesses(handle),
        ]
    except Exception:  # NVMLError or a missing function: the list cannot be read
        return None
    return {int(p.pid) for p in procs}


def gpus_held_by(pids: Iterable[int], gpus: Any) -> tuple[list[int], bool]:
    """The GPUs on which any of ``pids`` runs, by NVML's running-process lists.

    Args:
        pids: Process ids (a server's process tree).
        gpus: Zeus's GPU collection.

    Returns:
        ``(indices, readable)``: the GPUs holding one of the processes (Zeus's numbering), and
        whether every GPU's list could be read (when not, an empty answer proves nothing).
    """
    wanted = set(pids)
    held: list[int] = []
    readable = True
    for i in range(len(getattr(gpus, "gpus", ()))):
        ids = gpu_process_ids(gpus, i)
        if ids is None:
            readable = False
        elif ids & wanted:
            held.append(i)
    return held, readable
