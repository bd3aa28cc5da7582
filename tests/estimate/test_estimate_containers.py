"""The physics' typed inputs and outputs: Features, MemoryFeatures and Prediction."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mlenergy.estimate.coefficients import default_coefficients
from mlenergy.estimate.features import FEATURES, Features, stack
from mlenergy.estimate.memory import MEMORY_KEYS, MemoryFeatures
from mlenergy.estimate.offline import predict_modes
from mlenergy.estimate.physics import predict
from mlenergy.estimate.prediction import PREDICTIONS, Prediction
from mlenergy.estimate.serving import ServingSetup
from mlenergy.testing.estimate_features import prepare

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture
def two_rows(configs_dir) -> Features:
    """Two serving configurations of one model on an H100 (batch 16 and 128)."""
    rows = [
        prepare(LLAMA, "H100", ServingSetup(b, 512, 256), configs_dir=configs_dir)[3]
        for b in (16, 128)
    ]
    return stack(rows)


def test_feature_names_are_the_fields():
    """FEATURES and MEMORY_KEYS name the containers' fields, in order, and nothing else."""
    assert tuple(f.name for f in dataclasses.fields(Features)) == FEATURES
    assert tuple(f.name for f in dataclasses.fields(MemoryFeatures))[:-1] == MEMORY_KEYS
    assert tuple(f.name for f in dataclasses.fields(Prediction)) == PREDICTIONS
    assert not set(FEATURES) & set(MEMORY_KEYS)


def test_columns_round_trip_and_a_missing_feature_raises(two_rows):
    cols = two_rows.columns()
    assert list(cols) == list(FEATURES)
    again = Features.from_columns({**cols, "not_a_feature": np.zeros(2)})
    assert all(np.array_equal(getattr(again, n), cols[n], equal_nan=True) for n in FEATURES)
    del cols["batch"]
    with pytest.raises(KeyError):
        Features.from_columns(cols)


def test_containers_are_frozen(two_rows):
    with pytest.raises(dataclasses.FrozenInstanceError):
        two_rows.batch = np.ones(2)  # type: ignore[misc]
    with pytest.raises(TypeError):
        two_rows.replace(context=np.ones(2))


def test_rows_of_features_predict_as_the_rows_of_the_prediction(two_rows):
    """Row selection commutes with the physics, to the bit (the batch path relies on it)."""
    c = default_coefficients()
    both = predict(two_rows, c)
    second = predict(two_rows.rows(np.array([1])), c)
    for name, col in second.columns().items():
        assert np.array_equal(col, getattr(both, name)[1:], equal_nan=True), name
    assert len(two_rows) == 2 and len(two_rows.repeat(3)) == 6
    assert np.array_equal(two_rows.repeat(3).batch, [16, 16, 16, 128, 128, 128])


def test_modes_fill_their_own_columns(two_rows):
    """Serving rows have no job durations; an offline job has them and no median step."""
    c = default_coefficients()
    nan = np.full(2, np.nan)
    out = predict_modes(
        two_rows,
        c,
        np.array([False, True]),
        nan,
        two_rows.batch,
        np.full(2, 8192.0),
        np.ones(2, dtype=bool),
    )
    assert np.isnan(out.job_duration_s[0]) and np.isnan(out.prefill_duration_s[0])
    assert np.isfinite(out.median_step_s[0]) and np.isfinite(out.decode_step_s[0])
    assert out.job_duration_s[1] > out.prefill_duration_s[1] > 0
    assert np.isnan(out.median_step_s[1]) and np.isnan(out.decode_step_s[1])
    serving = predict(two_rows, c)
    assert out.energy_per_token_j[0] == serving.energy_per_token_j[0]
    assert out.energy_per_token_j[1] != serving.energy_per_token_j[1]
