"""One optimizer-state rule and one usable-memory rule for every training path."""

from __future__ import annotations

import pytest

from mlenergy.errors import UserError
from mlenergy.estimate.memory import usable_bytes
from mlenergy.estimate.training import estimate_pipeline_stages, estimate_training
from mlenergy.estimate.training_memory import state_bytes, usable_gb
from mlenergy.estimate.training_pipeline import stage_memory_gb


def test_fsdp_shards_all_sixteen_bytes_the_distributed_optimizer_twelve():
    assert state_bytes(1e9, 4, fully_sharded=True) == pytest.approx(16e9 / 4)
    assert state_bytes(1e9, 4, fully_sharded=False) == pytest.approx(4e9 + 12e9 / 4)
    # one replica: the two layouts hold the same 16 bytes per parameter
    assert state_bytes(1e9, 1, fully_sharded=True) == state_bytes(1e9, 1, fully_sharded=False)


def test_pipeline_stages_use_the_distributed_optimizer_rule():
    state_gb, _ = stage_memory_gb(8e9, 4, 1, 2048, 4096, tp=2, dp=4)
    assert state_gb == pytest.approx(state_bytes(8e9 / 2, 4, fully_sharded=False) / 1e9)


def test_training_and_serving_share_the_usable_memory_rule():
    assert usable_gb(80) == pytest.approx(float(usable_bytes(80)) / 1e9)  # 0.9 x 80 GiB


def test_training_step_error_quotes_the_usable_memory(tiny_config):
    with pytest.raises(UserError) as info:
        estimate_training(str(tiny_config), "L4", batch_size=4096, seq_len=8192)
    assert f"{usable_gb(24):.1f} GB usable" in info.value.message


def test_pipeline_instruction_error_quotes_the_usable_memory(tiny_config):
    with pytest.raises(UserError) as info:
        estimate_pipeline_stages(
            str(tiny_config), "L4", stages=2, microbatch_size=4096, seq_len=8192
        )
    assert f"{usable_gb(24):.1f} GB usable on L4" in info.value.message
