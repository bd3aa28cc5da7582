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
            meter, objective="energy", warmup_steps=1, profile_steps=3, pl_step_w=100
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


class _TokenWindows:
    """Generated token windows as a map-style dataset (inputs are their own labels)."""

    def __init__(self, n: int, seq_len: int, vocab: int) -> None:
        import torch

        gen = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, seq_len), generator=gen)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _tiny_trainer(tmp_path, callbacks, gpu, samples: int, max_steps: int):
    """A real ``Trainer`` on a random 2-layer Llama; every forward also runs the emulated GPU."""
    import accelerate  # noqa: F401  (Trainer needs it; a dev dependency)
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32,
    )  # fmt: skip
    model = transformers.LlamaForCausalLM(config)
    # the emulated GPU does the step's device work: its time and power follow the limit
    model.register_forward_hook(lambda *_: gpu.run(0.03) and None)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "trainer"), use_cpu=True, report_to=[], max_steps=max_steps,
        per_device_train_batch_size=4, save_strategy="no", disable_tqdm=True, seed=0,
        logging_strategy="no", dataloader_num_workers=0,
    )  # fmt: skip
    data = _TokenWindows(samples, 16, config.vocab_size)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=callbacks)
    return trainer, config


def _runs(states: list[str]) -> list[tuple[str, int]]:
    """Consecutive runs of the same state name: [(name, length), ...]."""
    out: list[tuple[str, int]] = []
    for s in states:
        if out and out[-1][0] == s:
            out[-1] = (s, out[-1][1] + 1)
        else:
            out.append((s, 1))
    return out


@pytest.mark.slow
def test_real_trainer_run_profiles_limits_and_records_the_choice(exit_hooks, tmp_path):
    import transformers

    from mlenergy.models.info import model_info_from_config
    from mlenergy.optimize.power_limit_training import trainer_run_record
    from mlenergy.store import RunStore

    class StateLog(transformers.TrainerCallback):
        def __init__(self, callback):
            self.callback, self.states = callback, []

        def on_step_end(self, args, state, control, **kwargs):
            self.states.append(type(self.callback.optimizer.state).__name__)

    with install_clock_responsive_gpus(model=MODEL) as gpus:
        gpu = gpus.gpus[0]
        meter = EnergyMeter(gpu_indices=[0])
        cb = hf_power_limit_callback(
            meter, objective="energy", warmup_steps=1, profile_steps=3, pl_step_w=100
        )
        log = StateLog(cb)
        # 64 windows / 4 per step = 16 steps per epoch: the second epoch starts mid-profiling
        trainer, config = _tiny_trainer(tmp_path, [cb, log], gpu, samples=64, max_steps=30)
        with meter.window("train") as w:
            trainer.train()
        outcome = power_limit_outcome(cb.optimizer, meter.energy_source)
        assert gpu.get_power_management_limit() == outcome.power_limit_w * 1000
        late_clock = gpu.clock_log[-1]
        for hook in exit_hooks:
            hook()
    assert trainer.state.global_step == 30
    runs = _runs(log.states)
    assert runs[0] == ("Ready", 1) and runs[-1][0] == "Done"
    profiling = [n for s, n in runs if s == "Profiling"]
    # five limits profiled for 3 steps each; the epoch's end cut one short and Zeus redid it
    assert profiling.count(3) == 5 and len(profiling) == 6 and min(profiling) < 3
    limits = [m["power_limit_w"] for m in outcome.choice["measurements"]]
    assert limits == [700, 600, 500, 400, 300]
    assert outcome.power_limit_w == Energy().select(cb.optimizer.measurements)
    assert outcome.power_limit_w < 700 and late_clock < MODEL.max_clock_mhz
    assert outcome.choice["energy_saving_fraction"] > 0.05 and outcome.choice["slowdown"] > 1
    info = model_info_from_config(config, "config:tiny-llama", "float32", "random")
    record = trainer_run_record(trainer, w.result, meter, info, 16, outcome)
    store = RunStore(tmp_path / "data")
    store.append([record])
    stored = store.get(record.run_id)
    assert stored.tags["power_limit_w"] == str(outcome.power_limit_w)
    saving = float(stored.tags["power_limit_energy_saving_fraction"])
    assert saving == pytest.approx(outcome.choice["energy_saving_fraction"], abs=1e-6)
    assert stored.energy_source == "emulated:zeus-gpu" and stored.workload.steps == 30
    (phase,) = stored.phases
    assert phase.tokens == 30 * 4 * 16 and phase.energy_j == pytest.approx(w.result.energy_j)


def test_real_trainer_with_epochs_too_short_to_profile_is_refused(exit_hooks, tmp_path):
    with install_clock_responsive_gpus(model=MODEL) as gpus:
        meter = EnergyMeter(gpu_indices=[0])
        cb = hf_power_limit_callback(meter, objective="energy", warmup_steps=1, profile_steps=3)
        # 4 steps per epoch < 1 + 1 + 3: Zeus would restart the first limit every epoch
        trainer, _ = _tiny_trainer(tmp_path, [cb], gpus.gpus[0], samples=16, max_steps=12)
        with pytest.raises(UserError, match="an epoch has 4 optimizer steps"):
            trainer.train()
        for hook in exit_hooks:
            hook()
