"""Import lm-evaluation-harness 0.4.x results files (``lm_eval --output_path``).

A results file holds ``results.<task>`` with ``"<metric>,<filter>"`` values and
``"<metric>_stderr,<filter>"`` standard errors (a group's stderr may be the string ``"N/A"``),
``config.model_args`` (a ``k=v,k=v`` string before 0.4.10, a dict after; the dtype lives
there), ``model_name``, ``lm_eval_version``, ``n-samples``, ``n-shot``, ``versions`` and
``higher_is_better``. Every task x metric x filter with a numeric value becomes one
:class:`~mlenergy.records.QualityResult` with its standard error.

The model id is normalised as every importer does it and the model described from the same
``config.json`` as its energy runs, so quality and energy of one model join on the leaderboard
(model id and config fingerprint). The metric is lm-eval's own name, with the filter kept when
it is not ``none`` (``exact_match,strict-match``): two filters are two different figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlenergy.errors import UserError
from mlenergy.importers.common import (
    describe_model,
    fail,
    file_sha256,
    imported_software,
    is_number,
    load_json_object,
    lookup,
    normalise_dtype,
    normalise_model_id,
    stable_id,
    utc_from_unix,
)
from mlenergy.importers.deliver import ImportBatch
from mlenergy.records import ModelInfo, QualityResult, Software
from mlenergy.records.quality import ModelRef

FORMAT = "lm-eval"
TASK_PREFIX = "lm-eval:"
"""Quality tasks are named ``lm-eval:<task>``, as :mod:`mlenergy.quality.lmeval` names them."""
LOWER_IS_BETTER = {"perplexity", "word_perplexity", "byte_perplexity", "bits_per_byte"}
"""Metrics whose direction is known when the file's ``higher_is_better`` does not say."""
_TEXT_KEYS = {"alias", "name", "sample_len", "sample_count", "samples"}
_PY_RE = re.compile(r"Python version: (\d+\.\d+\.\d+)")
_TORCH_RE = re.compile(r"PyTorch version: (\S+)")


@dataclass(frozen=True)
class LmEvalOptions:
    """What the user can add to a results file.

    Attributes:
        configs_dir: Folder of model ``config.json`` files (``<org>__<name>.json``).
        model: Model id, overriding what the file names.
        dtype: Weight dtype, when ``model_args`` has none (or says ``auto``).
    """

    configs_dir: Path | None = None
    model: str | None = None
    dtype: str | None = None


def parse_model_args(raw: object) -> dict[str, str]:
    """``config.model_args`` as a dict: a ``k=v,k=v`` string (before 0.4.10) or a dict."""
    if isinstance(raw, dict):
        return {str(k): str(v) for k, v in raw.items() if v is not None}
    if not isinstance(raw, str):
        return {}
    out: dict[str, str] = {}
    for part in raw.split(","):
        key, sep, value = part.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def _model_id(data: dict[str, Any], args: dict[str, str], path: Path, opts: LmEvalOptions) -> str:
    if opts.model:
        return normalise_model_id(opts.model)
    for value in (data.get("model_name"), args.get("pretrained"), args.get("model")):
        if isinstance(value, str) and value.strip():
            return normalise_model_id(value)
    raise fail(
        path,
        "model_name",
        "missing (and config.model_args names no pretrained model)",
        "pass --model ID",
    )


def _software(data: dict[str, Any]) -> Software:
    env = data.get("pretty_env_info")
    env = env if isinstance(env, str) else ""
    py, torch = _PY_RE.search(env), _TORCH_RE.search(env)
    transformers = data.get("transformers_version")
    return imported_software(
        python=py.group(1) if py else None,
        torch=torch.group(1) if torch else None,
        transformers=transformers if isinstance(transformers, str) else None,
    )


def _metrics(task_results: dict[str, Any]) -> list[tuple[str, str, float, Any]]:
    """``(metric, filter, value, raw stderr)`` of every numeric metric of one task."""
    out = []
    for key, value in task_results.items():
        metric, _, filt = key.partition(",")
        if metric in _TEXT_KEYS or metric.endswith("_stderr") or not is_number(value):
            continue
        stderr = task_results.get(f"{metric}_stderr,{filt}" if filt else f"{metric}_stderr")
        out.append((metric, filt or "none", float(value), stderr))
    return sorted(out)


def _direction(data: dict[str, Any], task: str, metric: str) -> tuple[bool, str | None]:
    value = lookup(data, "higher_is_better", {}).get(task, {})
    if isinstance(value, dict) and isinstance(value.get(metric), bool):
        return value[metric], None
    if metric in LOWER_IS_BETTER:
        return False, None
    return True, f"{task} {metric}: higher_is_better not in the file; assumed higher is better"


def _task_tags(data: dict[str, Any], task: str, version: str) -> dict[str, str]:
    tags = {"origin": f"lm-eval {version}", "imported_from": FORMAT}
    for key, label in (("n-shot", "num_fewshot"), ("versions", "task_version")):
        value = lookup(data, key, {}).get(task) if isinstance(data.get(key), dict) else None
        if value is not None:
            tags[label] = str(value)
    if task in (data.get("groups") or {}):
        tags["group"] = "true"
    limit = lookup(data, "config.limit", None)
    if limit is not None:
        tags["limit"] = str(limit)
    return tags


def _records_of_task(
    data: dict[str, Any],
    task: str,
    task_results: dict[str, Any],
    *,
    model: ModelInfo | ModelRef,
    software: Software,
    digest: str,
    notes: list[str],
    path: Path,
) -> list[QualityResult]:
    """One record per numeric metric of ``task``; the file's ``date`` (else its time) dates them."""
    version = str(data.get("lm_eval_version") or "0.4.x")
    n = (
        lookup(data, "n-samples", {}).get(task, {})
        if isinstance(data.get("n-samples"), dict)
        else {}
    )
    n_eff = n.get("effective") if isinstance(n, dict) else None
    created = data.get("date")
    created_at = utc_from_unix(created if is_number(created) else int(path.stat().st_mtime))
    records = []
    for metric, filt, value, stderr in _metrics(task_results):
        name = metric if filt == "none" else f"{metric},{filt}"
        higher, note = _direction(data, task, metric)
        if note:
            notes.append(note)
        tags = {**_task_tags(data, task, version), "filter": filt, "source_sha256": digest}
        if stderr == "N/A":
            tags["stderr"] = "N/A in the file"
        good_stderr = is_number(stderr) and stderr >= 0
        records.append(
            QualityResult(
                quality_id=stable_id("lmev", digest, task, name),
                created_at=created_at,
                model=model,
                software=software,
                task=f"{TASK_PREFIX}{task}",
                metric=name,
                value=value,
                stderr=float(stderr) if good_stderr else None,
                higher_is_better=higher,
                num_samples=int(n_eff) if isinstance(n_eff, int) and n_eff >= 0 else None,
                dataset=f"lm-eval:{task}",
                tags=tags,
            )
        )
    return records


def results_files(paths: list[Path]) -> list[Path]:
    """The results files to read: each file as given; for a folder every ``results_*.json`` below.

    lm-eval writes ``--output_path OUT`` as ``OUT/<model>/results_<time>.json``, so the folder
    a user passed to lm-eval can be passed here as it is.

    Raises:
        UserError: A folder holds no ``results_*.json``.
    """
    out: list[Path] = []
    for path in paths:
        if not path.is_dir():
            out.append(path)
            continue
        found = sorted(path.rglob("results_*.json"))
        if not found:
            raise UserError(
                f"{path} is a folder with no lm-eval results_*.json below it",
                "pass the results files, or the --output_path folder lm-eval wrote",
            )
        out += found
    return out


def read_results(path: Path, opts: LmEvalOptions | None = None) -> ImportBatch:
    """Read one lm-eval results JSON into quality records.

    Args:
        path: The ``results_*.json`` file.
        opts: Additions the file lacks (see :class:`LmEvalOptions`).

    Raises:
        UserError: Not a results file, no model id, or no numeric metric (names file and key).
    """
    opts = opts or LmEvalOptions()
    data = load_json_object(path)
    results = data.get("results")
    if not isinstance(results, dict) or not results:
        raise fail(path, "results", "missing or empty", "pass a results_*.json written by lm_eval")
    args = parse_model_args(lookup(data, "config.model_args", None))
    model_id = _model_id(data, args, path, opts)
    dtype = normalise_dtype(opts.dtype) or normalise_dtype(
        args.get("dtype") or args.get("torch_dtype")
    )
    notes: list[str] = []
    params = lookup(data, "config.model_num_parameters", None)
    model, _ = describe_model(
        model_id,
        dtype,
        configs_dir=opts.configs_dir,
        path=path,
        key="model_name",
        notes=notes,
        why_no_dtype="config.model_args gives none or 'auto'",
        total_b=params / 1e9 if is_number(params) and params > 0 else None,
        sizes_optional=True,
    )
    digest = file_sha256(path)
    software = _software(data)
    records: list[QualityResult] = []
    for task in sorted(results):
        task_results = results[task]
        if isinstance(task_results, dict):
            records += _records_of_task(
                data,
                task,
                task_results,
                model=model,
                software=software,
                digest=digest,
                notes=notes,
                path=path,
            )
    if not records:
        raise fail(
            path,
            "results",
            'no numeric metric in any task (values like "N/A" are not figures)',
            "pass a results file with at least one '<metric>,<filter>' number",
        )
    return ImportBatch(FORMAT, path, tuple(records), tuple(dict.fromkeys(notes)))
