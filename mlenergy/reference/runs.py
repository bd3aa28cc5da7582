"""The one reader of the ML.ENERGY reference measurements: every row becomes a ``RunRecord``.

The files (``mlenergy-leaderboard/v3_llm.csv``, ``v2_chat_h100.csv``, ``v2_code_h100.csv``
of the reference data shipped with mlenergy, see :mod:`mlenergy.reference`) are read at run
time. They were measured by ML.ENERGY with Zeus on NVML
energy counters while vLLM served the model, so every record says
``energy_source="measured:zeus-nvml"``, names vLLM's version in ``Software.engine`` and
carries ``SubmissionInfo(submitter="ML.ENERGY Leaderboard v3")`` (``v2`` for the older files).

One vocabulary: GPUs by the GPU catalog's names (its one matcher,
:func:`~mlenergy.reference.gpus.catalog_name`), tasks by the estimator's labels
(``lm-arena-chat``... for v3; ``sharegpt-chat`` and ``code`` for v2, see
:mod:`~mlenergy.estimate.engines`), engines as ``vllm <version>``. The model of each row is
described by :func:`mlenergy.models.info.model_info_from_config` from the config the
estimator's resolution rule finds (:mod:`~mlenergy.estimate.configs`), so this reader sits
above the estimator (see ``tests/test_layering.py``).

What the tables do not contain is labelled rather than invented: prompt lengths are unknown
(``input_tokens=0`` with tag ``input_tokens=unknown``), and so is the number of requests. The
per-token energy, power, throughput and latency are exactly as published, and so is the mean
output length (``Workload.avg_output_tokens``); the absolute ``energy_j``/``duration_s``/
``tokens`` of the request phase are scaled to ``num_requests = max_num_seqs`` (tag
``normalisation``). Records are deterministic (run ids and timestamps derive from the row), so
importing twice adds nothing the second time.
"""

from __future__ import annotations

import csv
import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from mlenergy.errors import UserError
from mlenergy.estimate.configs import resolve_model_config
from mlenergy.models.info import model_info_from_config
from mlenergy.records import (
    Hardware,
    MeasuredScope,
    ModelInfo,
    Phase,
    PhaseResult,
    RunRecord,
    Software,
    SubmissionInfo,
    Workload,
    canonical_json,
    sha256_hex,
)
from mlenergy.reference import REFERENCE_ENV, reference_dir
from mlenergy.reference.gpus import catalog_name

__all__ = ["read_reference"]

ENERGY_SOURCE = "measured:zeus-nvml"
V3_FILE = "v3_llm.csv"
V2_FILES = {"v2_chat_h100.csv": "sharegpt-chat", "v2_code_h100.csv": "code"}
"""The v2 tables and the task each measured (the estimator's labels of the 2024 tasks)."""
V3_DATE = datetime(2026, 2, 16, tzinfo=UTC)
V2_DATE = datetime(2024, 9, 1, tzinfo=UTC)
V3_ENGINE = "vllm 0.11.1"
V2_ENGINE = "vllm 0.5.4"
V3_SUBMITTER = "ML.ENERGY Leaderboard v3"
V2_SUBMITTER = "ML.ENERGY Leaderboard v2"


@dataclass(frozen=True)
class _Row:
    """One reference row in the reader's terms (units in the names)."""

    key: str
    task: str
    gpu: str
    num_gpus: int
    tp: int
    ep: int
    dp: int
    pp: int
    max_num_seqs: int
    avg_batch: float | None
    output_len: float
    energy_per_token_j: float
    throughput_tokens_per_s: float
    avg_power_w: float
    itl_s: tuple[float | None, float | None, float | None]


def _float(row: dict[str, str], key: str) -> float | None:
    raw = (row.get(key) or "").strip()
    if not raw:
        return None
    value = float(raw)
    return value if math.isfinite(value) else None


def published_model_info(
    model_id: str, dtype: str, total_b: float | None, active_b: float | None
) -> tuple[ModelInfo, str]:
    """A model described by its published billions (no config found): ``(info, source)``.

    Args:
        model_id: Hub id.
        dtype: Weight precision.
        total_b: Published total parameters in billions.
        active_b: Published active parameters in billions (``None``: the total).

    Raises:
        UserError: ``total_b`` is ``None``.
    """
    if total_b is None:
        raise UserError(
            f"no model config for {model_id!r} and no published parameter count",
            f"add {model_id.replace('/', '__')}.json to the reference's model-configs folder",
        )
    total = round(total_b * 1e9)
    info = ModelInfo(
        model_id=model_id,
        config_fingerprint=sha256_hex(canonical_json({"model_id": model_id}))[:16],
        architecture="unknown",
        is_moe=False,  # without a config the expert shape is unknown (tag model_facts)
        total_params=total,
        active_params=min(total, round((active_b or total_b) * 1e9)),
        dtype=dtype,
        weights="pretrained",
    )
    return info, "published-billions"


def describe_model(
    model_id: str,
    dtype: str | None,
    config_dir: Path,
    total_b: float | None = None,
    active_b: float | None = None,
) -> tuple[ModelInfo, str]:
    """The :class:`ModelInfo` of a reference model and where its description came from.

    Args:
        model_id: Hub id as in the CSV.
        dtype: Weight precision as published (``None``: the config's ``torch_dtype``).
        config_dir: The ``model-configs`` folder.
        total_b: Published total parameters in billions (fallback without a config).
        active_b: Published active parameters in billions (fallback).

    Returns:
        ``(info, source)``: ``source`` is ``config:<file>`` or ``published-billions``.

    Raises:
        UserError: Neither a usable config nor a published parameter count exists.
    """
    try:
        path = resolve_model_config(model_id, config_dir).path
        config = json.loads(path.read_text(encoding="utf-8"))
        as_run = dtype or config.get("torch_dtype") or "unknown"
        info = model_info_from_config(config, model_id, as_run, "pretrained")
        return info, f"config:{path.name}"
    except (UserError, ValueError, KeyError, TypeError):
        return published_model_info(model_id, dtype or "unknown", total_b, active_b)


def _record(row: _Row, model: ModelInfo, *, source: str, v2: bool, tags: dict[str, str]):
    output_tokens = max(1, round(row.output_len))
    tokens = output_tokens * row.max_num_seqs
    duration = tokens / row.throughput_tokens_per_s
    energy = row.energy_per_token_j * tokens  # so that energy / tokens is as published
    submitter = V2_SUBMITTER if v2 else V3_SUBMITTER
    date = V2_DATE if v2 else V3_DATE
    phase = PhaseResult(
        phase=Phase.REQUEST,
        duration_s=duration,
        energy_j=energy,
        avg_power_w=row.avg_power_w,
        tokens=tokens,
        energy_per_token_j=row.energy_per_token_j,
        throughput_tokens_per_s=row.throughput_tokens_per_s,
        itl_p50_s=row.itl_s[0],
        itl_p90_s=row.itl_s[1],
        itl_p99_s=row.itl_s[2],
    )
    workload = Workload(
        kind="inference",
        task=row.task,
        batch_size=row.max_num_seqs,
        avg_batch_size=row.avg_batch if row.avg_batch and row.avg_batch > 0 else None,
        max_num_seqs=row.max_num_seqs,
        input_tokens=0,
        output_tokens=output_tokens,
        num_requests=row.max_num_seqs,
        prompt_source=f"{row.task} ({submitter})",
        device="cuda",
        tensor_parallel=row.tp,
        expert_parallel=row.ep,
        data_parallel=row.dp,
        pipeline_parallel=row.pp,
        avg_output_tokens=row.output_len,
        method="serving-steady-state",
    )
    return RunRecord(
        run_id="ref" + sha256_hex(row.key)[:29],
        created_at=date,
        model=model,
        workload=workload,
        hardware=Hardware(accelerator_model=row.gpu, accelerator_count=row.num_gpus),
        software=Software(
            python="unknown",
            zeus="unknown",
            mlenergy="not used (imported)",  # no version: the record stays the same across ours
            engine=V2_ENGINE if v2 else V3_ENGINE,
        ),
        energy_source=ENERGY_SOURCE,
        scope=MeasuredScope(
            gpu_indices=tuple(range(row.num_gpus)),
            description=(
                "GPU energy from NVML counters via Zeus, summed over all GPUs of the "
                "configuration, steady-state window only (vLLM serving, measured by ML.ENERGY)"
            ),
        ),
        phases=(phase,),
        tags={
            "origin": submitter,
            "input_tokens": "unknown",
            "num_requests": "unknown",
            "normalisation": "energy_j, duration_s and tokens scaled to num_requests=max_num_seqs",
            "model_facts": source,
            **tags,
        },
        submission=SubmissionInfo(
            submission_id=sha256_hex(submitter)[:16],
            submitter=submitter,
            submitted_at=date,
            approved_at=date,
        ),
    )


Describe = Callable[..., tuple[ModelInfo, str]]
""":func:`describe_model` or a memo of it (the tables repeat each model on many rows)."""


def read_v3(path: Path, config_dir: Path, describe: Describe = describe_model) -> list[RunRecord]:
    """Turn every row of ``v3_llm.csv`` into a run record (see the module docstring).

    ``describe`` describes each row's model (:func:`describe_model`, or a memo of it).
    """
    records: list[RunRecord] = []
    with path.open(newline="", encoding="utf-8") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            model, source = describe(
                row["model_id"],
                row["weight_precision"],
                config_dir,
                _float(row, "total_params_billions"),
                _float(row, "activated_params_billions"),
            )
            p50, p90, p99 = (
                None if (v := _float(row, k)) is None else v / 1000.0
                for k in ("median_itl_ms", "p90_itl_ms", "p99_itl_ms")
            )
            parsed = _Row(
                key=f"{path.name}:{i}:{canonical_json(row)}",
                task=row["task"],
                gpu=catalog_name(row["gpu_model"]),
                num_gpus=int(row["num_gpus"]),
                tp=int(row["tensor_parallel"]),
                ep=int(row["expert_parallel"]),
                dp=int(row["data_parallel"]),
                pp=1,
                max_num_seqs=int(row["max_num_seqs"]),
                avg_batch=_float(row, "avg_batch_size"),
                output_len=float(row["avg_output_len"]),
                energy_per_token_j=float(row["energy_per_token_joules"]),
                throughput_tokens_per_s=float(row["output_throughput_tokens_per_sec"]),
                avg_power_w=float(row["avg_power_watts"]),
                itl_s=(p50, p90, p99),
            )
            tags = {"nickname": row.get("nickname", "")}
            records.append(_record(parsed, model, source=source, v2=False, tags=tags))
    return records


def read_v2(
    path: Path, task: str, config_dir: Path, describe: Describe = describe_model
) -> list[RunRecord]:
    """Turn every row of a v2 CSV (H100, vLLM 0.5.4) into a run record.

    Energy per output token is ``Energy/req (J) / Avg Output Tokens``; ``Avg TPOT (s)``, the
    mean time per output token, fills ``itl_p50_s`` (tag ``itl``). The dtype is the config's
    ``torch_dtype`` (vLLM's ``dtype=auto``). ``describe`` as in :func:`read_v3`.
    """
    records: list[RunRecord] = []
    with path.open(newline="", encoding="utf-8") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            model, source = describe(row["Model"], None, config_dir)
            out_len = float(row["Avg Output Tokens"])
            energy_per_token_j = float(row["Energy/req (J)"]) / out_len
            throughput = float(row["Token tput (tok/s)"])
            parsed = _Row(
                key=f"{path.name}:{i}:{canonical_json(row)}",
                task=task,
                gpu=catalog_name(row["GPU"]),
                num_gpus=int(row["TP"]) * int(row["PP"]),
                tp=int(row["TP"]),
                ep=1,
                dp=1,
                pp=int(row["PP"]),
                max_num_seqs=int(row["Max BS (reqs)"]),
                avg_batch=_float(row, "Avg BS (reqs)"),
                output_len=out_len,
                energy_per_token_j=energy_per_token_j,
                throughput_tokens_per_s=throughput,
                avg_power_w=energy_per_token_j * throughput,  # not published: derived
                itl_s=(_float(row, "Avg TPOT (s)"), None, None),
            )
            tags = {
                "itl": "itl_p50_s holds the mean time per output token (Avg TPOT)",
                "dtype": "config torch_dtype (vLLM dtype=auto)",
            }
            records.append(_record(parsed, model, source=source, v2=True, tags=tags))
    return records


def leaderboard_folder(root: str | Path | None = None) -> Path:
    """The folder holding ``v3_llm.csv``: ``root`` itself or its ``mlenergy-leaderboard/``.

    Args:
        root: The shared reference folder or its leaderboard subfolder (default:
            :func:`~mlenergy.reference.reference_dir`).

    Raises:
        UserError: No reference folder, or no leaderboard table in it.
    """
    base = Path(root) if root is not None else reference_dir()
    board = base if (base / V3_FILE).is_file() else base / "mlenergy-leaderboard"
    if not any((board / name).is_file() for name in (V3_FILE, *V2_FILES)):
        raise UserError(
            f"no ML.ENERGY reference tables ({V3_FILE}, {', '.join(V2_FILES)}) in {board}",
            f"pass --reference DIR (a folder laid out like the shipped reference) or unset "
            f"${REFERENCE_ENV}",
        )
    return board


def read_reference(root: str | Path | None = None, include_v2: bool = True) -> list[RunRecord]:
    """Read every ML.ENERGY reference table into run records, v3 first.

    Args:
        root: The shared reference folder (holding ``mlenergy-leaderboard/`` and
            ``model-configs/``) or its leaderboard subfolder; default
            :func:`~mlenergy.reference.reference_dir`.
        include_v2: Also read the 2024 v2 tables (engine ``vllm 0.5.4``).

    Raises:
        UserError: The folder is missing or holds no leaderboard table.
    """
    board = leaderboard_folder(root)
    config_dir = board.parent / "model-configs"
    # Each model is described once per reading: its rows repeat it (26 models on 673 v3 rows).
    describe = functools.cache(describe_model)
    records: list[RunRecord] = []
    if (board / V3_FILE).is_file():
        records += read_v3(board / V3_FILE, config_dir, describe)
    for name, task in V2_FILES.items():
        if include_v2 and (board / name).is_file():
            records += read_v2(board / name, task, config_dir, describe)
    return records
