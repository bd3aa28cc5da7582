"""Carbon and cost beside the measured study's joules (derived at view time, never stored).

With a :class:`mlenergy.footprint.Footprint` (``--carbon-intensity``/``--region``,
``--price-kwh``, ``--pue``), the headline table gains grams of CO2e and cost per response and
per correct answer, each column labelled with the intensity's region and year; ``summary.csv``
gains the same figures and the settings they were derived with (intensity, region, source,
year, price and its source, PUE). Without one, nothing is added.
"""

from __future__ import annotations

import math

import pandas as pd

from mlenergy.footprint import Footprint

FOOTPRINT_COLUMNS: tuple[str, ...] = (
    "carbon_g_per_response",
    "carbon_g_per_correct",
    "cost_per_response",
    "cost_per_correct",
)
"""Figures ``summary.csv`` adds with a footprint (only those whose setting is given)."""

_ENERGY = {"response": "energy_per_response_j", "correct": "energy_per_correct_j"}


def _value(fp: Footprint, kind: str, energy_j: object) -> float:
    if not isinstance(energy_j, int | float) or not math.isfinite(float(energy_j)):
        return math.nan
    got = fp.carbon_g(float(energy_j)) if kind == "carbon" else fp.cost(float(energy_j))
    return math.nan if got is None else got


def _kinds(fp: Footprint) -> list[str]:
    return [k for k, on in (("carbon", fp.intensity), ("cost", fp.price_per_kwh)) if on]


def footprint_frame(rows: pd.DataFrame, fp: Footprint) -> pd.DataFrame:
    """Carbon (g CO2e) and cost (the price's currency) per response and per correct answer.

    Args:
        rows: The study's rows (``energy_per_response_j``, ``energy_per_correct_j``, joules).
        fp: The footprint settings.

    Returns:
        One column per figure whose setting is given (:data:`FOOTPRINT_COLUMNS`, in order),
        on ``rows``' index; ``NaN`` where the energy is not known.
    """
    out = pd.DataFrame(index=rows.index)
    for kind in _kinds(fp):
        unit = "carbon_g" if kind == "carbon" else "cost"
        for per, column in _ENERGY.items():
            out[f"{unit}_per_{per}"] = [_value(fp, kind, v) for v in rows[column]]
    return out[[c for c in FOOTPRINT_COLUMNS if c in out.columns]]


def with_footprint(summary: pd.DataFrame, rows: pd.DataFrame, fp: Footprint | None) -> pd.DataFrame:
    """``summary.csv``'s table with the footprint's figures and settings, unchanged without one.

    Args:
        summary: :func:`mlenergy.studies.measured.summary_table` of ``rows``.
        rows: The study's rows, in any order (matched on model, GPU and task).
        fp: The footprint settings, or ``None``.
    """
    if fp is None:
        return summary
    keys = ["model_id", "gpu", "task"]
    figures = pd.concat([rows[keys], footprint_frame(rows, fp)], axis=1)
    merged = summary.merge(figures, on=keys, how="left", validate="one_to_one")
    for name, value in fp.describe().items():
        merged[name] = value
    return merged


def intensity_tag(fp: Footprint) -> str:
    """Short label of the intensity for a column header (``FRA 2023``, ``custom``)."""
    if fp.intensity is None:
        return ""
    year = f" {fp.intensity.year}" if fp.intensity.year is not None else ""
    return f"{fp.intensity.region}{year}"


def footprint_headers(fp: Footprint) -> list[str]:
    """Column headers of :func:`footprint_cells`, each naming its intensity or price."""
    pue = f", PUE {fp.pue:g}" if fp.pue != 1.0 else ""
    out = []
    for kind in _kinds(fp):
        for per in ("response", "correct"):
            if kind == "carbon":
                out.append(f"gCO2e/{per} ({intensity_tag(fp)}{pue})")
            else:
                out.append(f"cost/{per} (at {fp.price_per_kwh:g}/kWh{pue})")
    return out


def footprint_cells(row: pd.Series, fp: Footprint) -> list[str]:
    """The formatted figures of one study row, in :func:`footprint_headers`' order."""
    out = []
    for kind in _kinds(fp):
        for per in ("response", "correct"):
            value = _value(fp, kind, row[_ENERGY[per]])
            out.append("" if not math.isfinite(value) else f"{value:.3g}")
    return out


def footprint_note(fp: Footprint) -> str:
    """The sentence the report shows above its tables: what carbon and cost rest on."""
    return (
        "Carbon and cost are derived at view time from the measured energy (never stored): "
        f"{fp.basis()}. They cover the measured GPU energy only, times the PUE."
    )


def headline_text(rows: pd.DataFrame, fp: Footprint) -> str:
    """The headline table as aligned text: joules, carbon and cost per response and correct answer.

    Args:
        rows: The study's rows.
        fp: The footprint settings.
    """
    header = ["model", "GPU", "task", "J/response", "J/correct", *footprint_headers(fp)]
    table = [header]
    for _, r in rows.sort_values(["task", "gpu", "model_id"]).iterrows():
        joules = [r["energy_per_response_j"], r["energy_per_correct_j"]]
        table.append(
            [
                str(r["model_id"]).split("/")[-1], str(r["gpu"]), str(r["task"]),
                *["" if not math.isfinite(float(j)) else f"{float(j):.4g}" for j in joules],
                *footprint_cells(r, fp),
            ]
        )  # fmt: skip
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in table]
    return "\n".join(
        ["Headline: energy (measured), carbon and cost (derived) per response and per correct "
         "answer", *(line.rstrip() for line in lines), footprint_note(fp)]
    )  # fmt: skip
