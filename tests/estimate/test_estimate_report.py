"""Text and table forms of estimates (the library behind the command's output)."""

from __future__ import annotations

from mlenergy.commands.estimate_report import format_joules, format_table, plot_sweep, sweep_table
from mlenergy.commands.estimate_sweep import parse_sweep_axis
from mlenergy.estimate.api import sweep

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def test_joules_take_the_unit_that_reads_best():
    assert format_joules(2.5) == "2.500 J"
    assert format_joules(0.0123) == "12.30 mJ"
    assert format_joules(4.5e-5) == "45.0 uJ"


def test_sweep_table_keeps_failed_points_with_their_error(tmp_path, configs_dir):
    axes = dict([parse_sweep_axis("batch-size=8,1000000")])
    base = dict(model=LLAMA, gpu="H100", input_tokens=512, output_tokens=256)
    rows = sweep_table(sweep(base, axes, configs_dir=configs_dir), axes)
    assert [r["batch_size"] for r in rows] == [8, 1000000]
    assert rows[0]["error"] == "" and rows[0]["energy_per_token_j"] > 0
    assert "does not fit" in rows[1]["error"] and "energy_per_token_j" not in rows[1]
    text = format_table(rows).splitlines()
    assert text[0].split() == [*rows[0]] and len(text) == 3
    png = plot_sweep(rows, axes, tmp_path / "out" / "sweep.png")
    assert png.stat().st_size > 1000
    assert format_table([]) == ""
