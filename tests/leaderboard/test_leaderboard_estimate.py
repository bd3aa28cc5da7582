"""The estimator playground's adapter: an answer with its label, or the estimator's problem."""

from __future__ import annotations

from mlenergy.leaderboard.estimate_tab import run_estimate

CONFIG = {
    "model_type": "llama",
    "hidden_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "intermediate_size": 1024,
    "vocab_size": 32000,
}


def test_uploaded_config_estimate(tmp_path):
    import json

    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG))
    html, fig = run_estimate(None, str(path), "H100-SXM5-80GB", 1, 16, 256, 256, "bfloat16", 0)
    assert 'id="est-table"' in html
    assert "estimated:mlenergy-" in html
    assert len(fig.data) == 1 and len(fig.data[0].x) >= 3


def test_problems_are_shown_not_raised(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{}")
    html, _ = run_estimate(None, str(path), "H100-SXM5-80GB", 1, 16, 256, 256, "bfloat16", 0)
    assert "Cannot estimate" in html
    html, _ = run_estimate(None, None, None, 1, 16, 256, 256, "bfloat16", 0)
    assert "pick a model" in html
