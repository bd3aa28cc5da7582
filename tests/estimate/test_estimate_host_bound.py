"""Host-bound configurations: the rule, their own prediction interval, their warning."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mlenergy.calibrate.calibration import interval_quantiles
from mlenergy.estimate import estimate
from mlenergy.estimate.batch import estimate_frame
from mlenergy.estimate.coefficients import Coefficients, default_coefficients
from mlenergy.estimate.host_bound import (
    MIN_HOST_BOUND_ROWS,
    host_bound_mask,
    host_bound_note,
    is_host_bound,
)

RULE = default_coefficients().host_bound_rule
HOST_BOUND_NOTE = host_bound_note(RULE)


def _wide_host_interval() -> Coefficients:
    """Shipped coefficients with a host-bound interval clearly wider than the common one."""
    return default_coefficients().replace(
        log_q05=-0.25, log_q95=0.35, log_q05_host=-0.4, log_q95_host=0.8, interval_by_class={}
    )


def test_rule_matches_one_b200_on_long_output_and_multimodal_tasks_only():
    gpus = ["B200", "B200", "B200", "H100-SXM5-80GB", "B200", "B200"]
    counts = [1, 1, 1, 1, 2, 1]
    tasks = ["gpqa", " Video-Chat ", "lm-arena-chat", "gpqa", "gpqa", None]
    assert host_bound_mask(gpus, counts, tasks, RULE).tolist() == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    assert is_host_bound("B200", 1, "image-chat", RULE)
    assert not is_host_bound("B200", 1, "", RULE)
    assert not host_bound_mask(gpus, counts, tasks, None).any()  # coefficients without a rule


def test_the_rule_ships_with_the_coefficients(tmp_path):
    assert RULE.gpu == "B200" and RULE.num_gpus == 1
    assert RULE.tasks == ("gpqa", "image-chat", "video-chat")
    assert "one B200 with gpqa, image-chat or video-chat" in HOST_BOUND_NOTE
    saved = Coefficients.load(default_coefficients().save(tmp_path))
    assert saved.host_bound_rule == RULE
    assert Coefficients().host_bound_rule is None  # not a code constant


def test_old_coefficients_without_host_quantiles_fall_back(tmp_path):
    path = tmp_path / "coefficients.json"
    path.write_text(json.dumps({"log_q05": -0.2, "log_q95": 0.3}))
    coef = Coefficients.load(path)
    assert coef.interval_logs(True) == coef.interval_logs(False) == (-0.2, 0.3)


def test_interval_quantiles_split_the_host_bound_rows():
    rng = np.random.default_rng(0)
    n_host = MIN_HOST_BOUND_ROWS + 10
    rows = pd.DataFrame(
        {
            "gpu": ["H100-SXM5-80GB"] * 200 + ["B200"] * n_host,
            "num_gpus": [1] * (200 + n_host),
            "task": ["lm-arena-chat"] * 200 + ["gpqa"] * n_host,
            "log_ratio_energy": np.r_[rng.normal(0, 0.1, 200), rng.normal(0.3, 0.4, n_host)],
        }
    )
    q = interval_quantiles(rows)
    assert q["log_q95"] < 0.3 < q["log_q95_host"]
    assert q["log_q05_host"] < q["log_q05"] < 0
    few = rows.iloc[: 200 + MIN_HOST_BOUND_ROWS - 1]
    assert interval_quantiles(few)["log_q05_host"] is None


def test_single_estimate_widens_and_warns_for_a_host_bound_configuration(tiny_config):
    coef = _wide_host_interval()
    kw = dict(batch_size=32, input_tokens=300, output_tokens=2000, coefficients=coef)
    host = estimate(str(tiny_config), "B200", task="gpqa", **kw)
    chat = estimate(str(tiny_config), "B200", task="lm-arena-chat", **kw)
    assert host.energy_per_token_j == pytest.approx(chat.energy_per_token_j)
    assert host.energy_per_token_j_hi / host.energy_per_token_j == pytest.approx(np.exp(0.8))
    assert chat.energy_per_token_j_hi / chat.energy_per_token_j == pytest.approx(np.exp(0.35))
    assert host.energy_per_token_j_lo / host.energy_per_token_j == pytest.approx(np.exp(-0.4))
    assert HOST_BOUND_NOTE in host.warning
    assert HOST_BOUND_NOTE not in chat.warning


def test_batch_rows_get_their_own_interval_and_warning(tiny_config):
    coef = _wide_host_interval()
    rows = pd.DataFrame(
        {
            "model": [str(tiny_config)] * 3,
            "gpu": ["B200", "B200", "B200"],
            "num_gpus": [1, 1, 2],
            "tensor_parallel": [1, 1, 2],
            "task": ["video-chat", "lm-arena-chat", "video-chat"],
            "batch_size": [32, 32, 32],
            "input_tokens": [300, 300, 300],
            "output_tokens": [500, 500, 500],
        }
    )
    out = estimate_frame(rows, coefficients=coef)
    assert (out["error"] == "").all()
    hi = out["energy_per_token_j_hi"] / out["energy_per_token_j"]
    assert hi.tolist() == pytest.approx([np.exp(0.8), np.exp(0.35), np.exp(0.35)])
    assert [HOST_BOUND_NOTE in w for w in out["warning"]] == [True, False, False]
    single = estimate(
        str(tiny_config),
        "B200",
        task="video-chat",
        batch_size=32,
        input_tokens=300,
        output_tokens=500,
        coefficients=coef,
    )
    assert out.loc[0, "energy_per_token_j_hi"] == pytest.approx(single.energy_per_token_j_hi)
