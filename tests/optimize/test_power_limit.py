"""The power-limit choice is Zeus's own selectors'; CSV and Zeus JSON profiles; bad input."""

from __future__ import annotations

import json

import pytest
from optimize_cases import run_cli
from zeus.optimizer.power_limit import (
    Energy,
    MaxSlowdownConstraint,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
    _PowerLimitMeasurementList,
)

ROWS = [
    (300, 10.0, 3000.0),
    (275, 10.1, 2850.0),
    (250, 10.4, 2700.0),
    (200, 11.5, 2500.0),
    (150, 14.0, 2600.0),
]


def _csv(path):
    path.write_text(
        "power_limit_w,time_s,energy_j\n" + "".join(f"{p},{t},{e}\n" for p, t, e in ROWS)
    )
    return path


def _zeus_json(path):
    ms = [PowerLimitMeasurement(power_limit=p, time=t, energy=e) for p, t, e in ROWS]
    path.write_text(_PowerLimitMeasurementList(measurements=ms).json(indent=4))  # as Zeus writes
    return path


@pytest.mark.parametrize("fmt", ["csv", "json"])
@pytest.mark.parametrize(
    "objective,selector",
    [
        ("energy", Energy()),
        ("time", Time()),
        ("zeus-cost", ZeusCost(eta_knob=0.3)),
        ("max-slowdown", MaxSlowdownConstraint(factor=1.05)),
    ],
)
def test_choice_is_zeus_selector(tmp_path, fmt, objective, selector):
    profile = _csv(tmp_path / "pl.csv") if fmt == "csv" else _zeus_json(tmp_path / "pl.json")
    res = run_cli(
        [
            "optimize",
            "power-limit",
            "--profile",
            str(profile),
            "--objective",
            objective,
            "--eta",
            "0.3",
            "--max-slowdown",
            "1.05",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    ms = [PowerLimitMeasurement(power_limit=p, time=t, energy=e) for p, t, e in ROWS]
    assert out["power_limit_w"] == selector.select(ms)
    assert len(out["measurements"]) == len(ROWS)
    assert out["max_limit_energy_j"] == 3000.0


@pytest.mark.parametrize(
    "text,needle",
    [
        ("power_limit_w,time_s,energy_j,extra\n300,1,2,3\n", "unknown column"),
        ("power_limit_w,time_s\n300,1\n", "missing column"),
        ("power_limit_w,time_s,energy_j\n300,abc,2\n", "row 2: time_s"),
        ("power_limit_w,time_s,energy_j\n300,1,0\n", "row 2: energy_j"),
        ("power_limit_w,time_s,energy_j\n300,1,2\n300,1,2\n", "appears twice"),
        ("power_limit_w,time_s,energy_j\n", "no measurements"),
        ('{"measurements": [{"power_limit": 300, "time": -1, "energy": 2}]}', "measurements[0]"),
    ],
)
def test_bad_profiles(tmp_path, text, needle):
    p = tmp_path / ("pl.json" if text.startswith("{") else "pl.csv")
    p.write_text(text)
    res = run_cli(["optimize", "power-limit", "--profile", str(p)])
    assert res.exit_code == 2
    assert needle in res.output
    assert len(res.output.strip().splitlines()) == 1
