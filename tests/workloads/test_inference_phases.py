"""Phase summaries: sums, means, percentiles, and no silent zero when energy is missing."""

from __future__ import annotations

import pytest

from mlenergy.measure import WindowResult
from mlenergy.workloads.phases import RepeatWindows, summarise_phases


def _w(name, duration, energy):
    by_device = {"gpu:0": energy} if energy is not None else {}
    return WindowResult(name, duration, energy, by_device, "emulated:test")


def test_request_is_prefill_plus_decode_per_repeat():
    repeats = [
        RepeatWindows(_w("prefill", 0.1, 2.0), _w("decode", 1.0, 10.0), [0.1] * 9 + [0.5]),
        RepeatWindows(_w("prefill", 0.3, 4.0), _w("decode", 3.0, 30.0), [0.3] * 10),
    ]
    pre, dec, req = summarise_phases(repeats, batch_size=2, input_tokens=5, output_tokens=11)
    assert (pre.tokens, dec.tokens, req.tokens) == (10, 20, 22)
    assert pre.duration_s == pytest.approx(0.2) and pre.energy_j == pytest.approx(3.0)
    assert dec.energy_j == pytest.approx(20.0) and dec.avg_power_w == pytest.approx(10.0)
    assert req.energy_j_repeats.values == pytest.approx((12.0, 34.0))
    assert req.duration_s_repeats.values == pytest.approx((1.1, 3.3))
    assert req.energy_per_token_j == pytest.approx(23.0 / 22)
    assert req.energy_by_device_j == {"gpu:0": pytest.approx(23.0)}
    assert req.ttft_s == pytest.approx(0.2) == pre.ttft_s
    assert dec.itl_p50_s == pytest.approx(0.3) and dec.itl_p99_s <= 0.5
    assert pre.throughput_tokens_per_s == pytest.approx(50.0)


def test_missing_energy_stays_none_never_zero():
    repeats = [
        RepeatWindows(_w("prefill", 0.1, None), _w("decode", 1.0, 5.0), [0.1] * 3),
        RepeatWindows(_w("prefill", 0.1, 1.0), _w("decode", 1.0, 5.0), [0.1] * 3),
    ]
    pre, dec, req = summarise_phases(repeats, batch_size=1, input_tokens=4, output_tokens=4)
    assert pre.energy_j is None and pre.energy_per_token_j is None and pre.avg_power_w is None
    assert pre.energy_j_repeats is None and pre.energy_by_device_j == {}
    assert dec.energy_j == pytest.approx(5.0)
    assert req.energy_j is None and req.energy_per_token_j is None
    assert req.throughput_tokens_per_s == pytest.approx(4 / 1.1)


def test_single_repeat_has_no_interval():
    (pre, req) = summarise_phases(
        [RepeatWindows(_w("prefill", 0.2, 1.0), None, [])], 1, 4, output_tokens=1
    )
    assert pre.energy_j_repeats.n == 1 and pre.energy_j_repeats.ci95 is None
    assert req.itl_p50_s is None and req.tokens == 1
