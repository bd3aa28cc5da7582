"""Pure logic of the serving benchmark: arrivals, the steady-state window, the energy split."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlenergy.errors import UserError
from mlenergy.workloads.serving.arrivals import arrival_offsets_s, parse_request_rate
from mlenergy.workloads.serving.energy_split import split_energy, timeline_energy_j
from mlenergy.workloads.serving.stats import percentiles
from mlenergy.workloads.serving.steady_state import (
    SteadyStateTracker,
    mean_in_flight,
    steady_state_window,
    tokens_in_window,
)
from mlenergy.workloads.serving.timing import RequestTiming


def _req(i, sent, first, end, tokens, prompt=0):
    chunks = list(np.linspace(first, end, tokens)) if tokens else []
    return RequestTiming(
        index=i,
        sent_s=sent,
        first_token_s=first,
        end_s=end,
        chunk_times_s=chunks,
        output_tokens=tokens,
        prompt_tokens=prompt,
    )


def test_infinite_rate_sends_everything_at_once():
    assert arrival_offsets_s(5, math.inf) == [0.0] * 5


def test_gamma_arrivals_have_the_requested_mean_rate_and_are_seeded():
    a = arrival_offsets_s(4001, 10.0, burstiness=0.5, seed=3)
    assert a == arrival_offsets_s(4001, 10.0, burstiness=0.5, seed=3)
    assert a != arrival_offsets_s(4001, 10.0, burstiness=0.5, seed=4)
    gaps = np.diff(a)
    assert gaps.mean() == pytest.approx(0.1, rel=0.08)
    # burstier than Poisson: coefficient of variation 1/sqrt(shape) = 1.41
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(0.5), rel=0.1)
    regular = np.diff(arrival_offsets_s(4001, 10.0, burstiness=4.0, seed=3))
    assert regular.std() / regular.mean() == pytest.approx(0.5, rel=0.1)


@pytest.mark.parametrize("bad", ["0", "-1", "fast", "nan"])
def test_bad_request_rate_is_a_user_error(bad):
    with pytest.raises(UserError):
        parse_request_rate(bad)
    assert parse_request_rate("inf") == math.inf


def test_window_opens_when_first_level_all_have_a_token_and_closes_when_fewer_remain():
    # level 2, 4 requests all sent at 0; slots free as requests end
    reqs = [
        _req(0, 0.0, 1.0, 3.0, 5),
        _req(1, 0.0, 1.5, 4.0, 5),
        _req(2, 3.0, 3.5, 6.0, 5),  # gets a slot at 3.0
        _req(3, 4.0, 4.5, 7.0, 5),  # gets a slot at 4.0
    ]
    w = steady_state_window(reqs, level=2, arrivals_s=[0.0] * 4)
    # opens at 1.5 (request 1's first token); outstanding 4,3,2 after ends at 3,4;
    # the end at 6.0 leaves 1 < 2: closes
    assert (w.start_s, w.end_s) == (1.5, 6.0)
    assert mean_in_flight(reqs, w) == pytest.approx(2.0, rel=1e-9)  # the client cap held
    inside = tokens_in_window(reqs, w)
    expected = sum(1 for r in reqs for t in r.token_times_s() if 1.5 <= t <= 6.0)
    assert inside == expected


def test_live_tracker_fires_callbacks_at_the_same_moments():
    opened, closed = [], []
    tr = SteadyStateTracker(2, opened.append, closed.append)
    for i in range(3):
        tr.arrived(i, 0.0)
    tr.first_token(0, 1.0)
    assert not opened
    tr.first_token(1, 2.0)
    assert opened == [2.0]
    tr.finished(0, 3.0)  # 2 outstanding: still steady
    assert not closed
    tr.finished(1, 4.0)  # 1 outstanding < 2
    assert closed == [4.0]
    assert tr.window.duration_s == 2.0


def test_slow_arrivals_never_reach_the_level():
    reqs = [_req(0, 0.0, 0.5, 1.0, 3), _req(1, 5.0, 5.5, 6.0, 3)]
    assert steady_state_window(reqs, level=2) is None


def test_token_times_spread_tokens_the_stream_bundled():
    r = RequestTiming(0, 0.0, 1.0, 3.0, chunk_times_s=[1.0, 2.0], output_tokens=5)
    times = r.token_times_s()
    assert len(times) == 5 and times[0] == 1.0 and max(times) <= 3.0


def test_split_adds_up_to_the_in_server_energy_with_samples_held_forward():
    # Zeus's convention: 100 W held over [0, 2), 400 W over [2, 4)
    samples = [(0.1 * k, 100.0 if k < 20 else 400.0) for k in range(0, 41)]
    a = _req(0, 0.0, 0.5, 4.0, 30)  # long request
    b = _req(1, 1.0, 1.2, 2.0, 10)  # short one, only during the low-power part
    res = split_energy([a, b], samples, idle_w=0.0)
    assert sum(res.energy_j) == pytest.approx(res.attributed_j, rel=1e-12)
    assert res.attributed_j == pytest.approx(timeline_energy_j(samples, 0.0, 4.0), rel=1e-9)
    assert res.attributed_j == pytest.approx(100 * 2 + 400 * 2, rel=1e-9)
    # b ran only at 100 W for 1 s: it cannot have more than 100 J
    assert 0 < res.energy_j[1] < 100.0
    assert res.unattributed_j == pytest.approx(0.0, abs=1e-9)


def test_split_keeps_idle_gaps_apart():
    samples = [(0.1 * k, 50.0) for k in range(0, 51)]
    res = split_energy([_req(0, 0.0, 0.2, 1.0, 5), _req(1, 3.0, 3.2, 4.0, 5)], samples)
    assert res.attributed_j == pytest.approx(50 * 2.0, rel=1e-6)
    assert res.unattributed_j == pytest.approx(50 * 3.0, rel=1e-6)
    assert res.energy_j[0] == pytest.approx(50.0, rel=1e-6)


def test_time_in_the_servers_queue_costs_nothing():
    # a server that runs one request at a time at 100 W; the second waits a second for it
    samples = [(0.05 * k, 100.0) for k in range(0, 41)]
    first = _req(0, 0.0, 0.1, 1.0, 20, prompt=50)
    queued = _req(1, 0.0, 1.1, 2.0, 20, prompt=50)
    res = split_energy([first, queued], samples, server_cap=1, idle_w=20.0)
    assert res.queued_s == pytest.approx([0.0, 1.0])
    assert res.energy_j == pytest.approx([100.0, 100.0], rel=1e-6)
    # taken as running from the moment it was sent, the queued one would be charged for it
    naive = split_energy([first, queued], samples, idle_w=20.0)
    assert naive.energy_j[1] > 110.0


def test_percentiles():
    p = percentiles(list(range(101)))
    assert (p.p50, p.p90, p.p99, p.mean) == (50.0, 90.0, 99.0, 50.0)
    assert percentiles([]) is None


def test_describing_the_served_model_reads_dtype_not_its_deprecated_alias(monkeypatch, tmp_path):
    # transformers warns "`torch_dtype` is deprecated" on every read of the alias
    import json

    from transformers import PretrainedConfig

    from mlenergy.workloads.serving.spec import ServingSpec, describe_model

    def alias(self):
        raise AssertionError("torch_dtype read")

    monkeypatch.setattr(PretrainedConfig, "torch_dtype", property(alias))
    config = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "vocab_size": 512, "dtype": "bfloat16"}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = ServingSpec(
        model=str(tmp_path), levels=(1,), num_requests=1, endpoint="http://127.0.0.1:9/v1"
    )
    assert describe_model(spec).dtype == "bfloat16"
