"""Zeus's power-limit optimizer on the project's meter, with emulated GPUs that obey limits."""

from __future__ import annotations

import atexit

import pytest
from zeus.optimizer.power_limit import Energy

from mlenergy.errors import UserError
from mlenergy.measure import EnergyMeter
from mlenergy.measure.emulated_dvfs import DvfsModel, install_clock_responsive_gpus
from mlenergy.optimize.power_limit_training import (
    hf_power_limit_callback,
    power_limit_optimizer,
    power_limit_outcome,
    with_power_limit_tags,
)
from mlenergy.testing.synthetic import synthetic_model, synthetic_run

# Busy power 600 W at the top clock; 700..300 W limits in 100 W steps.
MODEL = DvfsModel(max_power_limit_w=700, min_power_limit_w=300, static_w=40, dynamic_w=500)


@pytest.fixture
def exit_hooks(monkeypatch):
    """Zeus registers a reset of the power limit at exit: run it while the GPUs exist."""
    hooks = []
    monkeypatch.setattr(atexit, "register", lambda fn, *a, **k: hooks.append(fn) or fn)
    return hooks


def _train(steps, plo, gpu):
    for _ in range(steps):
        plo.on_step_begin()
        gpu.run(0.01)
        plo.on_step_end()


def test_plain_loop_chooses_with_zeus_and_records_the_saving(exit_hooks):
    with install_clock_responsive_gpus(model=MODEL) as gpus:
        gpu = gpus.gpus[0]
        meter = EnergyMeter(gpu_indices=[0])
        plo = power_limit_optimizer(
            meter, objective="energy", warmup_steps=1, profile_steps=4, pl_step_w=100
        )
        with meter.window("train") as w:
            _train(1 + 5 * 5 + 3, plo, gpu)
        outcome = power_limit_outcome(plo, meter.energy_source)
        assert gpu.get_power_management_limit() == outcome.power_limit_w * 1000
        for hook in exit_hooks:
            hook()
        assert gpu.get_power_management_limit() == 700_000  # Zeus's reset at exit
    assert w.result.energy_j > 0
    limits = [m["power_limit_w"] for m in outcome.choice["measurements"]]
    assert limits == [700, 600, 500, 400, 300]
    assert outcome.power_limit_w == Energy().select(plo.measurements)
    assert outcome.power_limit_w < 700  # lower clocks save energy on this GPU
    assert outcome.choice["energy_saving_fraction"] > 0.05
    assert outcome.choice["slowdown"] > 1.0
    record = with_power_limit_tags(synthetic_run(synthetic_model("m", 1.0, False)), outcome)
    assert record.tags["power_limit_w"] == str(outcome.power_limit_w)
    assert float(record.tags["power_limit_energy_saving_fraction"]) > 0.05
    assert record.tags["power_limit_energy_source"].startswith("emulated:")


def test_outcome_before_profiling_ends_is_a_user_error(exit_hooks):
    with install_clock_responsive_gpus(model=MODEL) as gpus:
        plo = power_limit_optimizer(EnergyMeter(gpu_indices=[0]), warmup_steps=1, profile_steps=2)
        _train(2, plo, gpus.gpus[0])
        with pytest.raises(UserError, match="not finished"):
            power_limit_outcome(plo, "emulated:test")
        for hook in exit_hooks:
            hook()


def test_hf_callback_chooses_through_trainer_hooks(exit_hooks):
    transformers = pytest.importorskip("transformers")
    with install_clock_responsive_gpus(model=MODEL) as gpus:
        gpu = gpus.gpus[0]
        meter = EnergyMeter(gpu_indices=[0])
        cb = hf_power_limit_callback(
            meter, objective="energy", warmup_steps=1, profile_steps=3, pl_step=100
        )
        assert isinstance(cb, transformers.TrainerCallback)
        args, state, control = object(), object(), object()
        for _ in range(1 + 5 * 4 + 2):  # what Trainer calls around each optimizer step
            cb.on_step_begin(args, state, control)
            gpu.run(0.01)
            cb.on_step_end(args, state, control)
        outcome = power_limit_outcome(cb.optimizer, meter.energy_source)
        for hook in exit_hooks:
            hook()
    assert outcome.power_limit_w == Energy().select(cb.optimizer.measurements)
