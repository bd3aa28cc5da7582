"""Imported lm-eval quality reaches the measured study for a model with imported energy.

The energy comes from the ML.ENERGY benchmark fixture (a real-format harness run folder), the
quality from an lm-eval results file, both through ``mlenergy import``; the store also holds
the measured study's own fixture runs. The study must prefer the imported lm-eval figure to
the published score of the same model and label it as imported, not ``published:``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from importer_fixtures import HARNESS_CONFIGS, LM_EVAL_REAL, RUN_MOE
from integration_fixtures import (
    FLEXIBLE,
    GPQA_TASK,
    MOE_MODEL,
    PUBLISHED_MOE_GPQA,
    QUALITY_ROWS_WITH_MOE,
    STRICT,
    write_gpqa_lm_eval,
    write_model_configs,
)
from measured_fixture import fixture_runs, write_quality

from mlenergy.cli import main
from mlenergy.store import RunStore
from mlenergy.studies.measured import SUMMARY_COLUMNS

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does


@pytest.fixture
def store_with_imported_energy(tmp_path: Path) -> Path:
    """The study's fixture runs plus the harness's MoE run, imported through the CLI."""
    data = tmp_path / "data"
    RunStore(data).append(fixture_runs())
    configs = write_model_configs(tmp_path / "model-configs")
    code = main(
        [
            "import", "mlenergy-benchmark", str(RUN_MOE),
            "--harness-configs", str(HARNESS_CONFIGS), "--configs-dir", str(configs),
            "--data-dir", str(data),
        ]
    )  # fmt: skip
    assert code == 0
    return data


def _import_lm_eval(data: Path, results: Path, configs: Path) -> None:
    code = main(
        ["import", "lm-eval", str(results), "--configs-dir", str(configs), "--data-dir", str(data)]
    )
    assert code == 0


def _study(data: Path, quality: Path, report: Path, capsys) -> tuple[pd.DataFrame, str]:
    code = main(
        [
            "study", "dense-vs-moe", "--measured", "--without-reference", "--data-dir", str(data),
            "--quality-file", str(quality), "--report-dir", str(report), "--no-progress",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    last = out.strip().splitlines()[-1]
    assert re.fullmatch(r"summary: \S+summary\.csv  report: \S+index\.html", last)
    return pd.read_csv(report / "summary.csv"), out


def _moe_row(summary: pd.DataFrame) -> pd.Series:
    rows = summary[(summary["model_id"] == MOE_MODEL) & (summary["task"] == "gpqa")]
    assert len(rows) == 1
    return rows.iloc[0]


def test_published_score_without_imported_quality(store_with_imported_energy, tmp_path, capsys):
    """The control: with energy imported but no quality record, the published score is used."""
    quality = write_quality(tmp_path / "quality.csv", QUALITY_ROWS_WITH_MOE)
    summary, out = _study(store_with_imported_energy, quality, tmp_path / "report", capsys)
    row = _moe_row(summary)
    assert row["quality_score"] == pytest.approx(PUBLISHED_MOE_GPQA)
    assert "Quality from the store's records" not in out
    assert row["quality_source"] == "published:GPQA-Diamond"
    assert row["energy_source"] == "measured:zeus-nvml"


def test_imported_lm_eval_quality_beats_published(store_with_imported_energy, tmp_path, capsys):
    data = store_with_imported_energy
    configs = write_model_configs(tmp_path / "model-configs")
    _import_lm_eval(data, write_gpqa_lm_eval(tmp_path / "results_gpqa.json"), configs)
    quality = write_quality(tmp_path / "quality.csv", QUALITY_ROWS_WITH_MOE)
    report = tmp_path / "report"
    summary, out = _study(data, quality, report, capsys)

    assert list(summary.columns) == list(SUMMARY_COLUMNS)
    row = _moe_row(summary)
    # The imported figure (strict-match, in %), not the published 73.4 nor the other filter.
    assert row["quality_score"] == pytest.approx(STRICT * 100)
    assert row["quality_score"] != pytest.approx(PUBLISHED_MOE_GPQA)
    assert row["quality_source"] == f"imported:lm-eval:{GPQA_TASK}"
    assert not row["quality_source"].startswith(("published:", "measured:"))
    assert row["energy_source"] == "measured:zeus-nvml"
    assert row["arch"] == "moe" and row["gpu"] == "B200"
    expected = row["energy_per_response_j"] / (row["quality_score"] / 100)
    assert row["energy_per_correct_j"] == pytest.approx(expected)

    # The other models keep their published scores.
    others = summary[(summary["model_id"] != MOE_MODEL) & summary["quality_score"].notna()]
    assert not others.empty
    assert others["quality_source"].str.startswith("published:").all()

    page = (report / "index.html").read_text()
    assert f"imported:lm-eval:{GPQA_TASK}" in page
    assert "lm-eval 0.4.13" in page  # the harness version that scored it
    assert f"{PUBLISHED_MOE_GPQA:g}" in page  # the published score it was preferred to
    assert f"{FLEXIBLE * 100:.4g}" in page  # the other filter, listed, not silently dropped
    # The harness measured the imported run's energy, not this project.
    assert "measured:zeus-nvml (mlenergy.benchmark, imported)" in page
    assert MOE_MODEL in out
    reasoning = " ".join((report / "summary.md").read_text().split())  # the prose is in the report
    assert (
        "Quality from the store's records instead of published scores for "
        f"Qwen3-30B-A3B-Thinking-2507 (gpqa: imported:lm-eval:{GPQA_TASK})" in reasoning
    )
    # The import says what the model's description was read from.
    assert f"model {MOE_MODEL}: architecture and parameter counts from config:" in out


def test_imported_quality_on_no_study_benchmark_is_named(
    store_with_imported_energy, tmp_path, capsys
):
    """lm-eval results of a model on tasks the study does not compare: a warning, not silence."""
    data = store_with_imported_energy
    configs = write_model_configs(tmp_path / "model-configs")
    _import_lm_eval(data, LM_EVAL_REAL, configs)  # Qwen/Qwen3-8B on toy tasks, no energy run
    quality = write_quality(tmp_path / "quality.csv", QUALITY_ROWS_WITH_MOE)
    summary, out = _study(data, quality, tmp_path / "report", capsys)
    assert "Qwen/Qwen3-8B" not in set(summary["model_id"])
    assert "warning(s)" in out  # counted on the terminal, listed in the report
    listed = (tmp_path / "report" / "summary.md").read_text().splitlines()
    warning = next(line for line in listed if "Qwen/Qwen3-8B: quality records" in line)
    assert "lm-eval:toy_arith_mc" in warning and "no measured run of this model" in warning
    assert _moe_row(summary)["quality_source"] == "published:GPQA-Diamond"


def test_submitted_bundle_of_energy_and_quality_reaches_the_study(tmp_path, capsys):
    """Energy and lm-eval quality of one model, bundled, submitted, approved, then studied."""
    data, bundle = tmp_path / "data", tmp_path / "bundle.jsonl"
    RunStore(data).append(fixture_runs())
    configs = write_model_configs(tmp_path / "model-configs")
    common = ["--configs-dir", str(configs), "--bundle", str(bundle), "--data-dir", str(data)]
    harness = ["--harness-configs", str(HARNESS_CONFIGS), "--harness-version", "3.0",
               "--zeus-version", "0.11.0", "--engine", "vllm 0.11.1"]  # fmt: skip
    assert main(["import", "mlenergy-benchmark", str(RUN_MOE), *harness, *common]) == 0
    results = write_gpqa_lm_eval(tmp_path / "results_gpqa.json")
    assert main(["import", "lm-eval", str(results), *common]) == 0
    capsys.readouterr()
    submit = ["submit", str(bundle), "--submitter", "Lab X", "--data-dir", str(data)]
    assert main(submit) == 0
    queued = re.search(r"queued (\S+):", capsys.readouterr().out)
    assert queued is not None
    assert main(["submissions", "approve", queued.group(1), "--data-dir", str(data)]) == 0

    quality = write_quality(tmp_path / "quality.csv", QUALITY_ROWS_WITH_MOE)
    summary, _ = _study(data, quality, tmp_path / "report", capsys)
    row = _moe_row(summary)
    assert row["quality_score"] == pytest.approx(STRICT * 100)
    assert row["quality_source"] == f"imported:lm-eval:{GPQA_TASK}"
    page = (tmp_path / "report" / "index.html").read_text()
    assert "measured:zeus-nvml (mlenergy.benchmark 3.0, submitted by Lab X)" in page
    assert "lm-eval 0.4.13, submitted by Lab X" in page


def test_help_of_measured_says_store_quality_comes_first(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # one line per option
    assert main(["study", "dense-vs-moe", "--help"]) == 0
    lines = capsys.readouterr().out.splitlines()
    line = next(x for x in lines if re.match(r"\W*--measured\s", x))
    assert "store's quality records (e.g. imported lm-eval results), else published" in line
