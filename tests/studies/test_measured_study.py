"""The measured dense-vs-MoE study on a small fixture, its report, CLI and bad input."""

from __future__ import annotations

import csv
import math
import re

import pandas as pd
import pytest
from measured_fixture import QUALITY_ROWS, fixture_runs, model, stored_quality, write_quality

from mlenergy.cli import main
from mlenergy.errors import UserError
from mlenergy.quality.published import match_score, read_published_quality
from mlenergy.reference import reference_dir
from mlenergy.store import RunStore
from mlenergy.studies.measured import SUMMARY_COLUMNS, energy_per_correct
from mlenergy.studies.measured_study import run_measured_study

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The study of the fixture store, built once: the tests that take it only read it."""
    tmp = tmp_path_factory.mktemp("study")
    RunStore(tmp / "data").append(fixture_runs())
    return run_measured_study(
        tmp / "data",
        quality_file=write_quality(tmp / "quality.csv"),
        report_dir=tmp / "report",
        progress=False,
        include_reference=False,
    )


def _row(result, model_id: str, task: str) -> pd.Series:
    rows = result.rows
    return rows[(rows["model_id"] == model_id) & (rows["task"] == task)].iloc[0]


def test_report_files_and_exact_summary_columns(study):
    for name in ("index.html", "summary.md", "summary.csv"):
        assert (study.report_dir / name).is_file()
    assert list(pd.read_csv(study.csv_path).columns) == list(SUMMARY_COLUMNS)
    with study.csv_path.open() as fh:
        assert next(csv.reader(fh)) == list(SUMMARY_COLUMNS)
    assert any(p.suffix == ".png" for p in study.report_dir.iterdir())
    page = (study.report_dir / "index.html").read_text()
    assert "../dense-vs-moe/index.html" in page  # links the toy study
    assert "not measured in the same run" in page
    assert "published:GPQA-Diamond" in page
    assert "measured:zeus-nvml" in page


def test_one_row_per_model_gpu_task(study):
    summary = pd.read_csv(study.csv_path)
    keys = summary[["model_id", "gpu", "task"]].apply(tuple, axis=1)
    assert keys.is_unique
    assert len(summary) == 6  # 3 models x 2 tasks on one GPU


def test_energy_per_correct_identity(study):
    summary = pd.read_csv(study.csv_path)
    acc = summary[summary["quality_benchmark"] == "GPQA-Diamond"].dropna(subset=["quality_score"])
    assert len(acc) == 2
    expected = acc["energy_per_response_j"] / (acc["quality_score"] / 100)
    assert (acc["energy_per_correct_j"] - expected).abs().max() < 1e-9
    elo = summary[summary["quality_benchmark"] == "LMArena text score"]
    assert elo["quality_score"].notna().any()
    assert elo["energy_per_correct_j"].isna().all()  # an Elo score is not an accuracy
    assert energy_per_correct(1000.0, 50.0, True) == 2000.0
    assert math.isnan(energy_per_correct(1000.0, 1300.0, False))


def test_lowest_energy_within_the_deadline(study):
    a = _row(study, "org/dense-a", "gpqa")
    # 0.10 J/token misses 50 ms; 0.30 J/token (40 ms) beats 0.40 J/token (20 ms).
    assert a["median_itl_ms"] == pytest.approx(40.0)
    assert a["energy_per_token_j"] == pytest.approx(0.30)
    assert a["energy_per_response_j"] == pytest.approx(0.30 * 6000)


def test_thinking_and_non_thinking_matched_from_output_length(study):
    a = _row(study, "org/dense-a", "gpqa")
    assert a["quality_score"] == 70.0  # 6,000 tokens: a thinking run gets the thinking score
    assert a["run_mode"] == "thinking"
    assert "thinking" in a["quality_how"] and "6,000" in a["quality_how"]
    assert a["quality_source"] == "published:GPQA-Diamond"
    # The same model measured with short outputs gets its non-thinking score.
    scores = read_published_quality(study.quality_path)
    short = match_score(scores, "org/dense-a", "GPQA-Diamond", mean_output_tokens=600)
    assert short.score.score == 50.0
    assert short.run_mode == "non-thinking"


def test_model_without_score_in_energy_tables_not_in_quality_comparisons(study):
    c = _row(study, "org/dense-c", "gpqa")
    assert math.isfinite(c["energy_per_response_j"])
    assert math.isnan(c["quality_score"])
    assert "no GPQA-Diamond figure" in c["quality_reason"]
    assert "org/dense-c" not in set(study.frontier["model_id"])
    assert "org/dense-c" not in set(study.pairs["dense"])
    assert any(
        "org/dense-c" in w and "left out of quality comparisons" in w for w in study.warnings
    )
    page = (study.report_dir / "index.html").read_text()
    assert "org/dense-c" in page and "left out of quality comparisons" in page


def test_unmatched_quality_model_is_a_listed_warning(study):
    assert any("org/ghost" in w and "match no measured model" in w for w in study.warnings)
    assert "org/ghost" not in set(study.rows["model_id"])


def test_matched_pair_ratio_with_the_range_of_that_same_ratio(study):
    gpqa = study.pairs[study.pairs["task"] == "gpqa"]
    assert len(gpqa) == 1  # dense-a 70 vs moe-b 71: within 3 points
    pair = gpqa.iloc[0]
    assert (pair["dense"], pair["moe"]) == ("org/dense-a", "org/moe-b")
    moe_best = 0.12 * 5000
    assert pair["energy_ratio"] == pytest.approx(moe_best / (0.30 * 6000))
    # Configurations within 50 ms: dense-a 0.30 x 6000 and 0.40 x 6100; moe-b 0.12 x 5000 and
    # 0.15 x 5100. The range is the ratio's own, over every pairing of those configurations.
    dense, moe = [0.30 * 6000, 0.40 * 6100], [0.12 * 5000, 0.15 * 5100]
    ratios = [m / d for m in moe for d in dense]
    assert pair["ratio_range_low"] == pytest.approx(min(ratios))
    assert pair["ratio_range_high"] == pytest.approx(max(ratios))
    assert pair["ratio_range_low"] <= pair["energy_ratio"] <= pair["ratio_range_high"]
    assert pair["configs_dense"] == 2 and pair["configs_moe"] == 2
    assert "ratio_ci_low" not in study.pairs.columns
    assert study.conclusion and any("Matched-quality pairs: " in p for p in study.conclusion)


def test_frontier_and_parameter_fits(study):
    gpqa = study.frontier[study.frontier["task"] == "gpqa"]
    assert set(gpqa.loc[gpqa["on_frontier"], "model_id"]) == {"org/moe-b"}  # cheaper and better
    fits = study.fits
    assert set(fits["predictor"]) <= {"active", "total"}
    assert (fits["points"] >= 3).all()


def test_store_quality_beats_published(measured_store, quality_file, tmp_path):
    RunStore(measured_store).append([stored_quality(model("org/moe-b", True, 120, 6), 0.9)])
    result = run_measured_study(
        measured_store,
        quality_file=quality_file,
        report_dir=tmp_path / "r",
        progress=False,
        include_reference=False,
    )
    b = _row(result, "org/moe-b", "gpqa")
    assert b["quality_score"] == pytest.approx(90.0)
    assert b["quality_source"] == "measured:lm-eval:gpqa_diamond_cot_zeroshot"


def test_cli_prints_both_paths_on_its_last_line(measured_store, quality_file, tmp_path, capsys):
    code = main(
        [
            "study", "dense-vs-moe", "--measured", "--without-reference", "--data-dir",
            str(measured_store),
            "--quality-file", str(quality_file), "--report-dir", str(tmp_path / "rep"),
            "--gpu", "B200", "--itl-limit-ms", "50", "--benchmark", "GPQA-Diamond",
            "--no-progress",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    assert re.fullmatch(r"summary: \S+summary\.csv  report: \S+index\.html", out[-1])


@pytest.mark.parametrize(
    "rows,header,needle",
    [
        (
            QUALITY_ROWS,
            ["model_id", "benchmark", "unit", "setting", "source", "source_date"],
            "missing column(s) score",
        ),
        (
            [*QUALITY_ROWS[:2], ["org/moe-b", "GPQA-Diamond", "high", "% accuracy", "", "s", "d"]],
            None,
            "line 4 (org/moe-b, GPQA-Diamond): score 'high' is not a number",
        ),
        (
            [*QUALITY_ROWS[:1], ["org/moe-b", "GPQA-Diamond", "171", "% accuracy", "", "s", "d"]],
            None,
            "line 3 (org/moe-b, GPQA-Diamond): score 171 is outside the range",
        ),
    ],
)
def test_bad_quality_file_is_one_line_naming_the_row(
    measured_store, tmp_path, capsys, rows, header, needle
):
    if header is not None:
        keep = [i for i, h in enumerate(["model_id", "benchmark", "score", "unit", "setting",
                                          "source", "source_date"]) if h in header]  # fmt: skip
        rows = [[r[i] for i in keep] for r in rows]
        path = write_quality(tmp_path / "bad.csv", rows, header)
    else:
        path = write_quality(tmp_path / "bad.csv", rows)
    report = tmp_path / "rep"
    code = main(
        ["study", "dense-vs-moe", "--measured", "--without-reference", "--data-dir",
            str(measured_store),
         "--quality-file", str(path), "--report-dir", str(report), "--no-progress"]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error: ")
    assert needle in err[0]
    assert not report.exists()  # nothing written


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--gpu", "A100"], "no measured GPU inference run on GPU 'A100'"),
        (["--gpu", "A100"], "pick --gpu from the measured GPUs: B200"),
        (
            ["--itl-limit-ms", "5"],
            "no measured configuration meets --itl-limit-ms 5 (the "
            "fastest median ITL is 10.0 ms: org/dense-c on B200, lm-arena-chat)",
        ),
        (["--benchmark", "MMLU-Pro"], "benchmark 'MMLU-Pro' is not in quality.csv"),
        (["--itl-limit-ms", "0"], "--itl-limit-ms must be positive"),
    ],
)
def test_nothing_to_compute_exits_2(measured_store, quality_file, tmp_path, capsys, extra, needle):
    code = main(
        ["study", "dense-vs-moe", "--measured", "--without-reference", "--data-dir",
            str(measured_store),
         "--quality-file", str(quality_file), "--report-dir", str(tmp_path / "rep"),
         "--no-progress", *extra]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err


def test_reference_is_read_beside_the_store_never_imported(tmp_path, measured_store):
    ref = reference_dir()
    before = sorted(p.name for p in measured_store.rglob("*") if p.is_file())
    sizes = {p: p.stat().st_size for p in measured_store.rglob("*") if p.is_file()}
    result = run_measured_study(
        measured_store, ref, report_dir=tmp_path / "rep", progress=False, gpu="B200"
    )
    assert result.from_reference > 0
    assert (result.rows["gpu"] == "B200").all()
    assert "ML.ENERGY Leaderboard v3" in result.energy_note
    ids = set(result.rows["model_id"])
    assert "org/moe-b" in ids and "Qwen/Qwen3-8B" in ids  # the store's and the reference's
    # The store is untouched: same files, same sizes.
    assert sorted(p.name for p in measured_store.rglob("*") if p.is_file()) == before
    assert all(p.stat().st_size == n for p, n in sizes.items())
    gpqa = result.rows[(result.rows["task"] == "gpqa") & result.rows["quality_score"].notna()]
    assert len(gpqa) >= 4
    assert (
        "read beside it (read only, not imported)" in (result.report_dir / "summary.md").read_text()
    )


def test_empty_store_reads_the_reference_and_creates_nothing(reference_study):
    result = reference_study  # the study of a store folder that does not exist
    assert result.from_reference > 0 and not result.data_dir.exists()


def test_a_store_seeded_with_the_reference_counts_each_run_once(tmp_path, reference_study):
    from mlenergy.reference.runs import read_reference

    data = tmp_path / "data"
    b200 = [r for r in read_reference() if r.hardware.accelerator_model.startswith("B200")]
    assert len(b200) > 50
    RunStore(data).append(b200[:50])
    # One GPU's study (half the fits and figures): the copies are dropped before any filter.
    result = run_measured_study(data, report_dir=tmp_path / "rep", progress=False, gpu="B200")
    assert result.configs["run_id"].is_unique
    alone = reference_study.configs[reference_study.configs["gpu"] == "B200"]
    assert len(alone) > 50
    assert len(result.configs) == len(alone)  # the reference alone


def test_study_with_a_reference_variable_naming_no_folder(tmp_path, monkeypatch, measured_store):
    monkeypatch.setenv("MLENERGY_REFERENCE_DIR", str(tmp_path / "absent"))
    with pytest.raises(UserError, match=r"MLENERGY_REFERENCE_DIR is .* not a folder"):
        run_measured_study(measured_store, report_dir=tmp_path / "rep", progress=False)


def test_energy_per_correct_within_each_deadline(study):
    table = study.deadlines
    a = table[(table["model_id"] == "org/dense-a") & (table["task"] == "gpqa")].iloc[0]
    assert a["<= 25 ms"] == pytest.approx(0.40 * 6100 / 0.70)  # only the 20 ms configuration
    assert a["<= 50 ms"] == pytest.approx(0.30 * 6000 / 0.70)
    assert a["<= 100 ms"] == pytest.approx(0.10 * 6000 / 0.70)
    assert "org/dense-c" not in set(table["model_id"])  # no score, no energy per correct


def test_conclusion_says_where_the_data_cannot_decide(study):
    gpqa = next(p for p in study.conclusion if p.startswith("gpqa on B200"))
    # MoE spends a third of the energy: +-6 points of sampling error cannot reverse that.
    assert "do not change the order" in gpqa
    from mlenergy.studies.measured_conclusion import _overlap_clause

    def row(energy, score):
        return pd.Series({"energy_per_response_j": energy, "quality_score": score,
                          "quality_benchmark": "GPQA-Diamond",
                          "energy_per_correct_j": energy / (score / 100)})  # fmt: skip

    assert "the data cannot decide" in _overlap_clause(row(1000, 70), row(1050, 71))
    assert "no sampling interval" in _overlap_clause(
        row(1000, 70).replace("GPQA-Diamond", "MMLU-Pro"), row(1050, 71)
    )
    assert any("Quality was not measured in the same runs" in p for p in study.conclusion)
    assert "temperature 0.8, top-p 0.95" in study.conclusion[-1]
    page = (study.report_dir / "index.html").read_text()
    assert "[" in page and "J per correct" in page  # the interval column


def test_no_quality_row_matching_any_model_exits_2(measured_store, tmp_path, capsys):
    path = write_quality(tmp_path / "q.csv", [r for r in QUALITY_ROWS if r[0] == "org/ghost"])
    code = main(
        ["study", "dense-vs-moe", "--measured", "--without-reference", "--data-dir",
            str(measured_store),
         "--quality-file", str(path), "--report-dir", str(tmp_path / "rep"), "--no-progress"]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "line 2 (org/ghost) name no measured model" in err[0]
    assert not (tmp_path / "rep").exists()


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--measured", "--steps", "3"], "--steps does not apply with --measured"),
        (["--gpu", "B200"], "--gpu does not apply without --measured"),
    ],
)
def test_options_of_the_other_study_are_refused(tmp_path, capsys, args, needle):
    code = main(["study", "dense-vs-moe", "--data-dir", str(tmp_path / "d"), *args])
    assert code == 2
    assert needle in capsys.readouterr().err


def test_too_few_models_for_any_fit_still_reports(tmp_path, quality_file):
    """Two models per task and GPU: too few for a fit; the conclusion and report are written."""
    data = tmp_path / "small"
    RunStore(data).append([r for r in fixture_runs() if r.model.model_id != "org/dense-c"][3:])
    result = run_measured_study(
        data,
        quality_file=quality_file,
        report_dir=tmp_path / "r",
        progress=False,
        include_reference=False,
    )
    assert result.fits.empty and "family" in result.fits.columns
    assert "ratio_range_low" in result.pairs.columns
    assert result.csv_path.is_file()
    assert not any("parameter count" in p for p in result.conclusion)


def test_store_quality_labels_and_filter_choice():
    """Imported or submitted records are ``imported:``; strict-match wins over other filters."""
    from datetime import UTC, datetime

    from mlenergy.records.run import SubmissionInfo
    from mlenergy.studies.measured import store_quality

    info = model("org/moe-b", True, 120, 6)
    base = stored_quality(info, 0.9)
    imported = {"imported_from": "lm-eval", "origin": "lm-eval 0.4.13"}
    strict = base.model_copy(
        update={"metric": "exact_match,strict-match", "value": 0.7,
                "tags": {**imported, "filter": "strict-match"}}
    )  # fmt: skip
    flexible = base.model_copy(
        update={"metric": "exact_match,flexible-extract", "value": 0.8,
                "tags": {**imported, "filter": "flexible-extract"}}
    )  # fmt: skip
    for records in ([strict, flexible], [flexible, strict]):
        fig = store_quality(records, "org/moe-b", "GPQA-Diamond")
        assert fig.score == pytest.approx(70.0)
        assert fig.source_label == "imported:lm-eval:gpqa_diamond_cot_zeroshot"
        assert "lm-eval 0.4.13" in fig.reference and "flexible-extract 80" in fig.how
    when = datetime(2026, 1, 1, tzinfo=UTC)
    submitted = base.model_copy(
        update={"submission": SubmissionInfo(submission_id="s1", submitter="Lab X",
                                             submitted_at=when)}
    )  # fmt: skip
    fig = store_quality([submitted], "org/moe-b", "GPQA-Diamond")
    assert fig.source_label.startswith("imported:") and "submitted by Lab X" in fig.reference
    own = store_quality([base], "org/moe-b", "GPQA-Diamond")
    assert own.source_label.startswith("measured:") and "this project" in own.reference


def test_store_quality_prefers_the_group_to_its_subtasks():
    """An lm-eval group (``mmlu_pro``) and its subtasks: the group's figure is the benchmark's."""
    from mlenergy.studies.measured import store_quality

    info = model("org/moe-b", True, 120, 6)
    base = stored_quality(info, 0.5)
    group = base.model_copy(
        update={"task": "lm-eval:mmlu_pro", "value": 0.61, "tags": {"group": "true"}}
    )
    subtasks = [
        base.model_copy(update={"task": f"lm-eval:mmlu_pro_{name}", "value": v})
        for name, v in (("biology", 0.8), ("law", 0.3))
    ]
    for records in ([*subtasks, group], [group, *subtasks]):
        fig = store_quality(records, "org/moe-b", "MMLU-Pro")
        assert fig.score == pytest.approx(61.0)
        assert fig.source_label == "measured:lm-eval:mmlu_pro"
