"""Refit the shipped coefficients: the reference measurements (and a store's), then write them.

Separate from :mod:`~mlenergy.calibrate.calibration` (the fit) and
:mod:`~mlenergy.calibrate.crossval` (its cross-validation) because it uses both: the fit gives
the coefficients, the cross-validated errors give the prediction interval.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from mlenergy.calibrate.calibration import calibrate, interval_quantiles
from mlenergy.calibrate.crossval import cross_validate
from mlenergy.estimate.coefficients import COEFFICIENTS_FILE, Coefficients, default_coefficients
from mlenergy.records import RunRecord
from mlenergy.reference.measurements import load_reference, own_measurements


def calibrate_all(
    reference: str | Path | None = None,
    store_runs: Iterable[RunRecord] | None = None,
    *,
    out: str | Path,
    configs_dir: str | Path | None = None,
    include_v2: bool = True,
    folds: int = 10,
) -> tuple[Coefficients, Path, int]:
    """Fit on the reference (and optionally a store's GPU measurements) and write the result.

    The prediction interval comes from the 5th/95th percentiles of cross-validated log
    errors of energy per token (grouped by architecture, ``folds`` folds): see
    :func:`~mlenergy.calibrate.calibration.interval_quantiles`.

    Args:
        reference: Reference folder (default :func:`~mlenergy.reference.reference_dir`).
        store_runs: A store's run records (``RunStore.runs()``); its own measured GPU
            serving runs are added to the fit (none: skipped; imported reference runs are
            not counted twice).
        out: Output file or folder (``coefficients.json`` inside a folder). Never the
            package's own file unless named: the shipped fit stays as released, and
            estimates load a user's coefficients only when asked (``--coefficients``).
        configs_dir: Folder of model configs.
        include_v2: Include the 2024 v2 tables.
        folds: Cross-validation folds for the interval (0: keep the current interval).

    Returns:
        The coefficients, the path written and the number of rows fitted.
    """
    df = load_reference(reference, include_v2=include_v2)
    if store_runs is not None:
        extra = own_measurements(store_runs, configs_dir)
        if len(extra):
            df = pd.concat([df, extra], ignore_index=True)
    coef, used = calibrate(df, configs_dir)
    if folds:
        cv = cross_validate(df, folds=folds, configs_dir=configs_dir)
        coef = coef.replace(**interval_quantiles(cv.rows))
    path = coef.save(out)
    if path.resolve() == (Path(__file__).parent / COEFFICIENTS_FILE).resolve():
        default_coefficients.cache_clear()  # the shipped file was named and rewritten
    return coef, path, len(used)
