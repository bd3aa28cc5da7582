"""Where a run folder of ML.ENERGY's benchmark harness keeps its files, and what they say.

A run folder sits at ``{base}/{task}/results/{org}/{model}/{gpu_model}/num_gpus+N+...``; the
harness's ``monolithic.config.yaml`` (vLLM options) and ``model_info.json`` sit beside it or
above it, or under the harness's ``configs/vllm/{task}/{model_id}/`` (``--harness-configs``);
``driver.log`` names the server image, hence the vLLM version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mlenergy.errors import UserError
from mlenergy.importers.common import fail

_SERVER_IMAGE_RE = re.compile(r"server_image='([^']+)'")


@dataclass(frozen=True)
class HarnessOptions:
    """What the user can add to a run folder's files.

    Attributes:
        configs_dir: Folder of model ``config.json`` files (``<org>__<name>.json``).
        harness_configs: The harness's ``configs/vllm`` folder
            (``{task}/{model_id}/{gpu_model}/monolithic.config.yaml``).
        task: Task name when the folder layout does not show it.
        dtype: Weight dtype when no harness file gives it.
        engine: Serving engine and version (``vllm 0.11.1``) when ``driver.log`` is absent.
        harness_version: Version of ``mlenergy.benchmark`` that measured the run.
        zeus_version: Zeus version used by the harness.
        gpu: GPU name, overriding ``gpu_model`` (a name the catalog does not know).
    """

    configs_dir: Path | None = None
    harness_configs: Path | None = None
    task: str | None = None
    dtype: str | None = None
    engine: str | None = None
    harness_version: str | None = None
    zeus_version: str | None = None
    gpu: str | None = None


def plus_params(name: str) -> dict[str, str]:
    """``num_gpus+1+max_num_seqs+64`` -> ``{"num_gpus": "1", "max_num_seqs": "64"}``."""
    tokens = name.split("+")
    return {tokens[i]: tokens[i + 1] for i in range(0, len(tokens) - 1, 2)}


def task_from_path(run_dir: Path) -> str | None:
    """The ``{task}`` folder above ``results/{org}/{model}/{gpu}/{params}``, if shown."""
    parts = run_dir.resolve().parts
    if len(parts) >= 6 and parts[-5] == "results":
        return parts[-6]
    return None


def _find_up(run_dir: Path, name: str, levels: int = 5) -> Path | None:
    folder = run_dir
    for _ in range(levels):
        if (folder / name).is_file():
            return folder / name
        folder = folder.parent
    return None


def harness_file(
    run_dir: Path, opts: HarnessOptions, task: str, model_id: str, gpu: str, name: str
) -> Path | None:
    """``name`` beside the run (or above it), else under ``--harness-configs``."""
    found = _find_up(run_dir, name)
    if found is not None:
        return found
    if opts.harness_configs is None:
        return None
    base = opts.harness_configs / task / model_id
    candidate = base / gpu / name if name.endswith(".yaml") else base / name
    return candidate if candidate.is_file() else None


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a harness YAML file that must hold a mapping (the vLLM options).

    Raises:
        UserError: The file is not readable YAML or not a mapping.
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path} is not readable YAML ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} must hold a mapping of vLLM options")
    return data


def parallelism(config: dict[str, Any], num_gpus: int, path: Path) -> tuple[int, int, int]:
    """Tensor, expert and data parallelism from a vLLM config, by ``mlenergy-data``'s rule.

    Expert parallelism spans ``expert-parallel-size`` (default: all GPUs) when
    ``enable-expert-parallel`` is set; tensor parallelism is ``tensor-parallel-size``
    (default: all GPUs, or 1 with expert parallelism); ``data-parallel-size: 0`` means all GPUs.
    """
    try:
        ep = (
            int(config.get("expert-parallel-size", num_gpus))
            if config.get("enable-expert-parallel", False)
            else 1
        )
        tp = int(config.get("tensor-parallel-size", 1 if ep > 1 else num_gpus))
        dp_raw = int(config.get("data-parallel-size", 1))
    except (TypeError, ValueError):
        raise fail(path, "tensor-parallel-size", "parallel sizes must be integers") from None
    dp = dp_raw if dp_raw != 0 else num_gpus
    if min(tp, ep, dp) < 1:
        raise fail(path, "tensor-parallel-size", "parallel sizes must be at least 1")
    return tp, ep, dp


def engine_of(run_dir: Path, opts: HarnessOptions) -> tuple[str, str | None]:
    """The serving engine, from ``--engine`` or the server image named in ``driver.log``."""
    if opts.engine:
        return opts.engine.strip(), None
    log = run_dir / "driver.log"
    if log.is_file():
        match = _SERVER_IMAGE_RE.search(log.read_text(encoding="utf-8", errors="replace"))
        if match:
            image = match.group(1)
            version = image.rsplit(":", 1)[-1].lstrip("v") if ":" in image else None
            return (f"vllm {version}" if version else f"vllm ({image})"), None
    return "vllm", "vLLM version not recorded (no driver.log): pass --engine 'vllm X.Y.Z'"


def find_runs(paths: list[Path], *, recursive: bool = False) -> list[Path]:
    """The run folders to read: each path itself, or with ``recursive`` every run below it.

    A path that is neither a run nor (with ``recursive``) holds one is returned as is, so that
    :func:`read_run` names it in its error.
    """
    out: list[Path] = []
    for path in paths:
        below = sorted(p.parent for p in path.rglob("results.json")) if recursive else []
        if recursive and path.is_dir() and not (path / "results.json").is_file() and below:
            out.extend(below)
        else:
            out.append(path)
    return list(dict.fromkeys(out))
