"""Runs imported from tools that record no inter-token latency, in the measured study.

optimum-benchmark reports and Zeus logs carry energy but no median inter-token latency, so the
study cannot judge them against its latency deadline: it says so (one error line when nothing
else was measured, a listed warning beside other runs), never "fastest nan ms".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from importer_fixtures import OPTIMUM, ZEUS_LOG
from integration_fixtures import write_model_configs
from measured_fixture import fixture_runs, write_quality

from mlenergy.cli import main
from mlenergy.store import RunStore

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture
def store_without_latency(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    configs = write_model_configs(tmp_path / "model-configs")
    common = ["--configs-dir", str(configs), "--data-dir", str(data)]
    assert main(["import", "optimum-benchmark", str(OPTIMUM), *common]) == 0
    zeus = ["import", "zeus-log", str(ZEUS_LOG), "--model", MODEL, "--gpu", "A100"]
    assert main([*zeus, "--tokens", "prefill=4096", "--tokens", "decode=512", *common]) == 0
    return data


def _study(data: Path, tmp_path: Path) -> int:
    quality = write_quality(tmp_path / "quality.csv")
    return main(
        [
            "study", "dense-vs-moe", "--measured", "--without-reference", "--data-dir", str(data),
            "--quality-file", str(quality), "--report-dir", str(tmp_path / "report"),
            "--no-progress",
        ]
    )  # fmt: skip


def test_only_runs_without_latency_is_one_error(store_without_latency, tmp_path, capsys):
    capsys.readouterr()
    assert _study(store_without_latency, tmp_path) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    assert "records a median inter-token latency" in err[0]
    assert "nan" not in err[0]
    assert not (tmp_path / "report").exists()


def test_runs_without_latency_beside_others_are_listed(store_without_latency, tmp_path, capsys):
    RunStore(store_without_latency).append(fixture_runs())
    capsys.readouterr()
    assert _study(store_without_latency, tmp_path) == 0
    out = capsys.readouterr().out
    listed = (tmp_path / "report" / "summary.md").read_text().splitlines()  # the warnings
    notes = [line for line in listed if line.startswith(f"- {MODEL}")]
    assert notes and all("no median inter-token latency recorded" in n for n in notes)
    assert "nan ms" not in out
