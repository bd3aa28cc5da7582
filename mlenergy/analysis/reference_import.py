"""Import the ML.ENERGY Leaderboard's published measurements as run records.

The files (``mlenergy-leaderboard/v3_llm.csv``, ``v2_chat_h100.csv``, ``v2_code_h100.csv``
under the shared reference folder) are read at run time and never copied into the repository.
They were measured by ML.ENERGY with Zeus on NVML energy counters while vLLM served the model,
so every record says ``energy_source="measured:zeus-nvml"``, names vLLM's version in
``Software.engine`` and carries ``SubmissionInfo(submitter="ML.ENERGY Leaderboard v3")``
(``v2`` for the older files).

What the tables do not contain is labelled rather than invented: prompt lengths are unknown
(``input_tokens=0`` with tag ``input_tokens=unknown``), and so is the number of requests. The
per-token energy, power, throughput and latency are exactly as published; the absolute
``energy_j``/``duration_s``/``tokens`` of the request phase are scaled to ``num_requests =
max_num_seqs`` (tag ``normalisation``). Records are deterministic (run ids and timestamps
derive from the row), so importing twice adds nothing the second time.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from mlenergy.errors import UserError
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

ENERGY_SOURCE = "measured:zeus-nvml"
V3_FILE = "v3_llm.csv"
V2_FILES = {"v2_chat_h100.csv": "v2-sharegpt-chat", "v2_code_h100.csv": "v2-code"}
V3_DATE = datetime(2026, 2, 16, tzinfo=UTC)
V2_DATE = datetime(2024, 9, 1, tzinfo=UTC)
V3_ENGINE = "vllm 0.11.1"
V2_ENGINE = "vllm 0.5.4"
GPU_NAMES = {
    "H100": "H100-SXM5-80GB",
    "NVIDIA H100 80GB HBM3": "H100-SXM5-80GB",
    "B200": "B200",
}
"""CSV GPU names to the hardware catalog's names."""


@dataclass(frozen=True)
class ModelFacts:
    """What the reference config says about a model (``None`` where no config was found)."""

    fingerprint: str
    architecture: str
    is_moe: bool
    num_experts: int | None
    experts_per_token: int | None
    num_shared_experts: int | None
    total_params: int
    active_params: int
    torch_dtype: str | None
    source: str


def _config_path(model_id: str, config_dir: Path) -> Path | None:
    """The config describing ``model_id``: the estimator's one resolution rule, or ``None``."""
    from mlenergy.errors import UserError
    from mlenergy.estimate.inputs import resolve_model_config

    try:
        return resolve_model_config(model_id, config_dir).path
    except UserError:
        return None


def model_facts(
    model_id: str, config_dir: Path, total_b: float | None, active_b: float | None, moe_hint: bool
) -> ModelFacts:
    """Describe a reference model from its config, falling back to the published billions.

    Args:
        model_id: Hub id as in the CSV.
        config_dir: The ``model-configs`` folder.
        total_b: Published total parameters in billions (fallback).
        active_b: Published active parameters in billions (fallback).
        moe_hint: The CSV says the model is MoE (used when no config exists).

    Returns:
        The facts, with ``source`` naming where counts and fingerprint came from.
    """
    path = _config_path(model_id, config_dir)
    if path is not None:
        try:
            from mlenergy.models.architecture import ArchitectureSpec, count_parameters
            from mlenergy.models.info import config_fingerprint

            config = json.loads(path.read_text(encoding="utf-8"))
            spec = ArchitectureSpec.from_config(config)
            counts = count_parameters(spec)
            return ModelFacts(
                fingerprint=config_fingerprint(config),
                architecture=spec.model_type,
                is_moe=spec.is_moe,
                num_experts=spec.num_experts if spec.is_moe else None,
                experts_per_token=spec.experts_per_token if spec.is_moe else None,
                num_shared_experts=spec.num_shared_experts if spec.is_moe else None,
                total_params=counts.total,
                active_params=counts.active,
                torch_dtype=config.get("torch_dtype"),
                source=f"config:{path.name}",
            )
        except (ImportError, UserError, ValueError, KeyError, TypeError):
            pass  # fall back to the published figures below
    if total_b is None:
        raise UserError(
            f"no model config for {model_id!r} and no published parameter count",
            f"add {model_id.replace('/', '__')}.json to {config_dir}",
        )
    total = round(total_b * 1e9)
    active = min(total, round((active_b or total_b) * 1e9))
    return ModelFacts(
        fingerprint=sha256_hex(canonical_json({"model_id": model_id}))[:16],
        architecture="unknown",
        is_moe=False,  # without a config the expert shape is unknown; labelled via tags
        num_experts=None,
        experts_per_token=None,
        num_shared_experts=None,
        total_params=total,
        active_params=active,
        torch_dtype=None,
        source="published-billions" + (" (MoE per CSV; expert shape unknown)" if moe_hint else ""),
    )


def _float(row: dict[str, str], key: str) -> float | None:
    raw = (row.get(key) or "").strip()
    if not raw:
        return None
    value = float(raw)
    return value if math.isfinite(value) else None


def _software(engine: str) -> Software:
    """What is known of the software: the serving engine; the rest was not published.

    ``mlenergy`` says the record was imported, not measured by this project; it carries no
    version so that the record (and its content hash) stays the same across our releases.
    """
    return Software(
        python="unknown",
        torch=None,
        transformers=None,
        zeus="unknown",
        mlenergy="not used (imported)",
        engine=engine,
    )


def _record(
    *,
    key: str,
    model: ModelInfo,
    facts: ModelFacts,
    task: str,
    gpu: str,
    num_gpus: int,
    tp: int,
    ep: int,
    dp: int,
    pp: int,
    max_num_seqs: int,
    avg_batch: float | None,
    output_len: float,
    energy_per_token_j: float,
    throughput: float,
    itl_s: tuple[float | None, float | None, float | None],
    date: datetime,
    engine: str,
    submitter: str,
    extra_tags: dict[str, str],
) -> RunRecord:
    output_tokens = max(1, round(output_len))
    tokens = output_tokens * max_num_seqs
    duration = tokens / throughput
    energy = energy_per_token_j * tokens
    phase = PhaseResult(
        phase=Phase.REQUEST,
        duration_s=duration,
        energy_j=energy,
        avg_power_w=energy / duration,
        tokens=tokens,
        energy_per_token_j=energy_per_token_j,
        throughput_tokens_per_s=throughput,
        itl_p50_s=itl_s[0],
        itl_p90_s=itl_s[1],
        itl_p99_s=itl_s[2],
    )
    tags = {
        "origin": submitter,
        "input_tokens": "unknown",
        "num_requests": "unknown",
        "normalisation": "energy_j, duration_s and tokens scaled to num_requests=max_num_seqs",
        "model_facts": facts.source,
        **extra_tags,
    }
    return RunRecord(
        run_id="ref" + sha256_hex(key)[:29],
        created_at=date,
        model=model,
        workload=Workload(
            kind="inference",
            task=task,
            batch_size=max_num_seqs,
            avg_batch_size=avg_batch if avg_batch and avg_batch > 0 else None,
            max_num_seqs=max_num_seqs,
            input_tokens=0,
            output_tokens=output_tokens,
            num_requests=max_num_seqs,
            prompt_source=f"{task} ({submitter})",
            device="cuda",
            tensor_parallel=tp,
            expert_parallel=ep,
            data_parallel=dp,
            pipeline_parallel=pp,
        ),
        hardware=Hardware(accelerator_model=gpu, accelerator_count=num_gpus),
        software=_software(engine),
        energy_source=ENERGY_SOURCE,
        scope=MeasuredScope(
            gpu_indices=tuple(range(num_gpus)),
            description=(
                "GPU energy from NVML counters via Zeus, summed over all GPUs of the "
                "configuration, steady-state window only (vLLM serving, measured by ML.ENERGY)"
            ),
        ),
        phases=(phase,),
        tags=tags,
        submission=SubmissionInfo(
            submission_id=sha256_hex(submitter)[:16],
            submitter=submitter,
            submitted_at=date,
            approved_at=date,
        ),
    )


def _model_info(facts: ModelFacts, model_id: str, dtype: str) -> ModelInfo:
    return ModelInfo(
        model_id=model_id,
        config_fingerprint=facts.fingerprint,
        architecture=facts.architecture,
        is_moe=facts.is_moe,
        num_experts=facts.num_experts,
        experts_per_token=facts.experts_per_token,
        num_shared_experts=facts.num_shared_experts,
        total_params=facts.total_params,
        active_params=facts.active_params,
        dtype=dtype,
        weights="pretrained",
    )


def read_v3(path: Path, config_dir: Path) -> list[RunRecord]:
    """Turn every row of ``v3_llm.csv`` into a run record (see the module docstring)."""
    records: list[RunRecord] = []
    cache: dict[str, ModelFacts] = {}
    with path.open(newline="", encoding="utf-8") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            model_id = row["model_id"]
            if model_id not in cache:
                cache[model_id] = model_facts(
                    model_id,
                    config_dir,
                    _float(row, "total_params_billions"),
                    _float(row, "activated_params_billions"),
                    row.get("architecture", "") == "MoE",
                )
            facts = cache[model_id]
            ms = [_float(row, k) for k in ("median_itl_ms", "p90_itl_ms", "p99_itl_ms")]
            records.append(
                _record(
                    key=f"{path.name}:{i}:{canonical_json(row)}",
                    model=_model_info(facts, model_id, row["weight_precision"]),
                    facts=facts,
                    task=row["task"],
                    gpu=GPU_NAMES.get(row["gpu_model"], row["gpu_model"]),
                    num_gpus=int(row["num_gpus"]),
                    tp=int(row["tensor_parallel"]),
                    ep=int(row["expert_parallel"]),
                    dp=int(row["data_parallel"]),
                    pp=1,
                    max_num_seqs=int(row["max_num_seqs"]),
                    avg_batch=_float(row, "avg_batch_size"),
                    output_len=float(row["avg_output_len"]),
                    energy_per_token_j=float(row["energy_per_token_joules"]),
                    throughput=float(row["output_throughput_tokens_per_sec"]),
                    itl_s=tuple(m / 1000.0 if m is not None else None for m in ms),  # type: ignore[arg-type]
                    date=V3_DATE,
                    engine=V3_ENGINE,
                    submitter="ML.ENERGY Leaderboard v3",
                    extra_tags={"nickname": row.get("nickname", "")},
                )
            )
    return records


def read_v2(path: Path, task: str, config_dir: Path) -> list[RunRecord]:
    """Turn every row of a v2 CSV (H100, vLLM 0.5.4) into a run record.

    Energy per output token is ``Energy/req (J) / Avg Output Tokens``; ``Avg TPOT (s)``, the
    mean time per output token, fills ``itl_p50_s`` (tag ``itl``). The dtype is the config's
    ``torch_dtype`` (vLLM's ``dtype=auto``).
    """
    records: list[RunRecord] = []
    cache: dict[str, ModelFacts] = {}
    with path.open(newline="", encoding="utf-8") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            model_id = row["Model"]
            if model_id not in cache:
                cache[model_id] = model_facts(model_id, config_dir, None, None, False)
            facts = cache[model_id]
            out_len = float(row["Avg Output Tokens"])
            num_gpus = int(row["TP"]) * int(row["PP"])
            records.append(
                _record(
                    key=f"{path.name}:{i}:{canonical_json(row)}",
                    model=_model_info(facts, model_id, facts.torch_dtype or "unknown"),
                    facts=facts,
                    task=task,
                    gpu=GPU_NAMES.get(row["GPU"], row["GPU"]),
                    num_gpus=num_gpus,
                    tp=int(row["TP"]),
                    ep=1,
                    dp=1,
                    pp=int(row["PP"]),
                    max_num_seqs=int(row["Max BS (reqs)"]),
                    avg_batch=_float(row, "Avg BS (reqs)"),
                    output_len=out_len,
                    energy_per_token_j=float(row["Energy/req (J)"]) / out_len,
                    throughput=float(row["Token tput (tok/s)"]),
                    itl_s=(_float(row, "Avg TPOT (s)"), None, None),
                    date=V2_DATE,
                    engine=V2_ENGINE,
                    submitter="ML.ENERGY Leaderboard v2",
                    extra_tags={
                        "itl": "itl_p50_s holds the mean time per output token (Avg TPOT)",
                        "dtype": "config torch_dtype (vLLM dtype=auto)",
                    },
                )
            )
    return records


def read_reference(reference_dir: Path) -> list[RunRecord]:
    """Read every ML.ENERGY reference table under ``reference_dir`` into run records.

    Args:
        reference_dir: The shared reference folder (holding ``mlenergy-leaderboard/`` and
            ``model-configs/``).

    Returns:
        The records, v3 first.

    Raises:
        UserError: If the folder holds no leaderboard table.
    """
    folder = Path(reference_dir) / "mlenergy-leaderboard"
    config_dir = Path(reference_dir) / "model-configs"
    if not folder.is_dir():
        raise UserError(
            f"no ML.ENERGY reference tables in {folder}",
            "pass --reference DIR (the shared reference folder) or set $MLENERGY_REFERENCE_DIR",
        )
    records: list[RunRecord] = []
    if (folder / V3_FILE).is_file():
        records += read_v3(folder / V3_FILE, config_dir)
    for name, task in V2_FILES.items():
        if (folder / name).is_file():
            records += read_v2(folder / name, task, config_dir)
    if not records:
        raise UserError(f"{folder} holds none of {V3_FILE}, {', '.join(V2_FILES)}")
    return records


def default_reference_dir() -> Path | None:
    """Return the reference folder: ``$MLENERGY_REFERENCE_DIR``, else ``../shared/reference``.

    Uses :func:`mlenergy.estimate.reference.reference_dir` when the estimator provides it.
    """
    try:
        from mlenergy.estimate.reference import reference_dir

        found = reference_dir()
        return Path(found) if found is not None else None
    except ImportError:
        import os

        env = os.environ.get("MLENERGY_REFERENCE_DIR")
        if env:
            return Path(env)
        guess = Path(__file__).resolve().parents[2] / ".." / "shared" / "reference"
        return guess.resolve() if guess.is_dir() else None


def import_reference(reference_dir: Path | None, data_dir: Path) -> tuple[int, int]:
    """Append the reference records to the store at ``data_dir``.

    Args:
        reference_dir: The shared reference folder (``None``: :func:`default_reference_dir`).
        data_dir: The store folder.

    Returns:
        ``(added, duplicates)``.
    """
    ref = reference_dir if reference_dir is not None else default_reference_dir()
    if ref is None:
        raise UserError(
            "the shared reference folder was not found",
            "pass --reference DIR or set $MLENERGY_REFERENCE_DIR",
        )
    from mlenergy.store import RunStore

    records = read_reference(Path(ref))
    result = RunStore(data_dir).append(records)
    return result.added, result.duplicates
