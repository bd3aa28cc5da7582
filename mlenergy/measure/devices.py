"""Device discovery for the meter: which GPUs and RAPL packages Zeus can read.

Zeus keeps its devices in module singletons (``zeus.device.gpu._gpus``,
``zeus.device.cpu._cpus``) filled on first use; emulated devices installed by
:mod:`mlenergy.measure.emulated` are found the same way.
"""

from __future__ import annotations

import logging
from typing import Any

from mlenergy.errors import UserError

logger = logging.getLogger(__name__)


def check_indices(kind: str, requested: list[int] | None, available: int, fix: str) -> list[int]:
    """Resolve requested device indices against what Zeus found.

    Args:
        kind: ``"gpu"`` or ``"cpu"`` (RAPL package), for messages.
        requested: Indices asked for; ``None`` means all available.
        available: How many devices of that kind Zeus found.
        fix: How to fix a bad request (the :class:`UserError` hint).

    Returns:
        The indices to measure.

    Raises:
        UserError: An index that Zeus did not find, or a repeated index.
    """
    if requested is None:
        return list(range(available))
    indices = list(requested)
    for i in indices:
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < available:
            label = kind.upper()
            found = f"Zeus found {available} {label}(s)" if available else f"Zeus found no {label}"
            raise UserError(f"{kind}_indices={indices} asks for {label} {i!r} but {found}", fix)
    if len(set(indices)) != len(indices):
        raise UserError(f"{kind}_indices={indices} repeats an index", "List each index once")
    return indices


def discover_gpus() -> Any | None:
    """Zeus's GPU collection (real or emulated), or ``None`` when Zeus finds no GPU library."""
    from zeus.device import get_gpus
    from zeus.device.exception import ZeusBaseGPUError

    try:
        return get_gpus()
    except ZeusBaseGPUError as err:
        logger.info("Zeus found no GPU: %s", err)
        return None


def discover_cpus() -> Any | None:
    """Zeus's RAPL CPU collection (real or emulated), or ``None`` when none is readable."""
    from zeus.device import get_cpus
    from zeus.device.exception import ZeusBaseCPUError

    try:
        return get_cpus()
    except ZeusBaseCPUError as err:
        logger.info("Zeus found no readable RAPL counter: %s", err)
        return None


def torch_cuda_available() -> bool:
    """Whether torch can synchronise CUDA (imports torch: only called when real GPUs exist)."""
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # no torch, or a broken CUDA setup: nothing to synchronise with
        logger.info("torch with CUDA unavailable: windows will not synchronise the GPUs")
        return False
