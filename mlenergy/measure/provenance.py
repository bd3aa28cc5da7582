"""Provenance of a run: the hardware it ran on and the software versions it used.

Nothing here imports torch or transformers: versions come from package metadata, GPU names
from Zeus's device objects (through the meter, when one is given).
"""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from mlenergy.measure.cpu_model import cpu_model_name, usable_cpu_count
from mlenergy.records import Hardware, Software

if TYPE_CHECKING:
    from mlenergy.measure.meter import EnergyMeter

PROJECT_DIST = "mlenergy-lab"
"""Distribution name of this project (its version is ``Software.mlenergy``)."""


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _memory_gb() -> float | None:
    try:
        # lazy: psutil (~60 ms at start-up) only when a record's provenance is collected
        import psutil

        return round(psutil.virtual_memory().total / 1e9, 2)
    except Exception:  # psutil missing or unreadable /proc: provenance stays partial
        return None


def _nvidia_driver_version() -> str | None:
    try:
        import pynvml

        version = pynvml.nvmlSystemGetDriverVersion()  # NVML already initialised by Zeus
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # no NVML, not initialised, or an old binding: leave it unknown
        return None


def collect_hardware(meter: EnergyMeter | None = None) -> Hardware:
    """Describe the machine: CPU, memory and, when a meter measures GPUs, the accelerators.

    Args:
        meter: The meter of the run. Its measured GPUs become the accelerators, and when it
            models CPU energy its TDP is recorded as ``cpu_tdp_w``. ``None``: CPU and memory
            only (``accelerator_count`` 0).

    Returns:
        The hardware record.
    """
    accelerator_model: str | None = None
    count = 0
    tdp_w = driver = None
    cpu_tdp_w = None
    if meter is not None:
        names = meter.gpu_names()
        if names:
            count = len(names)
            accelerator_model = names[0] if len(set(names)) == 1 else " + ".join(names)
            tdp_w = meter.gpu_power_limit_w()
            if not meter.is_emulated and meter.energy_source.endswith("nvml"):
                driver = _nvidia_driver_version()
        if meter.cpu_power_model is not None:
            cpu_tdp_w = meter.cpu_power_model.tdp_w
    return Hardware(
        accelerator_model=accelerator_model,
        accelerator_count=count,
        accelerator_tdp_w=tdp_w if tdp_w and tdp_w > 0 else None,
        driver_version=driver,
        cpu_model=cpu_model_name(),
        cpu_cores=usable_cpu_count(),
        cpu_tdp_w=cpu_tdp_w,
        memory_gb=_memory_gb(),
    )


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists() or not (root / "pyproject.toml").exists():
        return None  # installed copy, not a checkout
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and len(commit) == 40 else None


def collect_software() -> Software:
    """Versions of python, torch, transformers, zeus and mlenergy, and the git commit.

    Versions come from installed package metadata (nothing is imported); the commit is that of
    the checkout this module runs from, ``None`` outside a git checkout or before a first
    commit.
    """
    return Software(
        python=platform.python_version(),
        torch=_version("torch"),
        transformers=_version("transformers"),
        zeus=_version("zeus"),
        mlenergy=_version(PROJECT_DIST) or "0+unknown",
        git_commit=_git_commit(),
    )
