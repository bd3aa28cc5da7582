"""Many estimates at once: the batch CSV contract, vectorised with numpy.

Input columns: ``model``, ``gpu``, ``num_gpus``, ``tensor_parallel``, ``expert_parallel``,
``data_parallel``, ``pipeline_parallel`` (optional, default 1), ``precision``, ``task``
(optional), ``batch_size``, ``max_num_seqs``, ``input_tokens`` (may be empty: task default),
``output_tokens``, and optionally ``sm_clock_mhz`` or ``power_limit_w`` (per GPU, W). The
parallel layout must occupy ``num_gpus`` (derived when blank; see
:func:`~mlenergy.estimate.checks.check_layout`). Output: the input columns plus
``energy_per_token_j``,
``energy_per_token_j_lo``, ``energy_per_token_j_hi``, ``throughput_tokens_per_s``,
``avg_power_w``, ``error`` (empty when the row was estimated) and ``warning`` (caveats of an
estimated row, empty if none). An optional ``engine`` column picks the serving engine (blank:
the task's, see :mod:`~mlenergy.estimate.engines`); optional ``mode`` (``serving``, the
default, or ``offline``) and ``max_output_tokens`` (an offline job's generation cap) pick the
workload (:mod:`~mlenergy.estimate.offline`). A bad row keeps its place.

Every row goes through :func:`~mlenergy.estimate.table.estimate_table`, the path a single
estimate takes too (as a table of one row): the same checks, defaults and figures.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from mlenergy.errors import UserError
from mlenergy.estimate.coefficients import Coefficients
from mlenergy.estimate.request_types import REQUIRED_FIELDS
from mlenergy.estimate.requests import EstimateRequests
from mlenergy.estimate.table import estimate_table
from mlenergy.estimate.table_rows import Estimate, EstimateTable

INPUT_COLUMNS = (
    "model",
    "gpu",
    "num_gpus",
    "tensor_parallel",
    "expert_parallel",
    "data_parallel",
    "pipeline_parallel",
    "precision",
    "task",
    "batch_size",
    "max_num_seqs",
    "input_tokens",
    "output_tokens",
)
OUTPUT_COLUMNS = (
    "energy_per_token_j",
    "energy_per_token_j_lo",
    "energy_per_token_j_hi",
    "throughput_tokens_per_s",
    "avg_power_w",
)
CONTROL_COLUMNS = ("sm_clock_mhz", "power_limit_w")
"""Optional input columns: a locked SM clock (MHz) or a power limit per GPU (W), not both."""
REQUIRED = REQUIRED_FIELDS


def _check_columns(df: pd.DataFrame) -> None:
    """Raise when a required column is missing (naming them, with the optional ones)."""
    missing = [c for c in REQUIRED if c not in df]
    if missing:
        names = ", ".join(f"'{c}'" for c in missing)
        raise UserError(
            f"batch input lacks required column{'s' if len(missing) > 1 else ''} {names}",
            f"Required: {', '.join(REQUIRED)}; optional: "
            f"{', '.join(c for c in (*INPUT_COLUMNS, *CONTROL_COLUMNS) if c not in REQUIRED)}",
        )


def frame_table(
    df: pd.DataFrame,
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
) -> EstimateTable:
    """The :class:`~mlenergy.estimate.table_rows.EstimateTable` of a batch frame's rows.

    Raises:
        UserError: A required column is missing.
    """
    _check_columns(df)
    return estimate_table(EstimateRequests.from_frame(df), configs_dir, coefficients)


def estimate_frame(
    df: pd.DataFrame,
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
) -> pd.DataFrame:
    """Estimate every row of a batch frame; rows that cannot be estimated get ``error``.

    Args:
        df: Frame with the batch input columns (extra columns are kept).
        configs_dir: Folder of ``<org>__<name>.json`` model configs.
        coefficients: Model coefficients (default: shipped).

    Returns:
        A copy of ``df`` with the output columns, ``error`` and ``warning`` appended, same
        row order.
    """
    table = frame_table(df, configs_dir, coefficients)
    result = df.copy()
    for col, values in table.columns().items():
        result[col] = values
    result["error"] = table.error
    result["warning"] = table.warning
    return result


def estimate_csv(
    in_path: str | Path,
    out_path: str | Path,
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
) -> pd.DataFrame:
    """Read a batch CSV, estimate every row and write the output CSV atomically."""
    src = Path(in_path)
    if not src.is_file():
        raise UserError(f"batch file '{src}' does not exist", "Check the --batch path")
    try:
        df = pd.read_csv(src, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise UserError(
            f"batch file '{src}' is empty",
            f"Give a header row with at least {', '.join(REQUIRED)} and one row per estimate",
        ) from None
    except pd.errors.ParserError as exc:
        raise UserError(f"batch file '{src}' is not a valid CSV ({exc})") from None
    if df.empty:
        raise UserError(f"batch file '{src}' has a header but no rows", "Add one row per estimate")
    result = estimate_frame(df, configs_dir, coefficients)
    dst = Path(out_path)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    result.to_csv(tmp, index=False)
    tmp.replace(dst)
    return result


def row_estimates(
    result: pd.DataFrame,
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
) -> list[Estimate]:
    """:class:`~mlenergy.estimate.table_rows.Estimate` s of the rows of a batch without error.

    The rows are estimated by the one path (:func:`frame_table`), so ``--batch --save``
    stores the records a single ``--save`` of each row would; every row that
    :func:`estimate_frame` estimated is one of them, in order.

    Args:
        result: The frame returned by :func:`estimate_frame` (or its input).
        configs_dir: Folder of model configs.
        coefficients: Model coefficients (default: shipped).
    """
    inputs = result.drop(columns=["error", "warning"], errors="ignore")
    return frame_table(inputs, configs_dir, coefficients).estimates()
