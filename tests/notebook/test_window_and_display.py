"""The measured window (no result inside its block), HTML display and plots, in-process."""

from __future__ import annotations

import dataclasses

import matplotlib
import pytest

from mlenergy.measure import EnergyMeter
from mlenergy.measure.window import MeasuredWindow, WindowFailed, WindowStillOpen, window_html
from mlenergy.notebook import plot
from mlenergy.notebook.display import fields_html, list_html, unit_of
from mlenergy.records import Hardware, ModelInfo, Phase, PhaseResult, RunRecord, Software, Workload

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def meter():
    m = EnergyMeter()
    yield m
    m.close()


def _busy() -> int:
    return sum(i * i for i in range(20000))


def test_result_exists_only_after_the_block(meter):
    w = MeasuredWindow("blk", meter)
    with pytest.raises(WindowStillOpen, match="no result yet"):
        w.energy_j  # noqa: B018
    with w:
        _busy()
        for attr in ("energy_j", "duration_s", "avg_power_w", "energy_by_device_j", "result"):
            with pytest.raises(WindowStillOpen, match="Read it after the with block"):
                getattr(w, attr)
    assert w.finished
    assert w.duration_s > 0
    assert w.energy_j is not None and w.energy_j > 0
    assert w.energy_source == meter.energy_source
    assert "J" in repr(w)
    with pytest.raises(Exception, match="already used"), w:
        pass


def test_failed_block_has_no_result(meter):
    w = MeasuredWindow("bad", meter)
    with pytest.raises(ZeroDivisionError), w:
        1 / 0  # noqa: B018
    with pytest.raises(WindowFailed, match="raised"):
        w.energy_j  # noqa: B018
    # The meter is still usable: the failed window was cancelled.
    with MeasuredWindow("after", meter) as ok:
        _busy()
    assert ok.energy_j is not None


def test_window_html_has_units_and_source(meter):
    with MeasuredWindow("t", meter) as w:
        _busy()
    page = window_html(w.result)
    for needle in ("time", " s<", " J<", "average power", " W<", meter.energy_source):
        assert needle in page
    assert w._repr_html_() == page


def _record(energy: float | None) -> RunRecord:
    info = ModelInfo(
        model_id="m/x", config_fingerprint="0" * 16, architecture="llama", is_moe=False,
        total_params=10, active_params=10, dtype="float32", weights="random",
    )  # fmt: skip
    return RunRecord(
        model=info,
        workload=Workload(
            kind="inference", batch_size=2, input_tokens=4, output_tokens=8, num_requests=2
        ),
        hardware=Hardware(cpu_model="cpu"),
        software=Software(python="3", mlenergy="t"),
        energy_source="modelled:cpu-tdp",
        phases=(PhaseResult.from_totals(Phase.REQUEST, 1.5, energy, 16),),
    )


def test_run_record_html_and_list_html():
    page = _record(3.0)._repr_html_()
    assert "modelled:cpu-tdp" in page and "3 J" in page and "J/token" in page
    assert "n/a" in _record(None)._repr_html_()  # a missing figure is never 0
    table = list_html([_record(3.0), _record(6.0)])
    assert table is not None and "2 run record(s)" in table
    assert list_html([1, 2]) is None  # other lists keep their default display


def test_fields_html_of_a_dataclass_states_units():
    @dataclasses.dataclass
    class Estimate:
        energy_per_token_j: float
        itl_s: float
        avg_power_w: float
        energy_source: str

    page = fields_html(Estimate(0.5, 0.02, 300.0, "estimated:test"))
    assert "J/token" in page and "W" in page and "estimated:test" in page
    assert unit_of("request_duration_s") == "s" and unit_of("sm_clock_mhz") == "MHz"
    assert unit_of("energy_per_token_j_lo") == "J/token"


def test_plot_one_call_away(meter):
    with MeasuredWindow("p", meter) as w:
        _busy()
    assert plot(w).axes
    assert plot(_record(3.0)).axes
    assert plot([_record(3.0), _record(4.0)]).axes
    with pytest.raises(TypeError, match="cannot plot"):
        plot(42)


def test_plot_keeps_its_axis_labels_inside_the_figure():
    fig = plot([_record(3.0), _record(4.0)])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for label in (fig.axes[0].xaxis.label, fig.axes[0].yaxis.label):
        box = label.get_window_extent(renderer)
        assert box.y0 >= 0 and box.x0 >= 0, label.get_text()


def test_formatted_types_name_classes_that_exist():
    """Every (module, class) the formatters register is a real class where the module exists."""
    import importlib
    import importlib.util

    from mlenergy.notebook.display import FORMATTED_TYPES

    checked = 0
    for module, name in FORMATTED_TYPES:
        package = module.rsplit(".", 1)[0]
        if importlib.util.find_spec(package) is None or importlib.util.find_spec(module) is None:
            continue  # that part of the project is not installed here
        assert isinstance(getattr(importlib.import_module(module), name, None), type), (
            f"{module}.{name} is not a class"
        )
        checked += 1
    assert checked >= 2  # at least the estimate and the window result


def test_save_store_follows_the_commands_default(monkeypatch, tmp_path):
    from pathlib import Path

    from mlenergy.notebook.magic import store_dir

    monkeypatch.delenv("MLENERGY_DATA_DIR", raising=False)
    assert store_dir(None) == Path("data")
    monkeypatch.setenv("MLENERGY_DATA_DIR", str(tmp_path / "store"))
    assert store_dir(None) == tmp_path / "store"
    assert store_dir("elsewhere") == Path("elsewhere")


def test_plot_draws_intervals_and_marks_a_wide_one():
    from mlenergy.records import Interval

    def with_interval(energy: float, low: float, high: float, wide: bool) -> RunRecord:
        r = _record(energy)
        phase = r.phases[0].model_copy(
            update={"energy_per_token_j_ci95": Interval(low=low, high=high), "wide_interval": wide}
        )
        return r.model_copy(update={"phases": (phase,)})

    fig = plot([with_interval(3.2, 0.19, 0.21, False), with_interval(3.2, 0.1, 0.3, True)])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["!"]  # only the wide one is marked
    assert "95% interval" in ax.get_title()
