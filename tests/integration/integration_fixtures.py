"""Files the integration tests build from the importers' and the study's fixtures.

The lm-eval file is the real output of lm-evaluation-harness 0.4.13
(``tests/importers/fixtures/lm_eval/results_0.4.13_dummy.json``) with its toy tasks replaced by
lm-eval's ``gpqa_diamond_cot_zeroshot`` task (two filters, as that task reports them) and its
model set to the MoE model of the ML.ENERGY benchmark fixture, so that the imported quality
and the imported energy are of one model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from importer_fixtures import LM_EVAL_REAL, MODEL_CONFIGS
from measured_fixture import QUALITY_ROWS

MOE_MODEL = "Qwen/Qwen3-30B-A3B-Thinking-2507"
"""The model of the importer fixture's MoE gpqa run (2 x B200)."""
GPQA_TASK = "gpqa_diamond_cot_zeroshot"
GPQA_QUESTIONS = 198
STRICT = 150 / GPQA_QUESTIONS
"""``exact_match,strict-match`` of the derived file (fraction)."""
FLEXIBLE = 155 / GPQA_QUESTIONS
"""``exact_match,flexible-extract`` of the derived file (fraction)."""
PUBLISHED_MOE_GPQA = 73.4
"""The published GPQA-Diamond score (thinking) of :data:`MOE_MODEL`, as the reference has it."""

QUALITY_ROWS_WITH_MOE = [
    *QUALITY_ROWS,
    [MOE_MODEL, "GPQA-Diamond", f"{PUBLISHED_MOE_GPQA}", "% accuracy", "thinking mode",
     "HF model card", "2025-07"],
]  # fmt: skip
"""The study's quality rows plus the published score of the imported MoE model."""


def _stderr(p: float) -> float:
    return math.sqrt(p * (1 - p) / (GPQA_QUESTIONS - 1))


def write_gpqa_lm_eval(path: Path, model_id: str = MOE_MODEL) -> Path:
    """Write an lm-eval 0.4.13 results file of ``gpqa_diamond_cot_zeroshot`` for ``model_id``."""
    data = json.loads(LM_EVAL_REAL.read_text())
    data["results"] = {
        GPQA_TASK: {
            "alias": GPQA_TASK,
            "exact_match,strict-match": STRICT,
            "exact_match_stderr,strict-match": _stderr(STRICT),
            "exact_match,flexible-extract": FLEXIBLE,
            "exact_match_stderr,flexible-extract": _stderr(FLEXIBLE),
        }
    }
    data["groups"] = {}
    data["group_subtasks"] = {GPQA_TASK: []}
    data["configs"] = {GPQA_TASK: {"task": GPQA_TASK, "tag": "gpqa", "num_fewshot": 0}}
    data["versions"] = {GPQA_TASK: 2.0}
    data["n-shot"] = {GPQA_TASK: 0}
    data["higher_is_better"] = {GPQA_TASK: {"exact_match": True}}
    data["n-samples"] = {GPQA_TASK: {"original": GPQA_QUESTIONS, "effective": GPQA_QUESTIONS}}
    data["config"]["model_args"] = {"pretrained": model_id, "dtype": "bfloat16"}
    data["model_name"] = model_id
    data["model_name_sanitized"] = model_id.replace("/", "__")
    path.write_text(json.dumps(data, indent=2))
    return path


def write_model_configs(folder: Path) -> Path:
    """The importer fixtures' model configs as ``<org>__<name>.json`` files in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, config in MODEL_CONFIGS.items():
        (folder / name).write_text(json.dumps(config))
    return folder
