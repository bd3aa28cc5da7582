from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

from mlenergy.reference import reference_dir

REF = reference_dir()


@pytest.fixture
def configs_dir():
    return REF / "model-configs"


@pytest.fixture
def tiny_config_dict() -> dict[str, object]:
    """A small dense Llama-style ``config.json`` as a dict (no reference needed)."""
    return {
        "model_type": "llama",
        "hidden_size": 1024,
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "intermediate_size": 4096,
        "vocab_size": 32000,
    }


@pytest.fixture
def tiny_config(tmp_path, tiny_config_dict):
    """:func:`tiny_config_dict` written to ``config.json`` (no reference needed)."""
    import json

    path = tmp_path / "config.json"
    path.write_text(json.dumps(tiny_config_dict))
    return path


@pytest.fixture
def measured_run():
    """A factory of measured serving runs: 32 x 256 tokens at 3000 tokens/s and 550 W."""
    from mlenergy.records import (
        Hardware,
        ModelInfo,
        Phase,
        PhaseResult,
        RunRecord,
        Software,
        Workload,
    )

    def make(
        gpu: str = "H100",
        source: str = "measured:zeus-nvml",
        model_id: str = "meta-llama/Llama-3.1-8B-Instruct",
    ) -> RunRecord:
        tokens = 32 * 256
        return RunRecord(
            model=ModelInfo(
                model_id=model_id,
                config_fingerprint="0" * 16,
                architecture="llama",
                is_moe=False,
                total_params=8_000_000_000,
                active_params=8_000_000_000,
                dtype="bfloat16",
                weights="pretrained",
            ),
            workload=Workload(
                kind="inference",
                task="lm-arena-chat",
                batch_size=32,
                max_num_seqs=32,
                input_tokens=256,
                output_tokens=256,
                num_requests=32,
                device="cuda",
            ),
            hardware=Hardware(accelerator_model=gpu, accelerator_count=1),
            software=Software(python="3.11", mlenergy="0.1.0"),
            energy_source=source,
            phases=(
                PhaseResult.from_totals(
                    Phase.REQUEST, tokens / 3000.0, 550 * tokens / 3000.0, tokens, itl_p50_s=0.01
                ),
            ),
        )

    return make
