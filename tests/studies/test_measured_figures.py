"""Labels of the measured study's figures: where the quality came from, one panel row per GPU."""

from __future__ import annotations

import pandas as pd
import pytest

from mlenergy.studies import measured_figures as mf


def _rows(sources: list[str], gpus: list[str]) -> pd.DataFrame:
    n = len(sources)
    return pd.DataFrame(
        {
            "model_id": [f"org/m{i}" for i in range(n)],
            "arch": ["dense", "moe"] * (n // 2) + ["dense"] * (n % 2),
            "gpu": gpus,
            "task": ["gpqa"] * n,
            "energy_per_response_j": [100.0 * (i + 1) for i in range(n)],
            "energy_per_token_j": [0.1 * (i + 1) for i in range(n)],
            "energy_per_correct_j": [200.0 * (i + 1) for i in range(n)],
            "quality_score": [60.0 + i for i in range(n)],
            "quality_benchmark": ["GPQA-Diamond"] * n,
            "quality_source": sources,
            "active_params": [1e9 * (i + 1) for i in range(n)],
            "total_params": [3e9 * (i + 1) for i in range(n)],
            "on_frontier": [True] * n,
        }
    )


@pytest.fixture
def drawn(monkeypatch, tmp_path):
    """The figures drawn (not saved): each as its axes' labels and titles and its footer."""
    import matplotlib

    matplotlib.use("Agg")
    seen: list[dict] = []

    def keep(fig, path, note):
        axes = fig.get_axes()
        seen.append(
            {
                "ylabels": [a.get_ylabel() for a in axes],
                "titles": [a.get_title() for a in axes],
                "legends": [[t.get_text() for t in a.get_legend().get_texts()]
                            for a in axes if a.get_legend()],
                "note": note,
                "labels": [(t.get_text(), t.xyann) for a in axes for t in a.texts],
            }
        )  # fmt: skip
        return path.name

    monkeypatch.setattr(mf, "_save", keep)
    return seen


def test_quality_kind_names_each_source_once():
    assert mf.quality_kind(pd.Series(["published:GPQA-Diamond"] * 2)) == "published"
    mixed = pd.Series(["published:GPQA-Diamond", "imported:lm-eval:gpqa", ""])
    assert mf.quality_kind(mixed) == "imported or published"
    assert mf.quality_kind(pd.Series([""])) == "no quality"


def test_axis_and_footer_say_imported_when_quality_is_imported(drawn, tmp_path):
    rows = _rows(["imported:lm-eval:gpqa_diamond_cot_zeroshot"] * 2, ["B200"] * 2)
    mf.write_measured_figures(rows, rows, tmp_path, "Energy: measured:zeus-nvml.")
    scatter, bars, _ = drawn
    assert scatter["ylabels"] == ["GPQA-Diamond (imported)"]
    assert "published" not in " ".join(scatter["ylabels"] + bars["titles"])
    assert "imported" in bars["titles"][0]
    assert bars["legends"] == [["dense", "moe"]]  # the bar colours are explained
    assert "Quality: imported scores" in scatter["note"]
    assert "not measured in the same runs" in scatter["note"]


def test_parameters_figure_has_one_row_per_gpu(drawn, tmp_path):
    rows = _rows(["published:GPQA-Diamond"] * 4, ["B200", "B200", "H100", "H100"])
    mf.write_measured_figures(rows, rows, tmp_path, "Energy: measured:zeus-nvml.")
    params = drawn[-1]
    assert len(params["titles"]) == 4
    assert params["titles"][0].startswith("B200: ") and params["titles"][2].startswith("H100: ")


def test_labels_of_points_at_one_place_do_not_cover_each_other(drawn, tmp_path):
    rows = _rows(["published:GPQA-Diamond"] * 3, ["B200"] * 3)
    rows.loc[1, ["energy_per_response_j", "quality_score"]] = rows.loc[0, [
        "energy_per_response_j", "quality_score"]].to_numpy()  # fmt: skip
    mf.write_measured_figures(rows, rows, tmp_path, "Energy: measured:zeus-nvml.")
    labels = dict(drawn[0]["labels"])
    assert set(labels) == {"m0", "m1", "m2"}
    assert labels["m0"][1] != labels["m1"][1]  # moved apart vertically


def _png_size(path) -> tuple[int, int]:
    """Width and height in pixels, read from the PNG's IHDR chunk."""
    import struct

    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


@pytest.mark.slow
def test_saved_figures_fit_a_report_page_with_readable_text(tmp_path, monkeypatch):
    """Four task x GPU panels: a 2 x 2 grid about 1,100 px wide, no text under 9 pt."""
    import matplotlib

    matplotlib.use("Agg")
    rows = _rows(["published:GPQA-Diamond"] * 8, ["B200", "H100"] * 4)
    rows["task"] = ["gpqa", "gpqa", "lm-arena-chat", "lm-arena-chat"] * 2
    sizes: list[float] = []
    save = mf._save

    def measure(fig, path, note):
        name = save(fig, path, note)
        sizes.extend(t.get_fontsize() for t in fig.findobj(matplotlib.text.Text) if t.get_text())
        return name

    monkeypatch.setattr(mf, "_save", measure)
    made = mf.write_measured_figures(rows, rows, tmp_path, "Energy: measured:zeus-nvml.")
    assert "quality_vs_energy.png" in made
    for name in made:
        width, height = _png_size(tmp_path / name)
        assert 1000 <= width <= 1200, (name, width)
        assert width / height <= 2.5, (name, width, height)
    width, height = _png_size(tmp_path / "quality_vs_energy.png")
    assert 0.9 <= width / height <= 1.5  # two rows of two panels, not a strip of four
    assert sizes and min(sizes) >= mf.MIN_FONT_PT >= 9
