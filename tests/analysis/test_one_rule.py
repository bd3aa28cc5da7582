"""Each shared rule is written once and every view reads it."""

from __future__ import annotations

import pytest

from mlenergy.errors import UserError
from mlenergy.leaderboard.arch import architecture_kind
from mlenergy.records.model_kind import model_kind
from mlenergy.reference.runs import read_reference
from mlenergy.studies.measured import measured_frame


@pytest.fixture(scope="module")
def reference_runs():
    return read_reference()


@pytest.mark.parametrize(
    "architecture,is_moe,expected",
    [
        ("recurrent_gemma", False, "hybrid"),
        ("nemotron_h", False, "hybrid"),
        ("jamba", True, "moe"),
        ("llama", False, "dense"),
        ("qwen3_moe", None, "moe"),
        ("Mamba-Transformer Hybrid", False, "hybrid"),
    ],
)
def test_model_kind_rule(architecture, is_moe, expected):
    assert model_kind(architecture, is_moe) == expected
    label = {"moe": "MoE"}.get(expected, expected)
    assert architecture_kind(architecture, is_moe) == label


def test_every_view_reads_the_records_kind(reference_runs):
    frame = measured_frame(reference_runs, include_legacy=True)
    kinds = {r.run_id: r.model.kind for r in reference_runs}
    assert (frame["arch"] == frame["run_id"].map(kinds)).all()
    for r in reference_runs:
        label = architecture_kind(r.model.architecture, r.model.is_moe, r.model.model_id)
        assert label.lower() == r.model.kind
    assert {r.model.kind for r in reference_runs} == {"dense", "moe", "hybrid"}


def test_architecture_spec_kind_agrees_with_the_record(reference_runs):
    from mlenergy.models.architecture import ArchitectureSpec

    spec = ArchitectureSpec.from_config(
        {"model_type": "recurrent_gemma", "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}
    )  # fmt: skip
    assert spec.kind == "hybrid"


def _two_phase_runs():
    """Runs measured with a request phase and a decode phase whose figures differ."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "studies"))
    from measured_fixture import fixture_runs

    from mlenergy.records import Phase, PhaseResult

    out = []
    for r in fixture_runs():
        req = r.phases[0]
        decode = PhaseResult.from_totals(
            Phase.DECODE,
            duration_s=req.duration_s,
            energy_j=req.energy_j * 0.5,  # decode alone: half the request's J/token
            tokens=req.tokens,
            itl_p50_s=req.itl_p50_s,
        )
        out.append(r.model_copy(update={"phases": (req, decode)}))
    return out


def test_every_view_takes_the_request_phase_and_the_same_best_configuration(tmp_path):
    from mlenergy.leaderboard.query import best_configs, prepare_runs, within_limits
    from mlenergy.optimize.candidates import store_candidates
    from mlenergy.records.metrics import headline_phase
    from mlenergy.store import RunStore
    from mlenergy.studies.measured import best_configurations

    runs = _two_phase_runs()
    data = tmp_path / "data"
    RunStore(data).append(runs)
    expected = {r.run_id: headline_phase(r).energy_per_token_j for r in runs}
    assert all(headline_phase(r).phase.value == "request" for r in runs)
    # The leaderboard's table.
    board = prepare_runs(RunStore(data).runs_frame())
    assert dict(zip(board["run_id"], board["energy_per_token_j"], strict=True)) == pytest.approx(
        expected
    )
    # The study's configurations.
    frame = measured_frame(runs)
    assert dict(zip(frame["run_id"], frame["energy_per_token_j"], strict=True)) == pytest.approx(
        expected
    )
    # The planner's candidates.
    cands = store_candidates("org/dense-a", "gpqa", data)
    ids = [s.split("(run ")[1].rstrip(")") for s in cands["source"]]
    assert dict(zip(ids, cands["energy_per_token_j"], strict=True)) == pytest.approx(
        {i: expected[i] for i in ids}
    )
    # Best configuration within 50 ms: the study and the leaderboard pick the same runs.
    study = best_configurations(frame, 50.0).dropna(subset=["energy_per_token_j"])
    lb = best_configs(within_limits(board, 50.0, None))
    lb = lb[lb["itl_ms"].notna()]
    assert set(study["run_id"]) == set(lb["run_id"])


def _with_mean_lengths(runs):
    """The runs with an exact mean output length beside the rounded count."""
    out = []
    for i, r in enumerate(runs):
        mean = r.workload.output_tokens + 0.25 + i / 100
        work = r.workload.model_copy(update={"avg_output_tokens": mean})
        out.append(r.model_copy(update={"workload": work}))
    return out


def test_the_listing_and_the_measurement_table_read_the_same_headline(tmp_path):
    from mlenergy.records.metrics import headline_phase, mean_output_tokens
    from mlenergy.reference.measurements import measurements_from_records
    from mlenergy.store import RunStore
    from mlenergy.store.listing import cell_text, list_runs

    runs = _with_mean_lengths(_two_phase_runs())
    RunStore(tmp_path / "data").append(runs)
    expected = {r.run_id: headline_phase(r).energy_per_token_j for r in runs}
    # `mlenergy runs` shows the whole request's energy per token, not decode's.
    listing = list_runs(RunStore(tmp_path / "data"), limit=0)
    column = listing.headers.index("J/token")
    shown = {row[0]: row[column] for row in listing.rows}
    assert shown == {i: cell_text(float(e)) for i, e in expected.items()}
    # The measurement table the planners and the calibration read.
    table = measurements_from_records(runs, tmp_path)
    assert dict(zip(table["run_id"], table["energy_per_token_j"], strict=True)) == expected
    means = {r.run_id: mean_output_tokens(r) for r in runs}
    assert dict(zip(table["run_id"], table["output_tokens"], strict=True)) == means


def test_mean_length_and_energy_per_response_agree_across_views(tmp_path):
    from mlenergy.leaderboard.prepare import prepare_runs
    from mlenergy.records.metrics import headline_phase, mean_output_tokens
    from mlenergy.store import RunStore

    runs = _with_mean_lengths(_two_phase_runs())
    RunStore(tmp_path / "data").append(runs)
    per_response = {r.run_id: headline_phase(r).energy_per_token_j * mean_output_tokens(r)
                    for r in runs}  # fmt: skip
    assert all(mean_output_tokens(r) != r.workload.output_tokens for r in runs)
    frame = measured_frame(runs)
    assert dict(zip(frame["run_id"], frame["energy_per_response_j"], strict=True)) == (
        pytest.approx(per_response)
    )
    board = prepare_runs(RunStore(tmp_path / "data").runs_frame())
    assert dict(zip(board["run_id"], board["energy_per_response_j"], strict=True)) == (
        pytest.approx(per_response)
    )


def test_energy_per_correct_answer_only_where_the_task_answers_the_benchmark(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "studies"))
    from measured_fixture import fixture_runs, write_quality

    from mlenergy.leaderboard.prepare import prepare_runs
    from mlenergy.leaderboard.published import attach_published, task_quality_key
    from mlenergy.quality.published import read_published_quality
    from mlenergy.records.metrics import TASK_BENCHMARK, task_answers_benchmark, task_benchmarks
    from mlenergy.store import RunStore
    from mlenergy.studies.measured import attach_quality, best_configurations

    assert task_benchmarks() == TASK_BENCHMARK
    assert task_benchmarks("GPQA-Main")["gpqa"] == "GPQA-Main"
    for task, bench in TASK_BENCHMARK.items():
        assert task_quality_key(task) == f"published:{bench}"
    assert task_answers_benchmark("gpqa", "GPQA-Diamond")
    assert not task_answers_benchmark("gpqa", "MMLU-Pro")
    assert not task_answers_benchmark("lm-arena-chat", "GPQA-Diamond")

    runs = fixture_runs()
    scores = read_published_quality(write_quality(tmp_path / "quality.csv"))
    RunStore(tmp_path / "data").append(runs)
    board = attach_published(
        prepare_runs(RunStore(tmp_path / "data").runs_frame()), scores, "published:GPQA-Diamond"
    )
    lb = dict(zip(board["run_id"], board["energy_per_correct_j"], strict=True))
    chat = board["task"] == "lm-arena-chat"
    assert board.loc[chat, "energy_per_correct_j"].isna().all()  # a chat response is no answer
    assert board.loc[~chat, "energy_per_correct_j"].notna().any()
    study = attach_quality(best_configurations(measured_frame(runs), 50.0), scores, [],
                           task_benchmarks())  # fmt: skip
    gpqa = study[(study["task"] == "gpqa") & study["energy_per_correct_j"].notna()]
    assert len(gpqa) >= 2
    for row in gpqa.itertuples():
        assert row.energy_per_correct_j == pytest.approx(lb[row.run_id])
    # Another benchmark for the gpqa runs: its score is shown, but no energy per correct answer.
    other = attach_quality(best_configurations(measured_frame(runs), 50.0), scores, [],
                           task_benchmarks("LMArena text score"))  # fmt: skip
    assert other["quality_score"].notna().any() and other["energy_per_correct_j"].isna().all()


def _catalog_with(folder, name: str, tdp_w: float) -> None:
    import json

    from mlenergy.reference import PACKAGE_DIR
    from mlenergy.reference.gpus import CATALOG_FILE

    data = json.loads((PACKAGE_DIR / CATALOG_FILE).read_text())
    h100 = next(g for g in data["gpus"] if g["name"] == "H100-SXM5-80GB")
    data["gpus"].append({**h100, "name": name, "aliases": ["TG96"], "tdp_w": tdp_w})
    (folder / CATALOG_FILE).write_text(json.dumps(data))


@pytest.mark.parametrize(
    "spelling",
    ["H100", "NVIDIA H100 80GB HBM3", "h100-sxm5-80gb", "NVIDIA H200-SXM5-141GB", "AMD MI300X",
     "A100", "NVIDIA A100-SXM4-40GB", "GeForce RTX 4090"],
)  # fmt: skip
def test_every_reader_matches_gpu_names_with_the_one_matcher(spelling):
    import pandas as pd

    from mlenergy.importers.common import resolve_accelerator
    from mlenergy.leaderboard.prepare import prepare_runs
    from mlenergy.reference.gpus import catalog_name, find_gpu, resolve_gpu
    from mlenergy.store.gpus import gpu_lookup

    spec = find_gpu(spelling)
    assert spec is not None
    assert resolve_gpu(spelling).name == spec.name
    assert gpu_lookup()(spelling).name == spec.name
    assert gpu_lookup()(spelling).tdp_w == spec.tdp_w
    assert resolve_accelerator(spelling, "x.json", "gpu").name == spec.name
    assert catalog_name(spelling) == spec.name
    board = prepare_runs(pd.DataFrame({"accelerator_model": [spelling], "accelerator_count": [1]}))
    assert board.loc[0, "hardware"] == spec.name


def test_one_catalog_override_for_every_reader(tmp_path, monkeypatch):
    from mlenergy.importers.common import resolve_accelerator
    from mlenergy.reference import CATALOG_DIR_ENV
    from mlenergy.reference.gpus import find_gpu, resolve_gpu
    from mlenergy.store.gpus import gpu_lookup

    _catalog_with(tmp_path, "Test-GPU-96GB", 300.0)
    assert find_gpu("TG96") is None and gpu_lookup()("TG96") is None
    monkeypatch.setenv(CATALOG_DIR_ENV, str(tmp_path))
    assert resolve_gpu("TG96").tdp_w == 300.0
    assert gpu_lookup()("TG96").tdp_w == 300.0
    assert resolve_accelerator("TG96", "x.json", "gpu").tdp_w == 300.0


def test_import_submit_and_submit_check_a_tdp_the_same_way(tmp_path, monkeypatch):
    """Both queue through one lookup: the catalog (its override too), then admitted GPUs."""
    import json

    from mlenergy.errors import ValidationFailed
    from mlenergy.importers.deliver import ImportBatch, deliver
    from mlenergy.reference import CATALOG_DIR_ENV
    from mlenergy.store.submissions import SubmissionQueue
    from mlenergy.testing.synthetic import synthetic_model, synthetic_run

    catalogs = tmp_path / "catalogs"
    catalogs.mkdir()
    _catalog_with(catalogs, "Test-GPU-96GB", 300.0)
    monkeypatch.setenv(CATALOG_DIR_ENV, str(catalogs))
    model = synthetic_model("org/tdp-check-8b", 8.0, False)
    cases = {  # GPU name on the record, TDP it was run at -> accepted?
        "ok-override": ("TG96", 300.0, True),
        "ok-admitted": ("MI325X", 1000.0, True),
        "over-tdp": ("TG96", 1000.0, False),
    }
    for i, (case, (gpu, tdp, accepted)) in enumerate(cases.items()):
        data = tmp_path / case
        (data / "submissions").mkdir(parents=True)
        admitted = {"gpus": [{"name": "MI325X", "tdp_w": 1000, "bf16_tflops": 1307.4}]}
        (data / "submissions" / "gpus.json").write_text(json.dumps(admitted))
        run = synthetic_run(model, gpu=gpu, tdp_w=tdp, energy_source="measured:zeus-nvml",
                            index=700 + i)  # fmt: skip
        report = SubmissionQueue(data).validate(run.model_dump_json().encode(), submitter="lab")
        assert report.ok == accepted, (case, report.problems)
        batch = ImportBatch("test", tmp_path / "in.json", (run,))
        if accepted:
            assert deliver([batch], data, submit=True, submitter="lab", echo=lambda _: None).queued
        else:
            with pytest.raises(ValidationFailed) as failed:
                deliver([batch], data, submit=True, submitter="lab", echo=lambda _: None)
            assert failed.value.problems == report.problems


@pytest.mark.parametrize(
    "spelling,name",
    [("bf16", "bfloat16"), ("torch.bfloat16", "bfloat16"), ("HALF", "float16"),
     ("fp32", "float32"), ("float", "float32"), ("float8_e4m3fn", "fp8"), ("FP8", "fp8"),
     ("mxfp4", "mxfp4"), ("nvfp4", "nvfp4")],
)  # fmt: skip
def test_every_reader_parses_precisions_with_the_one_vocabulary(spelling, name):
    from mlenergy.estimate.profile import PRECISION_BYTES, normalise_precision
    from mlenergy.importers.common import normalise_dtype
    from mlenergy.models.loading import canonical_dtype
    from mlenergy.reference.gpus import resolve_gpu
    from mlenergy.reference.precisions import precision
    from mlenergy.store.gpus import gpu_lookup

    entry = precision(spelling)
    assert entry is not None and entry.name == name
    assert normalise_precision(spelling) == name
    assert normalise_dtype(spelling) == name
    assert PRECISION_BYTES[name] == entry.bytes_per_weight
    if entry.torch:
        assert canonical_dtype(spelling) == name
    else:
        with pytest.raises(UserError):
            canonical_dtype(spelling)
    b200 = resolve_gpu("B200")
    assert gpu_lookup()("B200").peak_for(spelling) == b200.peak_tflops(name)


def test_unknown_precisions_each_reader_decides():
    from mlenergy.estimate.profile import normalise_precision
    from mlenergy.importers.common import normalise_dtype
    from mlenergy.store.gpus import gpu_lookup

    assert normalise_dtype("INT8") == "int8" and normalise_dtype("auto") is None
    with pytest.raises(UserError, match="unknown precision"):
        normalise_precision("int8")
    b200 = gpu_lookup()("B200")
    assert b200.peak_for("int8") == max(b200.peak_tflops.values())  # a floor stays a floor


def test_per_token_footprint_units_are_attached_once():
    import numpy as np
    import pandas as pd

    from mlenergy.footprint import PER_TOKEN_COLUMNS, Footprint, per_token_figures
    from mlenergy.leaderboard.footprint_view import ViewFootprint
    from mlenergy.optimize.power_cap import BEST_KEYS, PowerCapResult
    from mlenergy.optimize.site import SiteParams

    fp = Footprint.from_options(carbon_intensity=400.0, price_kwh=0.2, pue=1.3)
    view = ViewFootprint(fp.intensity, fp.pue, fp.price_per_kwh)
    ept = np.array([0.05, 0.3])
    attached = view.attach(pd.DataFrame({"energy_per_token_j": ept}))
    for i, e in enumerate(ept):
        assert attached.loc[i, list(PER_TOKEN_COLUMNS)].to_dict() == fp.per_token(float(e))
    best = pd.DataFrame([dict.fromkeys(BEST_KEYS, 1) | {"energy_per_token_j": 0.3}])
    result = PowerCapResult(best, best, SiteParams(1e5, price_kwh=0.2), "throughput", 50.0)
    assert (
        result.cost_per_million_tokens() == per_token_figures(0.3, None, 0.2)["cost_per_m_tokens"]
    )


def test_site_defaults_are_written_once():
    import inspect

    from mlenergy.commands.optimize import power_cap
    from mlenergy.leaderboard.power_budget import BudgetQuery
    from mlenergy.optimize.power_cap import plan_power_cap
    from mlenergy.optimize.site import SITE_HOST_W_PER_GPU, SITE_PUE, SiteParams

    for fn in (plan_power_cap, power_cap):
        params = inspect.signature(fn).parameters
        assert params["pue"].default == SITE_PUE
        assert params["host_w_per_gpu"].default == SITE_HOST_W_PER_GPU
    assert (BudgetQuery().pue, BudgetQuery().host_w_per_gpu) == (SITE_PUE, SITE_HOST_W_PER_GPU)
    assert (SiteParams(1.0).pue, SiteParams(1.0).host_w_per_gpu) == (SITE_PUE, SITE_HOST_W_PER_GPU)
