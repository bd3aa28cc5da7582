"""Shared reading helpers of the importers: required keys, stable ids, models, GPUs, software.

Every importer reads its whole input before anything is written. A problem becomes a
:class:`~mlenergy.errors.UserError` whose message names the file and the key
(``results.json: steady_state_energy: must be a positive number, got 0``), which the CLI
prints as one line with exit status 2.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeGuard, overload

from mlenergy.errors import UserError
from mlenergy.estimate.configs import resolve_model_config
from mlenergy.models.info import model_info_from_config
from mlenergy.records import ModelInfo, Software, canonical_json, sha256_hex
from mlenergy.records.provenance import Weights
from mlenergy.records.quality import ModelRef, model_ref
from mlenergy.reference import default_configs_dir
from mlenergy.reference.gpus import catalog_names, find_gpu
from mlenergy.reference.precisions import precision_name, spelling
from mlenergy.reference.runs import published_model_info

IMPORTED_MLENERGY = "not used (imported)"
"""``Software.mlenergy`` of an imported record: the figures were not measured by this project.

It carries no version so that a record (and its content hash) stays the same across releases.
"""

_MISSING = object()


def fail(path: Path | str, key: str, problem: str, fix: str | None = None) -> UserError:
    """Build the error for a bad input: ``<file>: <key>: <problem>``.

    Args:
        path: The file (or folder) that was read.
        key: The key, column or option at fault (dotted for nested keys).
        problem: What was wrong with it.
        fix: How to fix it.
    """
    return UserError(f"{path}: {key}: {problem}", fix)


def load_json_object(path: Path) -> dict[str, Any]:
    """Read a JSON file that must hold an object.

    Raises:
        UserError: The file is missing, unreadable, not JSON or not an object.
    """
    if path.is_dir():
        raise UserError(f"{path} is a folder, not a file", "pass the file itself")
    if not path.is_file():
        raise UserError(f"{path} does not exist or is not a file", "pass the path of the file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8 text", "pass the JSON file the tool wrote") from None
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})",
            "pass the JSON file the tool wrote, unmodified",
        ) from None
    except OSError as exc:
        raise UserError(f"cannot read {path} ({exc.strerror or exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} holds a JSON {type(data).__name__}, not an object")
    return data


def lookup(obj: Mapping[str, Any], key: str, default: Any = _MISSING) -> Any:
    """Return the value at a dotted ``key`` (``"report.decode.energy.gpu"``) or ``default``.

    Raises:
        KeyError: The key is absent and no default was given.
    """
    value: Any = obj
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            if default is _MISSING:
                raise KeyError(key)
            return default
        value = value[part]
    return value


def is_number(value: Any) -> TypeGuard[float]:
    """True for a finite int or float (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@overload
def number(
    obj: Mapping[str, Any],
    key: str,
    path: Path | str,
    *,
    positive: bool = False,
    required: Literal[True] = True,
) -> float: ...
@overload
def number(
    obj: Mapping[str, Any], key: str, path: Path | str, *, positive: bool = False, required: bool
) -> float | None: ...
def number(
    obj: Mapping[str, Any],
    key: str,
    path: Path | str,
    *,
    positive: bool = False,
    required: bool = True,
) -> float | None:
    """Return the number at ``key``, failing with the file and key when it is unusable.

    Args:
        obj: The parsed JSON object.
        key: Dotted key.
        path: The file, for the message.
        positive: Require a value above 0 (energies, durations).
        required: Fail when the key is absent (else return ``None``).

    Raises:
        UserError: Missing (when required), not a finite number, or not positive.
    """
    value = lookup(obj, key, None)
    if value is None:
        if required:
            raise fail(path, key, "missing", "the record needs it; pass the file the tool wrote")
        return None
    if not is_number(value):
        raise fail(path, key, f"must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise fail(
            path,
            key,
            f"must be a positive number, got {value!r}",
            "a zero or negative figure is not a measurement; check the run",
        )
    return float(value)


@overload
def text(
    obj: Mapping[str, Any], key: str, path: Path | str, *, required: Literal[True] = True
) -> str: ...
@overload
def text(obj: Mapping[str, Any], key: str, path: Path | str, *, required: bool) -> str | None: ...
def text(
    obj: Mapping[str, Any], key: str, path: Path | str, *, required: bool = True
) -> str | None:
    """Return the non-empty string at ``key`` (``None`` when absent and not required)."""
    value = lookup(obj, key, None)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise fail(path, key, "missing", "the record needs it; pass the file the tool wrote")
        return None
    if not isinstance(value, str):
        raise fail(path, key, f"must be text, got {value!r}")
    return value.strip()


def stable_id(prefix: str, *parts: object) -> str:
    """A record id derived from content, so that importing the same input twice gives one id.

    Args:
        prefix: Short lower-case prefix naming the format (``mleb``, ``lmev``, ...).
        *parts: JSON-compatible values identifying the record (file hash, task, metric).

    Returns:
        ``prefix`` followed by hex digits, 32 characters in all.
    """
    return prefix + sha256_hex(canonical_json([str(p) for p in parts]))[: 32 - len(prefix)]


def file_sha256(*paths: Path) -> str:
    """SHA-256 of the bytes of ``paths`` (in order), hex."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def utc_from_unix(seconds: float) -> datetime:
    """A timezone-aware UTC datetime from Unix seconds."""
    return datetime.fromtimestamp(float(seconds), tz=UTC)


_HF_CACHE_RE = re.compile(r"models--([^/\\]+)--([^/\\]+)")


def normalise_model_id(raw: str) -> str:
    """The model id as every importer stores it, so energy and quality records join.

    Strips spaces, an ``hf://`` / ``hf:`` prefix and trailing slashes, and turns a Hugging Face
    cache path (``.../models--Qwen--Qwen3-8B/snapshots/<hash>``) into ``Qwen/Qwen3-8B``. Case is
    kept (hub ids are case-sensitive).

    Args:
        raw: The id or path the tool recorded.
    """
    value = raw.strip()
    for prefix in ("hf://", "hf:"):
        if value.startswith(prefix):
            value = value[len(prefix) :]
    match = _HF_CACHE_RE.search(value)
    if match:
        return f"{match.group(1)}/{match.group(2)}"
    return value.rstrip("/\\") or raw.strip()


def normalise_dtype(raw: object) -> str | None:
    """A weight dtype in the records' spelling (``bfloat16``, ``float16``, ``fp8``...).

    Read through the precision vocabulary (:func:`mlenergy.reference.precisions.precision_name`):
    ``torch.bfloat16`` and ``bf16`` both give ``bfloat16``; ``auto``, empty or ``None`` give
    ``None`` (the dtype must come from elsewhere); an unknown spelling (``int8``) is kept
    lower-cased.
    """
    key = spelling(raw)
    return None if key is None else precision_name(key) or key


@dataclass(frozen=True)
class AcceleratorSpec:
    """A GPU resolved through the GPU catalog (:mod:`mlenergy.reference.gpus`)."""

    name: str
    memory_gb: float
    tdp_w: float


def resolve_accelerator(name: str, path: Path | str, key: str) -> AcceleratorSpec:
    """Resolve a GPU name as a tool wrote it (``H100``, ``NVIDIA A100-SXM4-80GB``) to the catalog.

    Names are never read as spec-file paths: they come from files people send.

    Raises:
        UserError: The name matches no catalog GPU; the message lists the names that resolve.
    """
    spec = find_gpu(name)
    if spec is None:
        raise fail(
            path,
            key,
            f"unknown GPU {name!r}",
            f"pass --gpu with one of {', '.join(catalog_names())} "
            "(vendor words, memory sizes and SXM suffixes may differ: 'NVIDIA H100 80GB HBM3')",
        )
    return AcceleratorSpec(spec.name, spec.memory_gb, spec.tdp_w)


def model_info(
    model_id: str,
    dtype: str,
    *,
    configs_dir: Path | None,
    path: Path | str,
    key: str,
    total_b: float | None = None,
    active_b: float | None = None,
    weights: Weights = "pretrained",
    sizes_optional: bool = False,
) -> tuple[ModelInfo | ModelRef, str, str | None]:
    """Describe a model from its ``config.json`` (the estimator's one resolution rule).

    Falls back to published parameter counts in billions when no config is found; the
    fingerprint is then derived from the model id, the same way for every importer, so the
    energy and quality records of one model still join.

    Args:
        model_id: Normalised model id.
        dtype: Weight dtype.
        configs_dir: Folder of ``<org>__<name>.json`` configs (``None``: the reference's).
        path: The file being imported (for the message).
        key: The key the model id came from (for the message).
        total_b: Published total parameters in billions, if the input has them.
        active_b: Published active parameters in billions.
        weights: ``pretrained`` or ``random``.
        sizes_optional: With no config and no count, describe the model by its id alone
            (:class:`~mlenergy.records.quality.ModelRef`; quality needs no size) instead of
            failing.

    Returns:
        The model info, where its counts came from, and the config's ``torch_dtype``.

    Raises:
        UserError: No config and no parameter count (says where to put the config).
    """
    folder = configs_dir if configs_dir is not None else default_configs_dir()
    if folder.is_dir():
        try:
            found = resolve_model_config(model_id, folder).path
            config = json.loads(found.read_text(encoding="utf-8"))
            info = model_info_from_config(config, model_id, dtype, weights)
            return info, f"config:{found.name}", normalise_dtype(config.get("torch_dtype"))
        except (UserError, ValueError, KeyError, TypeError):
            pass  # fall back to the published counts below
    if total_b is None and sizes_optional:
        return model_ref(model_id, dtype), "the model id only (sizes unknown)", None
    if total_b is None:
        where = f" in {folder}" if folder is not None else ""
        raise fail(
            path,
            key,
            f"no config.json for model {model_id!r}{where} and no parameter count in the file",
            f"put the model's config.json in a folder as {model_id.replace('/', '__')}.json "
            "and pass it with --configs-dir",
        )
    info, source = published_model_info(model_id, dtype, total_b, active_b)
    return info.model_copy(update={"weights": weights}), source, None


@overload
def describe_model(
    model_id: str,
    dtype: str | None,
    *,
    configs_dir: Path | None,
    path: Path | str,
    key: str,
    notes: list[str],
    why_no_dtype: str = "the file names none",
    total_b: float | None = None,
    active_b: float | None = None,
    weights: Weights = "pretrained",
    sizes_optional: Literal[False] = False,
) -> tuple[ModelInfo, str]: ...
@overload
def describe_model(
    model_id: str,
    dtype: str | None,
    *,
    configs_dir: Path | None,
    path: Path | str,
    key: str,
    notes: list[str],
    why_no_dtype: str = "the file names none",
    total_b: float | None = None,
    active_b: float | None = None,
    weights: Weights = "pretrained",
    sizes_optional: bool,
) -> tuple[ModelInfo | ModelRef, str]: ...
def describe_model(
    model_id: str,
    dtype: str | None,
    *,
    configs_dir: Path | None,
    path: Path | str,
    key: str,
    notes: list[str],
    why_no_dtype: str = "the file names none",
    total_b: float | None = None,
    active_b: float | None = None,
    weights: Weights = "pretrained",
    sizes_optional: bool = False,
) -> tuple[ModelInfo | ModelRef, str]:
    """:func:`model_info`, with the config's ``torch_dtype`` when ``dtype`` is ``None``.

    Appends to ``notes`` where the counts came from and, when the dtype was assumed, why.

    Returns:
        The model info and where its counts came from.
    """
    model, source, config_dtype = model_info(
        model_id,
        dtype or "unknown",
        configs_dir=configs_dir,
        path=path,
        key=key,
        total_b=total_b,
        active_b=active_b,
        weights=weights,
        sizes_optional=sizes_optional,
    )
    if isinstance(model, ModelRef):
        notes.append(
            f"model {model_id}: no config.json and no parameter count, so its scores are imported "
            "by model id; its sizes attach when its energy records or a config are known"
        )
        return model, source
    notes.append(f"model {model_id}: architecture and parameter counts from {source}")
    if dtype is None:
        model = model.model_copy(update={"dtype": config_dtype or "unknown"})
        notes.append(f"dtype {model.dtype} assumed from the model config ({why_no_dtype})")
    return model, source


def imported_software(
    *,
    python: str | None = None,
    torch: str | None = None,
    transformers: str | None = None,
    zeus: str | None = None,
    engine: str | None = None,
) -> Software:
    """Software of an imported record: what the input recorded, ``None`` where it did not.

    ``python`` is required by the schema and becomes ``"unknown"`` when not recorded.
    """
    return Software(
        python=python or "unknown",
        torch=torch,
        transformers=transformers,
        zeus=zeus,
        mlenergy=IMPORTED_MLENERGY,
        engine=engine,
    )
