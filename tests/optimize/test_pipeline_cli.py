"""``mlenergy optimize pipeline``: files, Zeus plan format, bad input (exit 2, nothing written)."""

from __future__ import annotations

import ast
import json

import pytest
from optimize_cases import UNIT, convex_profile, run_cli

from mlenergy.optimize.profile import write_profile_csv

P_BLOCK = "60"


@pytest.fixture
def profile_csv(tmp_path):
    return write_profile_csv(convex_profile(3, 3, 1, 60.0), tmp_path / "profile.csv")


def _outs(tmp_path):
    return {
        "--frontier-out": tmp_path / "frontier.csv",
        "--out": tmp_path / "plan.json",
        "--zeus-plan": tmp_path / "plan.py",
        "--plot": tmp_path / "frontier.png",
    }


def _argv(profile, outs, *extra):
    argv = [
        "optimize",
        "pipeline",
        "--profile",
        str(profile),
        "--microbatches",
        "3",
        "--p-blocking",
        P_BLOCK,
        "--time-unit",
        str(UNIT),
    ]
    for k, v in outs.items():
        argv += [k, str(v)]
    return argv + list(extra)


def test_writes_frontier_plan_zeus_plan_and_plot(tmp_path, profile_csv):
    outs = _outs(tmp_path)
    res = run_cli(_argv(profile_csv, outs, "--straggler-slowdown", "1.2"))
    assert res.exit_code == 0, res.output
    lines = outs["--frontier-out"].read_text().splitlines()
    assert lines[0] == "iteration_time_s,energy_j"
    times = [float(line.split(",")[0]) for line in lines[1:]]
    assert times == sorted(times) and len(times) > 2
    plan = json.loads(outs["--out"].read_text())
    assert plan["target"] == "straggler"
    assert plan["plan_makespan_s"] <= plan["iteration_time_s"] + 1e-12
    assert len(plan["frequencies"]) == 3 * 3 * 2
    schedule = ast.literal_eval(outs["--zeus-plan"].read_text())  # what PointSolution evals
    assert len(schedule) == 3
    assert all(len(stage) == 6 for stage in schedule)
    assert {name for stage in schedule for name, _ in stage} == {"forward", "backward"}
    assert outs["--plot"].stat().st_size > 1000


def _rows(extra_header="", rows=None):
    header = "stage,instruction,frequency_mhz,time_s,energy_j" + extra_header
    rows = (
        rows
        if rows is not None
        else [
            "0,forward,1500,0.01,3",
            "0,backward,1500,0.02,6",
            "1,forward,1500,0.01,3",
            "1,backward,1500,0.02,6",
        ]
    )
    return "\n".join([header, *rows]) + "\n"


BAD = [
    (
        _rows(rows=["0,forward,1500,0.01,3", "0,backward,1500,0.02,6", "1,forward,1500,0.01,3"]),
        [],
        "missing (stage 1, instruction backward)",
    ),
    (_rows(rows=["0,forward,1500,abc,3", "0,backward,1500,0.02,6"]), [], "row 2: time_s"),
    (_rows(rows=["0,forward,1500,-0.01,3", "0,backward,1500,0.02,6"]), [], "row 2: time_s"),
    (_rows(rows=["0,forward,1500,0.01,0", "0,backward,1500,0.02,6"]), [], "row 2: energy_j"),
    (_rows(",note"), [], "unknown column(s) note"),
    (
        _rows(rows=["0,forward,1500,0.01,3", "0,forward,1500,0.01,3", "0,backward,1500,0.02,6"]),
        [],
        "row 3: duplicate of row 2",
    ),
    (_rows(), ["--microbatches", "0"], "--microbatches"),
    (_rows(), ["--time-unit", "0"], "--time-unit"),
    (_rows(), ["--time-unit", "-1"], "--time-unit"),
    (_rows(), ["--straggler-time", "1e-6"], "shorter than the shortest"),
    (_rows(), ["--straggler-slowdown", "0.5"], "--straggler-slowdown"),
]


@pytest.mark.parametrize("text,extra,needle", BAD)
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, text, extra, needle):
    profile = tmp_path / "bad.csv"
    profile.write_text(text)
    outs = _outs(tmp_path)
    argv = _argv(profile, outs)
    if extra:  # later options override the earlier ones
        argv += extra
    res = run_cli(argv)
    assert res.exit_code == 2, res.output
    assert needle in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not any(p.exists() for p in outs.values())
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bad.csv"]


def test_zeus_plan_is_what_point_solution_reads_and_says_how(tmp_path, profile_csv):
    outs = {"--zeus-plan": tmp_path / "perseus_plan.py"}
    res = run_cli(_argv(profile_csv, outs))
    assert res.exit_code == 0, res.output
    text = outs["--zeus-plan"].read_text()
    # zeus.optimizer.pipeline_frequency.server.scheduler.PointSolution: eval(f.read()), one
    # list per rank of a pure pipeline, each a list of (instruction, MHz).
    schedule = eval(text)  # exactly what Zeus's PointSolution does
    assert isinstance(schedule, list) and len(schedule) == 3
    for stage in schedule:
        assert all(isinstance(n, str) and isinstance(f, int) for n, f in stage)
    assert "ZEUS_PFO_SCHEDULER=PointSolution" in text
    assert '"solution_path": "/absolute/path/to/perseus_plan.py"' in text
    assert "PipelineFrequencyOptimizer" in text and "on_instruction_begin" in text
    assert "PointSolution scheduler" in res.output


def test_zeus_plan_must_be_a_python_file(tmp_path, profile_csv):
    res = run_cli(_argv(profile_csv, {"--zeus-plan": tmp_path / "plan.txt"}))
    assert res.exit_code == 2 and ".py" in res.output
    assert not (tmp_path / "plan.txt").exists()
