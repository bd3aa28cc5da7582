"""Folders passed where files or run folders are expected: imported, or one helpful error."""

from __future__ import annotations

import shutil

from importer_fixtures import FIXTURES, LM_EVAL_OLD, LM_EVAL_REAL, RUN_ROOT

from mlenergy.cli import main
from mlenergy.store import RunStore


def test_lm_eval_output_folder_imports_every_results_file(tmp_path, configs_dir, data_dir, capsys):
    out = tmp_path / "lm-eval-out" / "Qwen__Qwen3-8B"  # lm_eval --output_path's layout
    out.mkdir(parents=True)
    for f in (LM_EVAL_REAL, LM_EVAL_OLD):
        shutil.copy(f, out / f.name)
    args = ["--configs-dir", str(configs_dir), "--data-dir", str(data_dir)]
    assert main(["import", "lm-eval", str(tmp_path / "lm-eval-out"), *args]) == 0
    assert len(RunStore(data_dir).quality()) == 10


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    return err[0]


def test_folder_without_results_files_is_one_error(data_dir, capsys):
    assert main(["import", "lm-eval", str(FIXTURES / "zeus"), "--data-dir", str(data_dir)]) == 2
    assert "no lm-eval results_*.json below it" in _error(capsys)
    assert not data_dir.exists()


def test_a_folder_for_a_file_is_named_a_folder(data_dir, capsys):
    folder = str(FIXTURES / "optimum_benchmark")
    assert main(["import", "optimum-benchmark", folder, "--data-dir", str(data_dir)]) == 2
    assert "is a folder, not a file" in _error(capsys)


def test_parent_of_run_folders_suggests_recursive(data_dir, capsys):
    assert main(["import", "mlenergy-benchmark", str(RUN_ROOT), "--data-dir", str(data_dir)]) == 2
    assert "pass --recursive" in _error(capsys)
    assert not data_dir.exists()
