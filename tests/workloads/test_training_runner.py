import itertools
import warnings

import pytest
import torch

from mlenergy.errors import UserError
from mlenergy.records import Hardware, Phase, Software
from mlenergy.workloads.training import TrainingSpec, train_model

torch.set_num_threads(1)
HW = Hardware()
SW = Software(python="3", mlenergy="0")


def _build(moe: bool):
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2MoeConfig

    common = dict(
        vocab_size=96,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    if moe:
        cfg = Qwen2MoeConfig(
            moe_intermediate_size=32,
            num_experts=4,
            num_experts_per_tok=2,
            shared_expert_intermediate_size=0,
            output_router_logits=True,
            router_aux_loss_coef=0.01,
            **common,
        )
    else:
        cfg = Qwen2Config(intermediate_size=64, **common)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_config(cfg)
    from mlenergy.models import model_info_from_config

    return model, model_info_from_config(cfg, "test:model", "float32", "trained", model)


@pytest.fixture(scope="module")
def meter():
    from mlenergy.measure import EnergyMeter

    with EnergyMeter() as m:
        yield m


@pytest.fixture(scope="module")
def streams():
    gen = torch.Generator().manual_seed(1)
    return torch.randint(0, 96, (3000,), generator=gen), torch.randint(0, 96, (400,), generator=gen)


@pytest.mark.parametrize("moe", [False, True], ids=["dense", "moe"])
def test_training_record_has_curve_energy_and_router_stats(meter, streams, moe):
    model, info = _build(moe)
    spec = TrainingSpec(steps=9, batch_size=4, seq_len=16, num_checkpoints=3, seed=3)
    steps_seen = []
    out = train_model(
        model,
        *streams,
        spec,
        meter,
        model_info=info,
        hardware=HW,
        software=SW,
        tags={"variant": "v"},
        on_step=steps_seen.append,
    )
    rec = out.record
    assert steps_seen == list(range(1, 10))
    assert rec.workload.kind == "training"
    assert rec.workload.steps == 9 and rec.workload.seq_len == 16
    assert [p.phase for p in rec.phases] == [Phase.TRAIN]
    train = rec.phase(Phase.TRAIN)
    assert train.tokens == 9 * 4 * 16
    assert rec.energy_source == meter.energy_source
    assert [c.step for c in rec.checkpoints] == [0, 3, 6, 9]
    energies = [c.energy_j for c in rec.checkpoints]
    assert energies[0] == 0.0
    assert all(b >= a for a, b in itertools.pairwise(energies))
    assert train.energy_j == pytest.approx(energies[-1])
    assert train.energy_per_token_j == pytest.approx(train.energy_j / train.tokens)
    assert rec.checkpoints[-1].val_perplexity == pytest.approx(out.final_val.perplexity)
    assert rec.checkpoints[-1].tokens_seen == train.tokens
    assert rec.tags["variant"] == "v"
    assert not out.model.training
    if moe:
        assert all(c.load_balancing_loss is not None for c in rec.checkpoints[1:])
        assert rec.checkpoints[0].load_balancing_loss is None
        util = rec.expert_utilisation
        assert util is not None and len(util) == 4
        assert sum(util) == pytest.approx(1.0)
        assert "router_aux_loss_coef" in rec.tags
    else:
        assert rec.expert_utilisation is None
        assert all(c.load_balancing_loss is None for c in rec.checkpoints)


def test_training_is_reproducible_per_seed(meter, streams):
    finals = []
    for _ in range(2):
        model, info = _build(False)
        spec = TrainingSpec(steps=4, batch_size=2, seq_len=16, num_checkpoints=1, seed=7)
        out = train_model(model, *streams, spec, meter, model_info=info, hardware=HW, software=SW)
        finals.append(out.final_val.perplexity)
    assert finals[0] == pytest.approx(finals[1], rel=1e-5)


def test_bad_training_input_is_a_user_error(meter, streams):
    with pytest.raises(UserError, match="steps must be at least 1"):
        TrainingSpec(steps=0)
    model, info = _build(False)
    spec = TrainingSpec(steps=2, batch_size=2, seq_len=16)
    with pytest.raises(UserError, match="too few"):
        train_model(
            model,
            torch.arange(10),
            streams[1],
            spec,
            meter,
            model_info=info,
            hardware=HW,
            software=SW,
        )


def test_schedule_and_checkpoint_steps():
    spec = TrainingSpec(steps=100, num_checkpoints=4, warmup_steps=10, min_lr_ratio=0.1)
    assert spec.checkpoint_steps() == [25, 50, 75, 100]
    assert spec.lr_factor(0) == pytest.approx(0.1)
    assert spec.lr_factor(9) == pytest.approx(1.0)
    assert spec.lr_factor(99) == pytest.approx(0.1, abs=1e-3)
    assert TrainingSpec(steps=2, num_checkpoints=5).checkpoint_steps() == [1, 2]


def test_training_windows_too_short_for_the_counter_report_no_energy(streams):
    from mlenergy.measure import EnergyMeter
    from mlenergy.measure.emulated import install_emulated_gpus

    model, info = _build(False)
    spec = TrainingSpec(steps=2, batch_size=2, seq_len=16, num_checkpoints=2, seed=7)
    with (
        install_emulated_gpus(power_w=300.0, counter_period_s=0.5),
        EnergyMeter() as slow,
        pytest.warns(RuntimeWarning, match="under ten energy-counter periods"),
    ):
        out = train_model(model, *streams, spec, slow, model_info=info, hardware=HW, software=SW)
    assert all(c.energy_j is None for c in out.record.checkpoints[1:])
    assert out.record.phase("train").energy_j is None
