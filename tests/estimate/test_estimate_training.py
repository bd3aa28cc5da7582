"""Training-step mode."""

from __future__ import annotations

import json

import pytest

from mlenergy.cli import main
from mlenergy.errors import UserError
from mlenergy.estimate.training import estimate_training


def test_training_step_scales(tiny_config):
    one = estimate_training(str(tiny_config), "H100", batch_size=8, seq_len=1024)
    two = estimate_training(str(tiny_config), "H100", batch_size=16, seq_len=1024)
    assert one.energy_per_step_j > 0 and 0 < one.mfu <= 1
    assert two.step_duration_s > one.step_duration_s
    assert one.energy_per_step_j == pytest.approx(one.avg_power_w * one.step_duration_s)
    dp = estimate_training(str(tiny_config), "H100", batch_size=16, seq_len=1024, num_gpus=2)
    assert dp.data_parallel == 2 and dp.step_duration_s < two.step_duration_s


def test_training_memory_error(tiny_config):
    with pytest.raises(UserError, match="does not fit"):
        estimate_training(str(tiny_config), "L4", batch_size=4096, seq_len=8192)


def test_training_cli(capsys, tiny_config):
    rc = main(
        [
            "estimate",
            "--model",
            str(tiny_config),
            "--gpu",
            "B200",
            "--batch-size",
            "8",
            "--train-seq-len",
            "2048",
            "--json",
        ]
    )
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["seq_len"] == 2048 and data["energy_per_token_j"] > 0


def test_training_memory_time_uses_the_serving_bandwidth_rule(tiny_config):
    from mlenergy.estimate.coefficients import default_coefficients
    from mlenergy.estimate.roofline import effective_bandwidth

    c = default_coefficients()
    h100 = effective_bandwidth(3.35e12, c)
    assert h100 == pytest.approx(1.0 / (1.0 / (c.eta_mem * 3.35e12) + 1.0 / c.mem_ceiling))
    assert h100 < min(c.eta_mem * 3.35e12, c.mem_ceiling)
    # a lower streaming ceiling slows a training step: the ceiling is part of its memory time
    kw = dict(batch_size=1, seq_len=16)
    base = estimate_training(str(tiny_config), "H100", coefficients=c, **kw)
    slow = estimate_training(
        str(tiny_config), "H100", coefficients=c.replace(mem_ceiling=c.mem_ceiling / 10), **kw
    )
    assert slow.step_duration_s > base.step_duration_s
