from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

from mlenergy.estimate.locate import reference_dir

REF = reference_dir()
needs_reference = pytest.mark.skipif(REF is None, reason="../shared/reference not found")


@pytest.fixture
def configs_dir():
    if REF is None:
        pytest.skip("../shared/reference not found")
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
