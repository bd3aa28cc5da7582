"""Spread a model's decoder layers over several devices of one node (a layer split).

The transformers runner executes a model in one process; to use the several GPUs a run holds,
its decoder layers are cut into contiguous groups, one per device, and forward hooks move the
hidden states from group to group (layer-wise model parallelism: one device works at a time).
Embeddings, the final norm and the head stay on the first device.

:func:`run_meter` applies the one scope rule (:mod:`mlenergy.measure.scope`) to a run's devices.
"""

from __future__ import annotations

from typing import Any

from mlenergy.errors import UserError
from mlenergy.measure import measured_gpus, meter_for


def _move(value: Any, device: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(_move(v, device) for v in value)
    if isinstance(value, list):
        return [_move(v, device) for v in value]
    if isinstance(value, dict):
        return {k: _move(v, device) for k, v in value.items()}
    return value


def decoder_layers(model: Any) -> Any:
    """The model's decoder layers (the largest ``ModuleList`` named ``layers`` or ``h``).

    Raises:
        UserError: The model has no such list.
    """
    import torch

    best = None
    for name, module in model.named_modules():
        named_layers = name.rsplit(".", 1)[-1] in ("layers", "h")
        is_list = isinstance(module, torch.nn.ModuleList) and named_layers
        if is_list and (best is None or len(module) > len(best)):
            best = module
    if best is None or len(best) == 0:
        raise UserError(
            f"cannot split {type(model).__name__} over GPUs: no decoder layer list found",
            "Run it on one GPU (resources.gpus: 1)",
        )
    return best


def layer_groups(num_layers: int, num_devices: int) -> list[range]:
    """Contiguous, near-equal groups of layer indices, one per device (earlier ones larger)."""
    base, extra = divmod(num_layers, num_devices)
    groups, start = [], 0
    for i in range(num_devices):
        size = base + (1 if i < extra else 0)
        groups.append(range(start, start + size))
        start += size
    return groups


def split_layers(model: Any, devices: list[str]) -> list[range]:
    """Place the decoder layers of ``model`` over ``devices`` and hook the transfers.

    Args:
        model: A transformers causal LM already on ``devices[0]``.
        devices: Torch device strings, one per group (e.g. ``["cuda:0", "cuda:1"]``).

    Returns:
        The layer indices placed on each device.

    Raises:
        UserError: More devices than layers, or no decoder layers.
    """
    import torch

    layers = decoder_layers(model)
    if len(devices) > len(layers):
        raise UserError(
            f"cannot split {len(layers)} layers over {len(devices)} GPUs",
            "Use at most as many GPUs as the model has layers",
        )
    groups = layer_groups(len(layers), len(devices))
    first = torch.device(devices[0])
    for device, group in zip(devices, groups, strict=True):
        target = torch.device(device)
        for index in group:
            layer = layers[index].to(target)
            layer.register_forward_pre_hook(
                lambda _m, args, kwargs, t=target: (_move(args, t), _move(kwargs, t)),
                with_kwargs=True,
            )
    layers[len(layers) - 1].register_forward_hook(lambda _m, _a, out: _move(out, first))
    return groups


def run_gpu_indices(devices: list[str], gpus: int) -> list[int]:
    """GPUs a sweep run measures: those its layers occupy, by the scope rule.

    A run that holds GPUs but keeps the model on the host (``device: cpu`` with
    ``resources.gpus > 0``) measures the GPUs it was given, as an explicit override.

    Args:
        devices: Torch devices the model's layers are spread over.
        gpus: GPUs the run holds (0: none).

    Returns:
        CUDA indices to measure.
    """
    if gpus <= 0:
        return measured_gpus(devices, [])
    occupied = measured_gpus(devices)
    return occupied if occupied else list(range(gpus))


def run_meter(devices: list[str], gpus: int) -> Any:
    """The :class:`~mlenergy.measure.EnergyMeter` of a sweep run over ``devices``.

    With GPUs in scope the CPU packages are left out: runs on other GPUs of the node share
    them, so their energy is not this run's alone. Without GPUs the RAPL packages (or the CPU
    power model) are the headline.
    """
    indices = run_gpu_indices(devices, gpus)
    return meter_for(devices, indices, cpu_indices=[] if indices else None)
