"""Compact HTML tables of run records for notebooks (``RunRecord._repr_html_``).

Every energy figure shows its unit and its ``energy_source``; a missing figure shows as
``n/a``, never as 0. Imports nothing else of mlenergy outside :mod:`mlenergy.records`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mlenergy.records.host_bound import HOST_BOUND_MARK
from mlenergy.records.interval import interval_basis
from mlenergy.records.metrics import headline_phase

if TYPE_CHECKING:
    from mlenergy.records.run import RunRecord

_STYLE = "border-collapse:collapse;font-size:12px"
_CELL = "border:1px solid #ddd;padding:2px 6px;text-align:right"


def _num(value: float | None, unit: str, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}g} {unit}"


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "") -> str:
    """An escaped HTML table with a header row and an optional caption."""
    head = "".join(f"<th style='{_CELL}'>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td style='{_CELL}'>{html.escape(str(c))}</td>" for c in row) + "</tr>"
        for row in rows
    )
    cap = f"<caption style='text-align:left'>{html.escape(caption)}</caption>" if caption else ""
    return (
        f"<table style='{_STYLE}'>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def run_html(run: RunRecord) -> str:
    """One run: a caption naming model, hardware and source, one row per phase."""
    w = run.workload
    gpu = run.hardware.accelerator_model
    where = f"{run.hardware.accelerator_count} x {gpu}" if gpu else (run.hardware.cpu_model or "")
    caption = (
        f"run {run.run_id}: {run.model.model_id} ({w.kind}, batch {w.batch_size}, "
        f"{w.input_tokens}+{w.output_tokens} tokens) on {where}; energy source "
        f"{run.energy_source}; status {run.status}"
    )
    basis = interval_basis(run)
    if basis is not None:
        caption += f"; 95% intervals {basis.label()}"
    if run.host_bound is not None and run.host_bound.marked:
        caption += f"; {HOST_BOUND_MARK}"
    header = ["phase", "time", "energy", "avg power", "tokens", "energy/token", "throughput"]
    rows = [
        [
            p.phase.value,
            _num(p.duration_s, "s"),
            _num(p.energy_j, "J"),
            _num(p.avg_power_w, "W"),
            str(p.tokens),
            _num(p.energy_per_token_j, "J/token"),
            _num(p.throughput_tokens_per_s, "tokens/s"),
        ]
        for p in run.phases
    ]
    if not rows and run.checkpoints:
        last = run.checkpoints[-1]
        rows = [["train", _num(last.duration_s, "s"), _num(last.energy_j, "J"), "", "", "", ""]]
    return html_table(header, rows, caption)


def runs_html(runs: Sequence[RunRecord]) -> str:
    """Several runs: one row each (the request phase, else the first phase)."""
    header = [
        "run",
        "model",
        "task",
        "batch",
        "hardware",
        "time",
        "energy",
        "energy/token",
        "source",
    ]
    rows = []
    for r in runs:
        p = headline_phase(r) or (r.phases[0] if r.phases else None)
        rows.append(
            [
                r.run_id[:12],
                r.model.model_id,
                r.workload.task or r.workload.kind,
                str(r.workload.batch_size),
                r.hardware.accelerator_model or r.hardware.cpu_model or "",
                _num(p.duration_s if p else None, "s"),
                _num(p.energy_j if p else None, "J"),
                _num(p.energy_per_token_j if p else None, "J/token"),
                r.energy_source,
            ]
        )
    return html_table(header, rows, f"{len(runs)} run record(s)")
