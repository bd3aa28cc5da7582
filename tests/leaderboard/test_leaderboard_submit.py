"""The submission form: every problem listed (escaped), pending, then shown once approved."""

from __future__ import annotations

import json

import pytest

from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.data import LeaderboardData
from mlenergy.leaderboard.submit_tab import submit_bundle
from mlenergy.reference.gpus import find_gpu
from mlenergy.testing.synthetic import synthetic_model, synthetic_run

pytest.importorskip("mlenergy.store.submissions", reason="submission intake not installed")


def _bundle(tmp_path, name: str, mutate=None):
    run = synthetic_run(
        synthetic_model("community/tiny-1b", 1.0, False),
        energy_source="measured:zeus-nvml",
        index=7,
    )
    data = {"submitter": "Lab <b>X</b>", "runs": [json.loads(run.model_dump_json())]}
    if mutate:
        mutate(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _break(data):
    data["runs"][0]["workload"]["batch_size"] = 0
    data["runs"][0]["phases"][0]["energy_j"] = -5
    data["runs"][0]["model"]["model_id"] = "<script>alert(1)</script>"


def test_bad_bundle_lists_every_problem_escaped(tmp_path):
    html, ok = submit_bundle(_bundle(tmp_path, "bad.json", _break), tmp_path / "store")
    assert not ok
    assert html.count("<li>") >= 2
    assert "<script>" not in html
    assert not (tmp_path / "store" / "submissions" / "pending").exists() or not any(
        (tmp_path / "store" / "submissions" / "pending").iterdir()
    )


def test_no_file_and_junk(tmp_path):
    assert submit_bundle(None, tmp_path)[1] is False
    junk = tmp_path / "junk.json"
    junk.write_text("{nope")
    html, ok = submit_bundle(junk, tmp_path)
    assert not ok and "JSON" in html


def test_good_bundle_waits_then_joins_results_when_approved(tmp_path):
    from mlenergy.store.submissions import SubmissionQueue

    store = tmp_path / "store"
    html, ok = submit_bundle(_bundle(tmp_path, "good.json"), store)
    assert ok and "Queued" in html
    assert "Lab &lt;b&gt;X&lt;/b&gt;" in html
    pending = list((store / "submissions" / "pending").glob("*.json"))
    assert len(pending) == 1
    data = LeaderboardData.load(store, reference=False)
    assert data.runs.empty  # pending runs are not shown
    SubmissionQueue(store).approve(pending[0].stem)
    data.reload()
    row = lb.query_table(data.frame(None), lb.TableQuery()).page_rows.iloc[0]
    assert row["submitter"] == "Lab <b>X</b>"
    assert row["energy_source"] == "measured:zeus-nvml"
    # the same bundle again is a duplicate: reported, not queued
    html, ok = submit_bundle(_bundle(tmp_path, "again.json"), store)
    assert not ok


def test_catalog_names_are_never_paths(tmp_path):
    spec = tmp_path / "my-chip.yaml"
    spec.write_text("memory_gb: 1\nmemory_bandwidth_tb_s: 1\ntdp_w: 1\nbf16_tflops: 1\n")
    assert find_gpu("H100-SXM5-80GB").tdp_w == pytest.approx(700)
    assert find_gpu("NVIDIA H100 80GB HBM3").tdp_w == pytest.approx(700)
    assert find_gpu("../etc/passwd.yaml") is None
    assert find_gpu(str(spec)) is None
    assert find_gpu("") is None


def test_jsonl_records_need_a_submitter(tmp_path):
    run = synthetic_run(
        synthetic_model("community/jsonl-2b", 2.0, False),
        energy_source="measured:zeus-nvml",
        index=8,
    )
    path = tmp_path / "results.jsonl"
    path.write_text(run.model_dump_json() + "\n")
    html, ok = submit_bundle(path, tmp_path / "store")
    assert not ok and "submitter" in html.lower()
    html, ok = submit_bundle(path, tmp_path / "store", submitter="JSONL Lab")
    assert ok, html


def test_uploads_are_deleted_once_handled(tmp_path):
    from mlenergy.leaderboard.submit_tab import handle_upload

    good, bad = _bundle(tmp_path, "good.json"), _bundle(tmp_path, "bad.json", _break)
    html, cleared = handle_upload(good, tmp_path / "store", None, None)
    assert "Queued" in html and cleared is None and not good.exists()
    html, _ = handle_upload(bad, tmp_path / "store", None, None)
    assert "problem" in html and not bad.exists()


def test_the_submit_button_runs_a_bounded_number_at_once(tmp_path):
    import gradio as gr

    from mlenergy.leaderboard.submit_tab import SUBMIT_CONCURRENCY, build_submit_tab

    with gr.Blocks() as demo:
        build_submit_tab(tmp_path)
    fns = list(demo.fns.values()) if isinstance(demo.fns, dict) else list(demo.fns)
    limits = [f.concurrency_limit for f in fns]
    assert limits == [SUBMIT_CONCURRENCY] and 1 <= SUBMIT_CONCURRENCY <= 4
