"""Without --configs-dir, models resolve through the estimator's reference model configs."""

from __future__ import annotations

from importer_fixtures import HARNESS_CONFIGS, LM_EVAL_REAL, RUN_DENSE, RUN_MOE

from mlenergy.importers.lmeval_results import read_results
from mlenergy.importers.mlenergy_benchmark import HarnessOptions, read_run


def test_energy_and_quality_of_one_model_share_its_reference_fingerprint():
    energy = read_run(RUN_DENSE).records[0]
    quality = read_results(LM_EVAL_REAL).records[0]
    assert energy.model.config_fingerprint == quality.model.config_fingerprint
    assert energy.model.model_id == quality.model.model_id == "Qwen/Qwen3-8B"
    assert energy.tags["model_facts"] == "config:Qwen__Qwen3-8B.json"


def test_a_thinking_tune_uses_its_instruct_config_by_the_estimator_rule():
    run = read_run(RUN_MOE, HarnessOptions(harness_configs=HARNESS_CONFIGS)).records[0]
    assert run.tags["model_facts"] == "config:Qwen__Qwen3-30B-A3B-Instruct-2507.json"
    assert run.model.is_moe and 3.0e9 < run.model.active_params < 3.6e9
