"""The accuracy report of ``mlenergy estimate validate --markdown``, as Markdown.

Docs include this text verbatim (``docs/estimate.md``), so every figure there is printed by
the command named above it; nothing here computes a figure.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from mlenergy.calibrate.crossval import CrossValidation, EnergyTail, TargetCheck

COLUMN_TITLES = {
    "n": "rows",
    "energy_median": "energy median %",
    "energy_p90": "energy p90 %",
    "throughput_median": "throughput median %",
    "power_median": "power median %",
    "throughput_signed": "throughput signed %",
    "power_signed": "power signed %",
    "interval_coverage": "in 90% interval %",
}
"""Column headings of the tables (all figures in percent but the row count)."""


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def markdown_table(frame: pd.DataFrame, index_title: str) -> str:
    """A frame of :meth:`CrossValidation.summary` figures as a Markdown table.

    Args:
        frame: Rows of groups (a plain or multi-level index), columns of figures.
        index_title: Heading of the group column(s); levels are joined with `` / ``.

    Returns:
        The table, one line per row, figures to one decimal and counts whole.
    """
    heads = [index_title] + [COLUMN_TITLES.get(str(c), str(c)) for c in frame.columns]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for key, row in frame.iterrows():
        name = " / ".join(str(k) for k in key) if isinstance(key, tuple) else str(key)
        cells = [str(int(row["n"])) if c == "n" else _cell(float(row[c])) for c in frame.columns]
        lines.append("| " + " | ".join([name, *cells]) + " |")
    return "\n".join(lines)


def validation_markdown(
    command: str,
    cv: CrossValidation,
    tables: dict[str, pd.DataFrame],
    checks: Sequence[TargetCheck],
    tail: EnergyTail,
    rule: str,
) -> str:
    """The whole ``validate`` report as Markdown: the command, the tables, the targets.

    Args:
        command: The command line that printed it (shown first, so a reader can rerun it).
        cv: The cross-validation (its fold and row counts).
        tables: Table name to frame (:func:`~mlenergy.calibrate.crossval.validation_tables`).
        checks: The targets and their figures.
        tail: The rows behind the energy p90.
        rule: The host-bound rule, in words.
    """
    out = [
        f"Printed by `{command}`: {cv.folds} folds, {len(cv.rows)} rows; absolute "
        "percentage errors of out-of-fold predictions (signed: predicted / measured - 1).",
    ]
    for name, frame in tables.items():
        title = "All rows" if name == "overall" else f"By {name}"
        out += ["", f"**{title}**", "", markdown_table(frame, name)]
    met = sum(c.met for c in checks)
    out += ["", f"Targets: {met} of {len(checks)} met.", ""]
    out += [f"- {c.describe()}" for c in checks]
    out += ["", f"Host-bound rule: {rule}.", "", tail.describe().capitalize() + "."]
    return "\n".join(out) + "\n"
