"""A small fixture of measured GPU runs and published-quality rows for the measured study.

Models (all on one GPU, ``B200``):

* ``org/dense-a``: dense, GPQA-Diamond scores in both modes (thinking 70, non-thinking 50) and an
  LMArena score; gpqa runs are long (thinking), chat runs short.
* ``org/moe-b``: MoE, GPQA-Diamond thinking 71 (within 3 points of dense-a) and LMArena.
* ``org/dense-c``: dense, no score at all (energy tables only).
* The quality file also scores ``org/ghost``, which was never measured.
"""

from __future__ import annotations

import csv
from pathlib import Path

from mlenergy.records import (
    Hardware,
    ModelInfo,
    Phase,
    PhaseResult,
    QualityResult,
    RunRecord,
    Software,
    Workload,
)

SOFTWARE = Software(python="3.11", mlenergy="test")
QUALITY_HEADER = ["model_id", "benchmark", "score", "unit", "setting", "source", "source_date"]
QUALITY_ROWS = [
    ["org/dense-a", "GPQA-Diamond", "70", "% accuracy", "thinking mode", "paper A", "2025"],
    ["org/dense-a", "GPQA-Diamond", "50", "% accuracy", "non-thinking mode", "paper A", "2025"],
    ["org/dense-a", "LMArena text score", "1300", "Elo-scale (Bradley-Terry)", "", "arena", "2025"],
    ["org/moe-b", "GPQA-Diamond", "71", "% accuracy", "thinking mode", "card B", "2025"],
    ["org/moe-b", "LMArena text score", "1350", "Elo-scale (Bradley-Terry)", "", "arena", "2025"],
    ["org/ghost", "GPQA-Diamond", "60", "% accuracy", "", "card G", "2025"],
]


def model(name: str, moe: bool, total_b: float, active_b: float) -> ModelInfo:
    return ModelInfo(
        model_id=name,
        config_fingerprint=f"{abs(hash(name)) % 16**16:016x}",
        architecture="qwen3_moe" if moe else "llama",
        is_moe=moe,
        num_experts=64 if moe else None,
        experts_per_token=4 if moe else None,
        total_params=int(total_b * 1e9),
        active_params=int(active_b * 1e9),
        dtype="bfloat16",
        weights="pretrained",
    )


def run(info: ModelInfo, task: str, out_tokens: int, j_per_token: float, itl_ms: float, tp: int):
    tokens = out_tokens * 64
    phase = PhaseResult.from_totals(
        Phase.REQUEST,
        duration_s=tokens / 1000.0,
        energy_j=j_per_token * tokens,
        tokens=tokens,
        itl_p50_s=itl_ms / 1000.0,
    )
    return RunRecord(
        model=info,
        workload=Workload(
            kind="inference",
            task=task,
            batch_size=64,
            max_num_seqs=64,
            input_tokens=0,
            output_tokens=out_tokens,
            num_requests=64,
            device="cuda",
            tensor_parallel=tp,
        ),
        hardware=Hardware(accelerator_model="B200", accelerator_count=tp),
        software=SOFTWARE,
        energy_source="measured:zeus-nvml",
        phases=(phase,),
    )


def fixture_runs() -> list[RunRecord]:
    a = model("org/dense-a", False, 30, 30)
    b = model("org/moe-b", True, 120, 6)
    c = model("org/dense-c", False, 8, 8)
    return [
        # dense-a gpqa: the cheapest configuration misses the 50 ms deadline.
        run(a, "gpqa", 6000, 0.10, 80.0, 1),
        run(a, "gpqa", 6000, 0.30, 40.0, 2),
        run(a, "gpqa", 6100, 0.40, 20.0, 4),
        run(a, "lm-arena-chat", 600, 0.20, 30.0, 1),
        run(b, "gpqa", 5000, 0.12, 30.0, 2),
        run(b, "gpqa", 5100, 0.15, 25.0, 4),
        run(b, "lm-arena-chat", 800, 0.08, 20.0, 2),
        run(c, "gpqa", 5500, 0.05, 20.0, 1),
        run(c, "lm-arena-chat", 500, 0.03, 10.0, 1),
    ]


def write_quality(path: Path, rows: list[list[str]] = QUALITY_ROWS, header=QUALITY_HEADER) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def stored_quality(info: ModelInfo, value: float) -> QualityResult:
    return QualityResult(
        model=info,
        software=SOFTWARE,
        task="lm-eval:gpqa_diamond_cot_zeroshot",
        metric="exact_match",
        value=value,
        higher_is_better=True,
        num_samples=198,
    )
