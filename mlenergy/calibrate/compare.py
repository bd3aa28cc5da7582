"""Measured runs beside their estimates: each run's inputs through the estimator, both halves.

Energy per token is power over throughput, so an estimate can be right by two wrong halves
cancelling. :func:`compare_runs` reports every half on its own, signed (``predicted /
measured - 1``, percent: above 0 is over-prediction), for the measured GPU serving runs of a
store or any list of run records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mlenergy.calibrate.calibration import row_errors
from mlenergy.calibrate.crossval import in_sample
from mlenergy.errors import UserError
from mlenergy.estimate.coefficients import Coefficients
from mlenergy.records import RunRecord
from mlenergy.reference.measurements import measurements_from_records

COLUMNS = (
    "run_id",
    "model_id",
    "gpu",
    "num_gpus",
    "task",
    "batch_size",
    "energy_per_token_j",
    "pred_energy_per_token_j",
    "signed_energy",
    "throughput_tokens_per_s",
    "pred_throughput_tokens_per_s",
    "signed_throughput",
    "avg_power_w",
    "pred_avg_power_w",
    "signed_power",
)
"""Columns of :attr:`Comparison.rows` (measured, predicted and signed error of each half)."""


@dataclass
class Comparison:
    """Measured runs beside their estimates.

    Attributes:
        rows: One row per compared run (:data:`COLUMNS`; errors in percent).
        skipped: ``(run_id, reason)`` of measured GPU serving runs the estimator could not
            take (no config for the model, a layout it refuses).
    """

    rows: pd.DataFrame
    skipped: list[tuple[str, str]]

    def summary(self) -> pd.DataFrame:
        """Median absolute and median signed error of each half (percent), all rows."""
        out = {}
        for half in ("energy", "throughput", "power"):
            signed = self.rows[f"signed_{half}"]
            out[half] = {
                "n": float(len(signed)),
                "abs_median": float(signed.abs().median()),
                "signed_median": float(signed.median()),
            }
        return pd.DataFrame(out).T


def _skip_reason(row: pd.Series, configs_dir: str | Path | None) -> str:
    return str(row_errors(row.to_frame().T.reset_index(drop=True), configs_dir)[0]) or (
        "not estimated"
    )


def compare_runs(
    records: Iterable[RunRecord],
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
) -> Comparison:
    """Estimate every measured GPU serving run of ``records`` with the same inputs.

    Args:
        records: Run records (e.g. ``RunStore(dir).runs()``); only measured GPU serving runs
            are compared (see :func:`~mlenergy.reference.measurements.measurement_row`).
        configs_dir: Folder of model configs.
        coefficients: Coefficients (default: shipped).

    Returns:
        The comparison; empty rows when no run qualifies or none could be estimated.
    """
    df = measurements_from_records(records, configs_dir)
    if df.empty:
        return Comparison(pd.DataFrame(columns=list(COLUMNS)), [])
    try:
        rows = in_sample(df, coefficients, configs_dir)
    except UserError:  # no row could be prepared
        rows = df.iloc[0:0]
    done = set(rows["run_id"]) if len(rows) else set()
    skipped = [
        (str(r["run_id"]), _skip_reason(r, configs_dir))
        for _, r in df.iterrows()
        if r["run_id"] not in done
    ]
    if rows.empty:
        return Comparison(pd.DataFrame(columns=list(COLUMNS)), skipped)
    return Comparison(rows[list(COLUMNS)].reset_index(drop=True), skipped)
