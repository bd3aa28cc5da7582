"""lm-eval itself writes a results file offline (its dummy model, local tasks) that imports.

Skipped when lm-eval is not installed (the optional extra ``lmeval``). The committed fixture
``fixtures/lm_eval/results_0.4.13_dummy.json`` was written the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mlenergy.importers.lmeval_results import LmEvalOptions, read_results

MC_TASK = """task: toy_arith_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: label
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


@pytest.mark.slow
def test_lm_eval_dummy_output_imports(tmp_path, configs_dir):
    pytest.importorskip("lm_eval")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    data = tasks / "toy_mc.jsonl"
    data.write_text(
        "".join(
            json.dumps({"question": f"{i} + 1?", "choices": [str(i + 1), str(i)], "label": 0})
            + "\n"
            for i in range(8)
        )
    )
    (tasks / "toy_mc.yaml").write_text(MC_TASK.format(data=data))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(tmp_path / "cache"),
        "OMP_NUM_THREADS": "1",
    }
    argv = [sys.executable, "-m", "lm_eval", "--model", "dummy"]
    argv += ["--model_args", "pretrained=Qwen/Qwen3-8B,dtype=bfloat16", "--tasks", "toy_arith_mc"]
    argv += ["--include_path", str(tasks), "--output_path", str(tmp_path / "out")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = (tmp_path / "out").rglob("results_*.json")
    raw = json.loads(path.read_text())
    (record,) = read_results(path, LmEvalOptions(configs_dir=configs_dir)).records
    assert record.task == "lm-eval:toy_arith_mc" and record.metric == "acc"
    assert record.value == raw["results"]["toy_arith_mc"]["acc,none"]
    assert record.stderr == pytest.approx(raw["results"]["toy_arith_mc"]["acc_stderr,none"])
    assert record.model.model_id == "Qwen/Qwen3-8B" and record.model.dtype == "bfloat16"
    assert record.tags["origin"] == f"lm-eval {raw['lm_eval_version']}"
