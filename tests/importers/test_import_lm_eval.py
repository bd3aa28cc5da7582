"""lm-eval results (a real 0.4.13 file, the pre-0.4.10 string model_args) become quality records."""

from __future__ import annotations

import json

import pytest
from importer_fixtures import FIXTURES, LM_EVAL_OLD, LM_EVAL_REAL

from mlenergy.errors import UserError
from mlenergy.importers.lmeval_results import LmEvalOptions, parse_model_args, read_results


def _by_key(batch):
    return {(q.task, q.metric): q for q in batch.records}


def test_real_lm_eval_output_parses_every_task_metric_and_filter(configs_dir):
    raw = json.loads(LM_EVAL_REAL.read_text())
    assert raw["lm_eval_version"] == "0.4.13" and isinstance(raw["config"]["model_args"], dict)
    batch = read_results(LM_EVAL_REAL, LmEvalOptions(configs_dir=configs_dir))
    got = _by_key(batch)
    assert set(got) == {
        ("lm-eval:toy_arith_mc", "acc"),
        ("lm-eval:toy_arith_mc", "acc_norm"),
        ("lm-eval:toy_echo_gen", "exact_match,strict-match"),
        ("lm-eval:toy_echo_gen", "exact_match,flexible-extract"),
        ("lm-eval:toy_suite", "exact_match,strict-match"),
    }
    acc = got[("lm-eval:toy_arith_mc", "acc")]
    mc = raw["results"]["toy_arith_mc"]
    assert acc.value == mc["acc,none"]
    assert acc.stderr == pytest.approx(mc["acc_stderr,none"])
    assert acc.num_samples == raw["n-samples"]["toy_arith_mc"]["effective"]
    assert acc.higher_is_better is True
    assert acc.tags["filter"] == "none" and acc.tags["origin"] == "lm-eval 0.4.13"
    assert got[("lm-eval:toy_suite", "exact_match,strict-match")].tags["group"] == "true"
    model = acc.model
    assert model.model_id == "Qwen/Qwen3-8B" and model.dtype == "bfloat16"  # dict model_args
    assert {q.model for q in batch.records} == {model}
    assert acc.software.transformers == raw["transformers_version"]


def test_pre_0_4_10_string_model_args_and_na_stderr(configs_dir):
    batch = read_results(LM_EVAL_OLD, LmEvalOptions(configs_dir=configs_dir))
    got = _by_key(batch)
    assert got[("lm-eval:arc_easy", "acc")].model.dtype == "bfloat16"  # from the string
    group = got[("lm-eval:toy_reasoning", "acc")]
    assert group.stderr is None and group.tags["stderr"] == "N/A in the file"
    gsm = got[("lm-eval:gsm8k", "exact_match,strict-match")]
    assert gsm.value == 0.8749 and gsm.stderr == 0.009112 and gsm.tags["num_fewshot"] == "5"
    assert gsm.software.torch == "2.4.1+cu121" and gsm.software.python == "3.11.9"


def test_model_args_parse_both_forms():
    text = "pretrained=Qwen/Qwen3-8B,dtype=bfloat16,trust_remote_code=True"
    assert parse_model_args(text) == {
        "pretrained": "Qwen/Qwen3-8B",
        "dtype": "bfloat16",
        "trust_remote_code": "True",
    }
    assert parse_model_args({"pretrained": "a/b", "dtype": "float16"})["dtype"] == "float16"


def test_model_id_from_model_args_when_model_name_is_absent(configs_dir, tmp_path):
    raw = json.loads(LM_EVAL_OLD.read_text())
    del raw["model_name"]
    raw["config"]["model_args"] = (
        "pretrained=/cache/hub/models--Qwen--Qwen3-8B/snapshots/abc123,dtype=float16"
    )
    path = tmp_path / "results.json"
    path.write_text(json.dumps(raw))
    batch = read_results(path, LmEvalOptions(configs_dir=configs_dir))
    model = batch.records[0].model
    assert model.model_id == "Qwen/Qwen3-8B"  # a local cache path, normalised
    assert model.dtype == "float16"


def test_quality_ids_are_stable_and_distinct(configs_dir):
    a = read_results(LM_EVAL_REAL, LmEvalOptions(configs_dir=configs_dir))
    b = read_results(LM_EVAL_REAL, LmEvalOptions(configs_dir=configs_dir))
    assert [q.quality_id for q in a.records] == [q.quality_id for q in b.records]
    assert len({q.quality_id for q in a.records}) == len(a.records)
    assert [q.content_hash() for q in a.records] == [q.content_hash() for q in b.records]


def test_file_without_numeric_metric_is_refused(configs_dir):
    path = FIXTURES / "lm_eval" / "broken_no_numeric_metric.json"
    with pytest.raises(UserError) as info:
        read_results(path, LmEvalOptions(configs_dir=configs_dir))
    assert "broken_no_numeric_metric.json: results: no numeric metric" in str(info.value)


def test_file_without_results_is_refused(tmp_path, configs_dir):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"config": {}}))
    with pytest.raises(UserError, match=r"other\.json: results: missing"):
        read_results(path, LmEvalOptions(configs_dir=configs_dir))


def test_scores_of_a_model_with_no_config_and_no_size_are_imported(tmp_path, capsys):
    """Quality needs no parameter count: any model id imports; sizes attach later."""
    from mlenergy.cli import main
    from mlenergy.records.quality import ModelRef
    from mlenergy.store import RunStore

    raw = json.loads(LM_EVAL_REAL.read_text())
    raw["model_name"] = "org/fake-model"
    raw["config"]["model_args"] = {"pretrained": "org/fake-model", "dtype": "bfloat16"}
    raw["config"].pop("model_num_parameters", None)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(raw))
    batch = read_results(path, LmEvalOptions(configs_dir=tmp_path / "no-configs"))
    model = batch.records[0].model
    assert isinstance(model, ModelRef) and model.model_id == "org/fake-model"
    assert model.total_params is None and model.dtype == "bfloat16"
    assert any("imported by model id" in n for n in batch.notes)
    data = tmp_path / "data"
    code = main(["import", "lm-eval", str(path), "--data-dir", str(data)])
    assert code == 0, capsys.readouterr().err
    stored = RunStore(data).quality()
    assert {q.model.model_id for q in stored} == {"org/fake-model"}
    assert all(isinstance(q.model, ModelRef) for q in stored)
    frame = RunStore(data).quality_frame()
    assert frame["total_params"].isna().all() and (frame["model_id"] == "org/fake-model").all()
