"""A serving record built from a simulated level, and the submission checks that hold it.

The level is played by the emulated server in virtual time, so the record is built from exactly
what a real run hands :func:`build_record` (timings, power samples, ``/metrics`` scrapes).
"""

from __future__ import annotations

import pytest

from mlenergy.records import Hardware, IdleBaseline, MeasuredScope, ModelInfo, Software
from mlenergy.store import RunStore
from mlenergy.store.listing import list_runs
from mlenergy.store.serving_checks import serving_problems
from mlenergy.testing.serving_sim import SimPhysics
from mlenergy.testing.serving_sim_run import SimScenario, lengths, simulate
from mlenergy.workloads.serving.display import COLUMNS, serving_rows
from mlenergy.workloads.serving.record import LevelContext, LevelMeasurement, build_record
from mlenergy.workloads.serving.spec import ServingSpec

LEVEL = 8
PERIOD_S = 0.02


@pytest.fixture(scope="module")
def level():
    sc = SimScenario(
        "checks", SimPhysics(max_num_seqs=4), LEVEL, 48, lengths(500), lengths(64),
        sample_period_s=0.05, scrape_period_s=0.5,
    )  # fmt: skip
    run = simulate(sc)
    w = run.window
    first, last = run.timings[0].sent_s, max(r.end_s for r in run.timings)
    measured = LevelMeasurement(
        timings=run.timings,
        start_s=first,
        end_s=last,
        window=w,
        window_energy_j=run.profile.energy_j(w.start_s, w.end_s),
        window_by_device_j={"gpu:0": run.profile.energy_j(w.start_s, w.end_s)},
        run_energy_j=run.profile.energy_j(first, last),
        run_duration_s=last - first,
        samples=run.samples,
        scrapes=run.scrapes,
        counter_period_s=PERIOD_S,
    )
    return run, measured


def _context(level: int = LEVEL, launched_cap: bool = False) -> LevelContext:
    spec = ServingSpec(
        model="sim-model", levels=(level,), num_requests=48, endpoint="http://127.0.0.1:9/v1"
    )
    model = ModelInfo(
        model_id="sim-model", config_fingerprint="0123456789abcdef", architecture="llama",
        is_moe=False, total_params=10**9,
        active_params=10**9, dtype="bfloat16", weights="random",
    )  # fmt: skip
    return LevelContext(
        spec=spec,
        level=level,
        run_id="sim-level-1",
        model=model,
        engine="vllm 0.0.0+mlenergy-sim",
        engine_source="/version",
        launched=launched_cap,
        sets_server_cap=launched_cap,
        ignore_eos_via="ignore_eos",
        hardware=Hardware(accelerator_model="Emulated GPU", accelerator_count=1),
        software=Software(python="3.11", mlenergy="0.1.0"),
        energy_source="emulated:zeus-gpu",
        scope=MeasuredScope(gpu_indices=(0,), counter_period_s=PERIOD_S),
        idle=IdleBaseline(
            avg_power_w=SimPhysics().idle_w, duration_s=1.0, energy_source="emulated:zeus-gpu"
        ),
    )


def test_the_record_carries_the_servers_batch_cap_and_checked_split(level):
    _, measured = level
    record = build_record(_context(), measured)
    s = record.serving
    assert record.status == "ok"
    assert s.batch_source == "server" and s.engine_metrics.samples >= 3
    assert record.workload.avg_batch_size == pytest.approx(s.engine_metrics.running_mean)
    assert record.workload.avg_batch_size <= 4.0 < s.achieved_concurrency
    assert (s.server_cap, s.server_cap_source, s.level_above_server_cap) == (4, "/metrics", True)
    assert record.workload.max_num_seqs == 4  # the leaderboard's batch: the server's cap
    assert s.window_counter_periods == pytest.approx(measured.window.duration_s / PERIOD_S)
    assert s.split_window_energy_j == pytest.approx(measured.window_energy_j, rel=0.02)
    assert s.split_withheld is None and len(s.request_energies_j) == 48
    assert s.split_costs["idle_w"] == SimPhysics().idle_w
    assert s.request_queue_s.p90 > 0.1
    assert serving_problems(record, "run") == []


def test_a_launch_that_sets_the_cap_to_the_level_is_not_above_it(level):
    _, measured = level
    record = build_record(_context(launched_cap=True), measured)
    s = record.serving
    assert (s.server_cap, s.level_above_server_cap) == (LEVEL, False)
    assert record.workload.max_num_seqs == LEVEL


def test_samples_that_disagree_with_the_counter_withhold_the_split(level):
    _, measured = level
    high = [(t, 1.05 * w) for t, w in measured.samples]  # a power reading 5% too high
    record = build_record(_context(), _replace(measured, samples=high))
    s = record.serving
    assert s.request_energies_j == () and s.request_energy_j is None
    assert "more than 2%" in s.split_withheld and "+5." in s.split_withheld
    assert serving_problems(record, "run") == []


def test_the_submission_checks_refuse_short_windows_and_disagreeing_splits(level):
    _, measured = level
    record = build_record(_context(), measured)
    coarse = record.model_copy(
        update={"scope": record.scope.model_copy(update={"counter_period_s": 1.0})}
    )
    assert any("at least 10 are needed" in p for p in serving_problems(coarse, "run"))
    off = record.serving.model_copy(
        update={"split_window_energy_j": 1.03 * record.phase("request").energy_j}
    )
    problems = serving_problems(record.model_copy(update={"serving": off}), "run")
    assert any("split_window_energy_j" in p and "+3.0%" in p for p in problems)
    client_batch = record.workload.model_copy(
        update={"avg_batch_size": record.serving.achieved_concurrency}
    )
    problems = serving_problems(record.model_copy(update={"workload": client_batch}), "run")
    assert any("running_mean" in p for p in problems)


def _replace(m: LevelMeasurement, **changes) -> LevelMeasurement:
    from dataclasses import replace

    return replace(m, **changes)


def test_the_table_shows_each_requests_energy_at_p50_p90_p99_and_the_engine(level):
    _, measured = level
    record = build_record(_context(), measured)
    cells = dict(zip(COLUMNS, serving_rows([record])[0], strict=True))
    q = record.serving.request_energy_j
    assert q.p50 < q.p90 <= q.p99
    assert [cells[f"J/req\n{p}"] for p in ("p50", "p90", "p99")] == [
        f"{v:.4g}" for v in (q.p50, q.p90, q.p99)
    ]
    assert cells["engine"] == "vllm 0.0.0+mlenergy-sim"
    high = [(t, 1.05 * w) for t, w in measured.samples]
    withheld = build_record(_context(), _replace(measured, samples=high))
    cells = dict(zip(COLUMNS, serving_rows([withheld])[0], strict=True))
    assert cells["J/req\np50"] == "withheld"


def test_runs_list_shows_the_method_and_the_servers_batch_not_the_level(level, tmp_path):
    _, measured = level
    capped = build_record(_context(), measured)  # the server ran at most 4 of the level's 8
    uncapped = capped.model_copy(
        update={
            "run_id": "sim-level-2",
            "workload": capped.workload.model_copy(update={"max_num_seqs": None}),
        }
    )
    store = RunStore(tmp_path / "data")
    store.append([capped, uncapped])
    listing = list_runs(store)
    rows = [dict(zip(listing.headers, row, strict=True)) for row in listing.rows]
    assert [r["method"] for r in rows] == ["serving-steady-state (level 8)"] * 2
    assert rows[0]["batch"] == "4"
    mean = capped.workload.avg_batch_size
    assert mean < LEVEL and rows[1]["batch"] == f"{mean:.3g} (mean)"
