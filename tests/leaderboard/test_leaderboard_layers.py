"""The reference layer beside the store, the default view (measured GPU rows), and its choices."""

from __future__ import annotations

import json
import math

import gradio as gr
import pandas as pd
import pytest

from mlenergy.cli import main
from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard import reference_layer as layer_module
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.data import LeaderboardData
from mlenergy.leaderboard.published import published_key
from mlenergy.records import Hardware
from mlenergy.store import RunStore
from mlenergy.store.tables import flatten_run
from mlenergy.testing.synthetic import synthetic_model, synthetic_quality, synthetic_run

TOY = synthetic_model("toy/tiny-gpt", 0.01, False)
LMARENA = published_key("LMArena text score")
GPQA = published_key("GPQA-Diamond")


def toy_runs() -> list:
    """What the demo leaves in a store: CPU runs with modelled energy, odd tasks, emulated runs."""
    out = []
    for i, task in enumerate(("(none)", "dense-vs-moe", "notebook-cell")):
        run = synthetic_run(TOY, task=task, energy_source="modelled:cpu-tdp", index=500 + i)
        hw = Hardware(cpu_model="AMD EPYC 7B13", accelerator_count=0)
        work = run.workload.model_copy(update={"method": "static-batch", "device": "cpu"})
        out.append(run.model_copy(update={"hardware": hw, "workload": work}))
    out.append(synthetic_run(TOY, task="dense-vs-moe", index=510))  # emulated GPU
    return out


@pytest.fixture(scope="module")
def toy_store(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("toy-store")
    quality = synthetic_quality(TOY, 90.0, metric="perplexity")
    RunStore(data_dir).append([*toy_runs(), quality])
    return data_dir


@pytest.fixture(scope="module")
def ctx(toy_store):
    return AppContext.load(toy_store)


def test_reference_shows_without_import_and_is_read_once(tmp_path, monkeypatch):
    data = LeaderboardData.load(tmp_path / "empty")
    ref = data.runs[data.runs["layer"] == "reference"]
    assert len(ref) == len(data.runs) > 800
    assert set(ref["method"]) == {"serving-steady-state"}
    assert data.get_run(ref["run_id"].iloc[0]).energy_source == "measured:zeus-nvml"

    def _refuse(*a, **k):
        raise AssertionError("the reference was read twice in one process")

    monkeypatch.setattr("mlenergy.reference.runs.read_reference", _refuse)
    again = LeaderboardData.load(tmp_path / "empty")
    assert again.reference is data.reference
    RunStore(tmp_path / "empty").append(toy_runs()[:1])
    assert again.reload() and len(again.runs) == len(data.runs) + 1


def test_store_seeded_by_the_old_import_shows_each_reference_run_once(tmp_path):
    layer = layer_module.reference_layer()
    some = list(layer.records.values())[:5]
    RunStore(tmp_path).append([*some, *toy_runs()[:1]])
    data = LeaderboardData.load(tmp_path)
    assert data.runs["run_id"].is_unique
    assert len(data.runs) == len(layer.records) + 1
    assert (data.runs["layer"] == "store").sum() == 1


def test_default_view_is_measured_gpu_rows(ctx):
    view = ctx.view(None)
    assert view.sources == lb.DEFAULT_SOURCES
    assert "AMD EPYC 7B13" not in view.choices["hardware"]
    assert not {"(none)", "dense-vs-moe", "notebook-cell"} & set(view.choices["task"])
    assert view.default_task == "lm-arena-chat"
    q = lb.TableQuery(task=None, source_kinds=lb.DEFAULT_SOURCES, best_only=False)
    rows = lb.query_table(ctx.frame(None), q).rows
    assert set(rows["source_class"]) == {"measured-gpu"}
    assert (rows["layer"] == "reference").all()
    # the toy latencies (over a second per token) do not stretch the default slider
    assert view.limits[0] == 450.0
    assert ctx.limits == view.limits


def test_asked_for_sources_join_and_stay_apart(ctx):
    view = ctx.view(["measured-gpu", "modelled"])
    assert "AMD EPYC 7B13" in view.choices["hardware"]
    assert {"(none)", "dense-vs-moe", "notebook-cell"} <= set(view.choices["task"])
    q = lb.TableQuery(source_kinds=view.sources, best_only=False, sort_by="energy_per_token_j")
    rows = lb.query_table(ctx.frame(None), q).rows
    apart = rows["apart"].tolist()
    assert apart == sorted(apart) and any(apart) and not all(apart)  # measured rows first
    assert set(rows.loc[rows["apart"], "source_class"]) == {"modelled"}
    # the toy runs' energy per token is below most measured rows, yet they come last
    toy_best = rows.loc[rows["apart"], "energy_per_token_j"].min()
    assert toy_best < rows.loc[~rows["apart"], "energy_per_token_j"].max()
    only_toy = ctx.view(["emulated"])
    assert only_toy.choices["hardware"] == ["H100-SXM5-80GB"]


def test_quality_follows_the_task_and_toy_perplexity_stays_out(ctx):
    view = ctx.view(None)
    assert view.quality_for("lm-arena-chat") == LMARENA
    assert view.quality_for("gpqa") == GPQA
    assert view.quality_for("code") is None
    toy_key = "lm-eval:synthetic / perplexity"
    assert toy_key in ctx.quality_keys  # stored...
    assert toy_key not in view.quality_keys  # ...but scores no model in view
    assert toy_key in ctx.view(["modelled"]).quality_keys


def test_method_filter(ctx):
    frame = ctx.frame(None)
    serving = lb.query_table(frame, lb.TableQuery(methods=("serving-steady-state",)))
    static = lb.query_table(
        frame, lb.TableQuery(methods=("static-batch",), source_kinds=("modelled",))
    )
    assert set(serving.rows["method"]) == {"serving-steady-state"}
    assert static.total > 0 and set(static.rows["method"]) == {"static-batch"}
    assert "serving-steady-state" in ctx.choices["method"]


def test_a_serving_record_appears_under_serving(tmp_path):
    run = synthetic_run(TOY, energy_source="measured:zeus-nvml", index=7)
    work = run.workload.model_copy(update={"method": "serving-steady-state"})
    RunStore(tmp_path).append([run.model_copy(update={"workload": work})])
    data = LeaderboardData.load(tmp_path, reference=False)
    q = lb.TableQuery(methods=("serving-steady-state",), source_kinds=lb.DEFAULT_SOURCES)
    assert lb.query_table(data.frame(None), q).rows["run_id"].tolist() == [run.run_id]


@pytest.mark.parametrize("value", [1e308, math.inf, math.nan, -5.0, 0.0, 1e-300, 449.6])
def test_slider_limit_is_finite_and_sane(value):
    end = lb.slider_limit(value, lb.ITL_CAP_MS)
    assert math.isfinite(end) and 0 < end <= lb.ITL_CAP_MS
    assert lb.slider_limit(449.6) == 450.0


def test_absurd_stored_values_still_build_the_filter_bar(tmp_path):
    from mlenergy.leaderboard.filters import build_filter_bar

    base = synthetic_run(TOY, energy_source="measured:zeus-nvml", index=1)
    row = flatten_run(base)
    huge = {**row, "run_id": "huge-energy", "request_energy_j": 1e308}
    huge["request_energy_per_token_j"] = 1e308
    slow = {**row, "run_id": "slow", "request_duration_s": 1e17, "itl_p50_s": 1e17}
    data = LeaderboardData.from_frames(pd.DataFrame([row, huge, slow]))
    ctx = AppContext(data=data, data_dir=tmp_path, choices={}, limits=(1.0, 1.0))
    ctx._refresh_choices()
    itl_end, energy_end = ctx.view(None).limits
    assert itl_end == lb.ITL_CAP_MS and energy_end == lb.ENERGY_CAP_J
    with gr.Blocks():
        bar = build_filter_bar(ctx)
    assert bar.itl.maximum == lb.ITL_CAP_MS and bar.budget.maximum == lb.ENERGY_CAP_J
    # at its end the slider means no limit: the absurd rows are still listed
    res = lb.query_table(ctx.frame(None), lb.TableQuery(best_only=False))
    assert res.total == 3


def test_import_reference_is_a_no_op_with_a_note(tmp_path, capsys):
    rc = main(["leaderboard", "import-reference", "--data-dir", str(tmp_path)])
    assert rc == 0
    assert "always shows the ML.ENERGY reference" in capsys.readouterr().out
    assert not (tmp_path / "results").exists()


def test_rows_apart_render_under_a_note(ctx):
    from mlenergy.leaderboard.html import APART_NOTE, render_table

    q = lb.TableQuery(source_kinds=("measured-gpu", "modelled"), best_only=False, page_size=2000)
    html = render_table(lb.query_table(ctx.frame(None), q).page_rows)
    assert html.count('class="lb-apart-head"') == 1 and APART_NOTE in html
    assert html.index("lb-apart-head") < html.index('class="lb-apart"')
    default = render_table(
        lb.query_table(ctx.frame(None), lb.TableQuery(source_kinds=lb.DEFAULT_SOURCES)).page_rows
    )
    assert "lb-apart" not in default


@pytest.mark.parametrize(
    "values,expected",
    [
        ([0.04, 0.3], ["0.05", "0.1", "0.2"]),
        ([0.02, 0.09], ["0.02", "0.05", "0.1"]),
        ([450, 2000], ["500", "1,000", "2,000"]),
        ([1e-5, 10.0], ["1e-05", "0.0001", "0.001", "0.01", "0.1", "1", "10"]),
    ],
)
def test_log_ticks_carry_full_values(values, expected):
    from mlenergy.leaderboard.plots import log_ticks

    vals, text = log_ticks(values)
    assert text == expected
    assert all(
        float(t.replace(",", "")) == pytest.approx(v) for t, v in zip(text, vals, strict=True)
    )


def test_scatter_log_axis_has_labelled_ticks(ctx):
    from mlenergy.leaderboard import plots

    rows = ctx.frame(None)
    fig = plots.energy_vs_latency(rows[rows["task"] == "lm-arena-chat"])
    assert fig.layout.yaxis.type == "log"
    assert all(
        not t.isdigit() or t in {"1", "2", "5", "10", "20", "50"} for t in fig.layout.yaxis.ticktext
    )
    assert any("." in t for t in fig.layout.yaxis.ticktext)


def test_the_app_starts_over_stored_runs_of_1e308_joules_and_1e17_seconds(tmp_path):
    from mlenergy.leaderboard.app import build_app

    run = synthetic_run(synthetic_model("evil/x", 1.0, False), energy_source="measured:zeus-nvml")
    phase = run.phases[0]
    huge = phase.model_copy(update={"energy_j": 1e308, "energy_per_token_j": 1e308 / phase.tokens})
    slow = phase.model_copy(update={"duration_s": 1e17, "itl_p50_s": 1e17})
    RunStore(tmp_path).append(
        [
            run.model_copy(update={"run_id": "huge-energy", "phases": (huge,)}),
            run.model_copy(update={"run_id": "slow-run", "phases": (slow,)}),
        ]
    )
    demo = build_app(tmp_path)
    by_id = {getattr(b, "elem_id", None): b for b in demo.blocks.values()}
    assert by_id["f-itl"].maximum == lb.ITL_CAP_MS
    assert by_id["f-budget"].maximum == lb.ENERGY_CAP_J
    json.dumps(demo.get_config_file(), allow_nan=False)  # what the page receives


def test_rows_apart_are_hollow_markers_in_the_plots(ctx):
    from mlenergy.leaderboard import plots

    rows = ctx.frame(None)
    fig = plots.energy_vs_latency(rows[lb.source_mask(rows, ("measured-gpu", "modelled"))])
    apart = [t for t in fig.data if "not measured on GPUs" in (t.name or "")]
    measured = [t for t in fig.data if t.name and "measured" in t.name and t not in apart]
    assert apart and all(t.marker.symbol.endswith("-open") for t in apart)
    assert all(not str(t.marker.symbol).endswith("-open") for t in measured if t.mode == "markers")


def test_the_method_column_shows_how_a_static_batch_decoded(tmp_path):
    from mlenergy.leaderboard.html import render_table
    from mlenergy.records import GenerationInfo

    run = synthetic_run(TOY, energy_source="measured:zeus-nvml", index=8)
    work = run.workload.model_copy(update={"method": "static-batch"})
    gen = GenerationInfo(
        backend="compiled-static-cache", torch="2.9", transformers="5.2",
        compile_mode="reduce-overhead",
    )  # fmt: skip
    RunStore(tmp_path).append([run.model_copy(update={"workload": work, "generation": gen})])
    data = LeaderboardData.load(tmp_path, reference=False)
    q = lb.TableQuery(methods=("static-batch",), source_kinds=lb.DEFAULT_SOURCES)
    rows = lb.query_table(data.frame(None), q).rows
    assert rows["method"].tolist() == ["static-batch · compiled-static-cache"]
    assert "static-batch · compiled-static-cache" in render_table(rows)
    assert lb.filter_choices(data.frame(None))["method"] == ["static-batch"]
