import math
import warnings

import pytest
import torch

from mlenergy.errors import UserError
from mlenergy.quality.perplexity import perplexity, perplexity_record
from mlenergy.records import Hardware, ModelInfo, Software

torch.set_num_threads(1)

VOCAB = 64


def _tiny_model(seed=0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Qwen2ForCausalLM(cfg)


@pytest.mark.slow
def test_memorised_text_has_far_lower_perplexity_than_random_text():
    from mlenergy.measure import EnergyMeter
    from mlenergy.workloads.training import TrainingSpec, train_model

    gen = torch.Generator().manual_seed(0)
    memorised = torch.randint(0, VOCAB, (160,), generator=gen).repeat(4)
    random_text = torch.randint(0, VOCAB, (640,), generator=gen)
    model = _tiny_model()
    info = ModelInfo(
        model_id="test:memorise",
        config_fingerprint="0" * 16,
        architecture="qwen2",
        is_moe=False,
        total_params=1,
        active_params=1,
        dtype="float32",
        weights="trained",
    )
    with EnergyMeter() as meter:
        out = train_model(
            model,
            memorised,
            memorised,
            TrainingSpec(
                steps=120, batch_size=8, seq_len=32, learning_rate=1e-2, num_checkpoints=2
            ),
            meter,
            model_info=info,
            hardware=Hardware(),
            software=Software(python="3", mlenergy="0"),
        )
    seen = perplexity(out.model, memorised, seq_len=32)
    unseen = perplexity(out.model, random_text, seq_len=32)
    assert seen.perplexity < 3.0
    assert unseen.perplexity > 10 * seen.perplexity
    assert out.final_val.perplexity == pytest.approx(seen.perplexity, rel=1e-4)


def test_perplexity_of_uniform_model_is_vocab_size():
    class Uniform(torch.nn.Module):
        config = type("C", (), {"vocab_size": VOCAB})()

        def forward(self, input_ids, **_):
            logits = torch.zeros(*input_ids.shape, VOCAB)
            return type("O", (), {"logits": logits})()

    ids = torch.randint(0, VOCAB, (1000,))
    res = perplexity(Uniform(), ids, seq_len=50, batch_size=4)
    assert res.perplexity == pytest.approx(VOCAB, rel=1e-5)
    assert res.nll_per_token == pytest.approx(math.log(VOCAB), rel=1e-6)
    assert res.num_windows == 999 // 50
    assert res.num_tokens == res.num_windows * 50
    assert res.stderr == pytest.approx(0.0, abs=1e-6)
    rec = perplexity_record(
        res,
        model=ModelInfo(
            model_id="u",
            config_fingerprint="a" * 16,
            architecture="x",
            is_moe=False,
            total_params=1,
            active_params=1,
            dtype="float32",
            weights="random",
        ),
        software=Software(python="3", mlenergy="0"),
        corpus="pydoc",
        dataset="pydoc_data.topics[val]",
        linked_run_ids=["run12345"],
    )
    assert rec.task == "perplexity:pydoc"
    assert rec.higher_is_better is False
    assert rec.linked_run_ids == ("run12345",)


def test_too_short_or_out_of_vocab_streams_are_user_errors():
    model = _tiny_model()
    with pytest.raises(UserError, match="fewer than one window"):
        perplexity(model, torch.arange(10), seq_len=32)
    with pytest.raises(UserError, match="outside the model's vocabulary"):
        perplexity(model, torch.full((100,), VOCAB + 5), seq_len=32)
