"""One estimator path: a single estimate is the one-row table of the batch path, to the bit."""

from __future__ import annotations

import pandas as pd
import pytest

from mlenergy.errors import UserError
from mlenergy.estimate import estimate, estimate_frame, sweep
from mlenergy.estimate.batch import row_estimates
from mlenergy.testing.estimate_requests import (
    TRAINING_COLUMNS,
    random_requests,
    random_training_requests,
    single_training,
)


def _single(row: dict[str, str]):
    """The single path on one CSV row (cells passed as given, blanks as not given)."""
    try:
        return estimate(**row)
    except UserError as exc:
        return exc.message


def _check_agreement(df: pd.DataFrame) -> tuple[int, int]:
    frame = estimate_frame(df)
    saved = row_estimates(frame)
    good = frame["error"] == ""
    assert len(saved) == int(good.sum())  # every estimated row is saved, none dropped
    saved_iter = iter(saved)
    for i, row in enumerate(df.to_dict("records")):
        single = _single(row)
        if isinstance(single, str):
            assert not good[i], (i, single)
            assert single.rstrip(".") == frame.loc[i, "error"].rstrip("."), i
            continue
        assert good[i], (i, frame.loc[i, "error"])
        assert next(saved_iter).to_dict() == single.to_dict(), i  # bit for bit, every key
        assert frame.loc[i, "energy_per_token_j"] == single.energy_per_token_j
        assert frame.loc[i, "energy_per_token_j_lo"] == single.energy_per_token_j_lo
        assert frame.loc[i, "energy_per_token_j_hi"] == single.energy_per_token_j_hi
        assert frame.loc[i, "throughput_tokens_per_s"] == single.throughput_tokens_per_s
        assert frame.loc[i, "avg_power_w"] == single.avg_power_w
        assert frame.loc[i, "warning"] == single.warning
    return int(good.sum()), int((~good).sum())


@pytest.mark.slow
def test_single_and_batch_agree_to_the_bit():
    estimated, refused = _check_agreement(random_requests(300, seed=3))
    assert estimated > 100 and refused > 30  # both kinds of rows are exercised


@pytest.mark.slow  # 5,000 single estimates: over ~20 s on 2 shared cores
def test_single_and_batch_agree_on_5000_random_rows():
    df = random_requests(5000, seed=7)
    assert df["mode"].eq("offline").any() and df["mode"].eq("").any()
    estimated, refused = _check_agreement(df)
    assert estimated > 2000 and refused > 500
    training = random_training_requests(5000, seed=7)
    assert _check_training_agreement(training)[1] > 1000


def _check_training_agreement(df: pd.DataFrame) -> tuple[int, int]:
    """Training rows: the batch contract and the single paths give each row the same outcome.

    A training step is estimated by :func:`~mlenergy.estimate.training.estimate_training`
    alone; the batch contract has no training mode, so it refuses every training row in its
    place with the error the single API (``estimate(mode="training")``) gives. A row the batch
    estimated would have to match the single training estimate to the bit.

    Returns:
        Rows the batch estimated, rows the single training path estimated.
    """
    frame = estimate_frame(df)
    batch_estimated = single_estimated = 0
    for i, row in enumerate(df.to_dict("records")):
        training = single_training(row)
        single_estimated += not isinstance(training, str)
        if frame.loc[i, "error"]:
            api = _single({k: v for k, v in row.items() if k not in TRAINING_COLUMNS})
            assert isinstance(api, str) and api.rstrip(".") == frame.loc[i, "error"].rstrip(".")
            continue
        batch_estimated += 1
        assert not isinstance(training, str), (i, training)
        for key in ("energy_per_token_j", "throughput_tokens_per_s", "avg_power_w"):
            assert frame.loc[i, key] == getattr(training, key), (i, key)
    return batch_estimated, single_estimated


def test_training_rows_get_the_same_outcome_from_batch_and_single():
    df = random_training_requests(300, seed=3)
    batch_estimated, single_estimated = _check_training_agreement(df)
    assert single_estimated > 60  # the single training path estimates many of the rows
    # The batch contract has no training mode (yet): every training row is refused in place.
    assert batch_estimated == 0


def test_the_random_rows_cover_the_catalogs():
    from mlenergy.estimate.configs import resolve_model_config
    from mlenergy.reference.gpus import catalog_names
    from mlenergy.testing.estimate_requests import PRECISIONS

    df = random_requests(2000, seed=1)
    assert set(df["gpu"]) == set(catalog_names())
    assert set(df["precision"]) == set(PRECISIONS)
    kinds = {resolve_model_config(m).spec.kind for m in set(df["model"])}
    assert kinds == {"dense", "moe", "hybrid"}


def test_a_bad_row_keeps_its_place_with_one_error():
    rows = random_requests(3, seed=0).copy()
    rows = pd.concat([rows.iloc[:1], rows.iloc[:1], rows.iloc[:1]], ignore_index=True)
    rows.loc[:, ["mode", "max_output_tokens", "sm_clock_mhz", "power_limit_w"]] = ""
    rows.loc[:, ["input_tokens", "output_tokens", "batch_size", "max_num_seqs"]] = "8"
    rows.loc[:, ["model", "gpu", "precision", "engine", "num_gpus"]] = ""
    rows.loc[:, ["tensor_parallel", "expert_parallel", "data_parallel", "pipeline_parallel"]] = "1"
    rows["model"] = "meta-llama/Llama-3.1-8B-Instruct"
    rows["gpu"] = ["H100", "H100", "H100"]
    rows.loc[1, "batch_size"] = "lots"
    rows.loc[1, "gpu"] = "H999"  # two problems: the row gets one error, the first found
    frame = estimate_frame(rows)
    assert list(frame["error"] == "") == [True, False, True]
    assert frame.loc[1, "error"] == "batch_size is not a number (got 'lots')"
    assert frame.loc[0, "energy_per_token_j"] == frame.loc[2, "energy_per_token_j"]
    assert len(row_estimates(frame)) == 2


def test_a_sweep_is_one_table_and_matches_single_estimates():
    base = dict(model="Qwen/Qwen3-30B-A3B-Instruct-2507", gpu="H100", output_tokens=256)
    base.update(input_tokens=1024, mode="offline")
    axes = {"batch_size": [1, 64, 4096], "sm_clock_mhz": [900.0, 1980.0, 99.0]}
    results = sweep(base, axes)
    assert len(results) == 9
    i = 0
    for batch in axes["batch_size"]:
        for clock in axes["sm_clock_mhz"]:
            single = _single({**base, "batch_size": batch, "sm_clock_mhz": clock})
            got = results[i]
            if isinstance(single, str):
                assert got == single  # the clock outside the range: the same one error
            else:
                assert got.to_dict() == single.to_dict()
            i += 1
    assert sum(isinstance(r, str) for r in results) == 3
