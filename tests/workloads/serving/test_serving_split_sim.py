"""The per-request split against the emulated continuous-batching server, whose truth is known.

The simulator plays each level in virtual time (a 300 s level takes a few seconds of CPU); the
split reads only what a real run gives it: the client's timestamps, the power samples, the
``/metrics`` scrapes and the measured idle power.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlenergy.testing.serving_sim import BatchingEngine, SimPhysics, SimRequest
from mlenergy.testing.serving_sim_run import SimScenario, lengths, simulate
from mlenergy.workloads.serving.energy_split import split_energy, timeline_energy_j
from mlenergy.workloads.serving.server_queue import infer_cap, server_spans
from mlenergy.workloads.serving.timing import RequestTiming

IDLE_W = SimPhysics().idle_w


def _hard(sampling: str) -> SimScenario:
    """Identical requests, server cap 4 below the level 8, 2,000-token prompts, ~300 s."""
    return SimScenario(
        "hard", SimPhysics(max_num_seqs=4), 8, 325, lengths(2000), lengths(256),
        sampling=sampling, sample_period_s=0.05,
    )  # fmt: skip


def _mixed(sampling: str) -> SimScenario:
    """Prompts of ~100-3,600 tokens and outputs of ~40-1,000 tokens, cap 8 below level 16."""
    return SimScenario(
        "mixed", SimPhysics(max_num_seqs=8), 16, 400, lengths(600, 1, 5.0),
        lengths(200, 2, 4.0), sampling=sampling, sample_period_s=0.05,
    )  # fmt: skip


def _split(run, level):
    cap = infer_cap(run.timings, level, [s for _, s in run.scrapes])
    res = split_energy(run.timings, run.samples, server_cap=cap.cap, idle_w=IDLE_W)
    return cap, res, np.array(res.energy_j) / np.array(run.truth_j) - 1


@pytest.fixture(scope="module", params=["counter", "instant"])
def hard(request):
    sc = _hard(request.param)
    return sc, simulate(sc)


@pytest.fixture(scope="module", params=["counter", "instant"])
def mixed(request):
    sc = _mixed(request.param)
    return sc, simulate(sc)


@pytest.mark.slow
def test_identical_requests_behind_a_queue_each_land_within_5_percent(hard):
    sc, run = hard
    end = max(r.end_s for r in run.timings) - min(r.sent_s for r in run.timings)
    assert 280 < end < 330  # a 300 s level
    truth = np.array(run.truth_j)
    assert np.percentile(truth, 99) / np.median(truth) < 1.01  # the truth is (nearly) equal
    cap, res, err = _split(run, sc.level)
    assert (cap.cap, cap.source) == (4, "/metrics")
    assert np.abs(err).max() < 0.05
    energies = np.array(res.energy_j)
    assert np.percentile(energies, 99) / np.percentile(energies, 50) <= 1.05
    # the split adds up to the samples' energy while a request was in the server
    first, last = run.timings[0].sent_s, max(r.end_s for r in run.timings)
    assert sum(res.energy_j) == pytest.approx(res.attributed_j, rel=1e-9)
    assert res.attributed_j == pytest.approx(timeline_energy_j(run.samples, first, last), rel=0.002)


def test_mixed_lengths_land_within_10_percent_at_p90(mixed):
    sc, run = mixed
    truth = np.array(run.truth_j)
    assert np.percentile(truth, 90) / np.percentile(truth, 10) > 5  # truly mixed
    _, _, err = _split(run, sc.level)
    assert np.percentile(np.abs(err), 90) < 0.10
    assert np.percentile(np.abs(err), 50) < 0.05


def test_the_split_learns_the_servers_costs_from_the_run(mixed):
    sc, run = mixed
    _, res, _ = _split(run, sc.level)
    ph = sc.physics
    # a prompt token and a decode step cost what the simulated GPU spent on them
    assert res.costs["prompt_token_j"] == pytest.approx(ph.prefill_j, rel=0.1)
    assert res.costs["step_j"] == pytest.approx(ph.step_j, rel=0.2)
    assert res.costs["idle_w"] == IDLE_W


def test_the_physics_are_not_a_token_count_rule():
    # same tokens in and out, different true energy: prompt and output tokens differ in cost,
    # and a decode step's fixed cost is shared by the batch
    ph = SimPhysics(max_num_seqs=8)
    alone, batched = BatchingEngine(ph), BatchingEngine(ph)
    alone.add(SimRequest(0, 100, 50, 0.0))
    for i in range(8):
        batched.add(SimRequest(i, 100, 50, 0.0))
    prompt_heavy = BatchingEngine(ph)
    prompt_heavy.add(SimRequest(0, 140, 10, 0.0))
    for engine in (alone, batched, prompt_heavy):
        t = 0.0
        while (step := engine.step(t)) is not None:
            t = step.end_s
    one = alone.requests[0].true_j
    assert batched.requests[0].true_j < 0.5 * one
    assert prompt_heavy.requests[0].true_j < 0.5 * one  # 150 tokens either way
    # the queue costs nothing: a request that waited has the truth of one that did not
    queued = BatchingEngine(SimPhysics(max_num_seqs=1))
    queued.add(SimRequest(0, 100, 50, 0.0))
    queued.add(SimRequest(1, 100, 50, 0.0))
    t = 0.0
    while (step := queued.step(t)) is not None:
        t = step.end_s
    assert queued.requests[1].true_j == pytest.approx(queued.requests[0].true_j, rel=1e-9)
    assert queued.requests[1].admitted_s >= queued.requests[0].token_times_s[-1]


def test_the_queue_is_rebuilt_from_the_servers_cap():
    sc = SimScenario("queue", SimPhysics(max_num_seqs=3), 8, 60, lengths(300), lengths(64, 1, 1.0))
    run = simulate(sc)
    cap = infer_cap(run.timings, sc.level, [s for _, s in run.scrapes])
    assert (cap.cap, cap.queue_seen) == (3, True)
    # without /metrics the client sees it too: never more than 3 decoding at once
    assert infer_cap(run.timings, sc.level).cap == 3
    spans = server_spans(run.timings, cap.cap)
    gaps = np.abs(np.array(spans.admitted_s) - np.array(run.admitted_s))
    assert np.percentile(gaps, 90) < 0.002  # a loopback latency, not a queue
    assert max(r.first_token_s - r.sent_s for r in run.timings) > 1.0  # there was a queue


def test_a_server_that_says_nothing_has_no_queue_when_the_client_saw_none():
    reqs = [
        RequestTiming(i, 0.0, 0.1 + 0.01 * i, 2.0, [0.1 + 0.01 * i, 2.0], 2, 5) for i in range(4)
    ]
    cap = infer_cap(reqs, 4)
    assert cap.cap is None and not cap.queue_seen
    assert infer_cap(reqs, 4, [{"running": 4.0, "waiting": 0.0}]).cap is None
    declared = infer_cap(reqs, 8, declared=8)
    assert (declared.cap, declared.source) == (8, "--launch {max_num_seqs}")
    assert math.isclose(server_spans(reqs, None).admitted_s[2], 0.0)
