"""Intervals from run-to-run spread, and the +-20% mark, in records, the bench table and plots."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from mlenergy.measure.window_result import WindowResult
from mlenergy.workloads.bench import interval_text
from mlenergy.workloads.phases import RepeatWindows, summarise_phases


def _window(name: str, energy: float) -> WindowResult:
    return WindowResult(name, 1.0, energy, {"cpu:modelled": energy}, "modelled:cpu-tdp")


def _phases(energies: list[float]):
    repeats = [RepeatWindows(_window("p", e), _window("d", e), [0.1]) for e in energies]
    return summarise_phases(repeats, batch_size=2, input_tokens=4, output_tokens=3)


def test_tight_repeats_are_not_marked_and_carry_their_interval():
    request = _phases([10.0, 10.1, 9.9])[-1]
    assert request.wide_interval is False
    ci = request.energy_per_token_j_ci95
    assert ci.low < request.energy_per_token_j < ci.high
    assert ci.high - ci.low == pytest.approx(
        (request.energy_j_repeats.ci95.high - request.energy_j_repeats.ci95.low) / 6
    )
    assert interval_text(request).startswith("±") and "!" not in interval_text(request)


def test_spread_repeats_are_marked_wide():
    request = _phases([5.0, 10.0, 15.0])[-1]
    assert request.wide_interval is True
    assert interval_text(request).endswith("!")


def test_one_repeat_has_no_interval_and_no_mark():
    request = _phases([10.0])[-1]
    assert request.energy_per_token_j_ci95 is None and request.wide_interval is None
    assert interval_text(request) == "-"


def test_bench_table_shows_the_interval_column():
    from mlenergy.commands.bench import summary_table
    from mlenergy.records import RunRecord  # noqa: F401  (the table reads records)

    table = summary_table([])
    out = io.StringIO()
    Console(file=out, width=200).print(table)
    assert "± 95%" in out.getvalue() and "wider than ±20%" in out.getvalue()
