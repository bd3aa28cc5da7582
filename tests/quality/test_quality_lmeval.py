import sys

import pytest

from mlenergy.errors import UserError
from mlenergy.quality.lmeval import require_lm_eval, results_to_records
from mlenergy.records import ModelInfo, Software

INFO = ModelInfo(
    model_id="org/model",
    config_fingerprint="b" * 16,
    architecture="llama",
    is_moe=False,
    total_params=10,
    active_params=10,
    dtype="bfloat16",
    weights="pretrained",
)
SW = Software(python="3", mlenergy="0")


def test_results_become_records_with_stderr():
    results = {
        "results": {
            "hellaswag": {
                "alias": "hellaswag",
                "acc,none": 0.41,
                "acc_stderr,none": 0.005,
                "acc_norm,none": 0.52,
                "acc_norm_stderr,none": "N/A",
            }
        },
        "n-samples": {"hellaswag": {"original": 10042, "effective": 100}},
    }
    recs = results_to_records(results, task="hellaswag", model=INFO, software=SW)
    by_metric = {r.metric: r for r in recs}
    assert set(by_metric) == {"acc", "acc_norm"}
    assert by_metric["acc"].stderr == 0.005
    assert by_metric["acc_norm"].stderr is None
    assert by_metric["acc"].task == "lm-eval:hellaswag"
    assert by_metric["acc"].higher_is_better
    assert by_metric["acc"].num_samples == 100


def test_missing_results_and_missing_extra_are_user_errors(monkeypatch):
    with pytest.raises(UserError, match="no results"):
        results_to_records({"results": {}}, task="x", model=INFO, software=SW)
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    with pytest.raises(UserError, match="lmeval"):
        require_lm_eval()


def test_evaluate_lm_eval_calls_the_harness(monkeypatch):
    import types

    from mlenergy.quality.lmeval import evaluate_lm_eval

    calls = {}

    def simple_evaluate(**kwargs):
        calls.update(kwargs)
        return {"results": {"arc_easy": {"acc,none": 0.5, "acc_stderr,none": 0.01}}}

    monkeypatch.setitem(
        sys.modules, "lm_eval", types.SimpleNamespace(simple_evaluate=simple_evaluate)
    )
    (rec,) = evaluate_lm_eval("org/model", "arc_easy", model=INFO, software=SW, limit=10)
    assert calls["tasks"] == ["arc_easy"] and calls["limit"] == 10
    assert "pretrained=org/model" in calls["model_args"]
    assert rec.value == 0.5 and rec.stderr == 0.01 and rec.tags["limit"] == "10"
