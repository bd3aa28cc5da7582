"""The serving benchmark's table: one row per level, as ``mlenergy bench --endpoint`` shows it.

Energy per token in millijoules, latencies in milliseconds, the energy of one request in joules
at its 50th, 90th and 99th percentiles (``withheld`` when the split's samples disagree with the
counter, ``serving.split_withheld`` saying why). The engine is what the run detected
(``serving.engine``: the server's own answer, ``--engine``, the launch command or the
server process's command line).
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from mlenergy.records import HOST_BOUND_MARK, RunRecord, interval_basis
from mlenergy.workloads.bench import interval_text

TITLE = "mlenergy bench (serving, steady state; energy per token in millijoules)"
CAPTION = (
    "± 95%: interval of mJ/token between fresh runs (--runs N; one run has none). "
    "J/req: each request's share of the energy (J), p50, p90 and p99. "
    "host-bound: the GPUs sat near idle through the window (docs/measure.md)."
)
COLUMNS = (
    "level",
    "achieved",
    "mJ/token",
    "± 95%",
    "interval",
    "avg W",
    "tok/s",
    "TTFT\np50 ms",
    "TPOT\np50 ms",
    "J/req\np50",
    "J/req\np90",
    "J/req\np99",
    "run\nmJ/token",
    "engine",
    "source",
)
"""Column titles, in order (two lines where the figure is narrower than its name)."""
_WIDTHS: dict[str, dict[str, Any]] = {"engine": {"max_width": 13}, "source": {"min_width": 16}}
"""An engine's version may wrap under its name; an energy source is never cut."""


def _fmt(value: float | None, scale: float = 1.0) -> str:
    return "-" if value is None else f"{value * scale:.4g}"


def source_cell(record: RunRecord) -> str:
    """The energy source, with the host-bound mark when the rule sets it."""
    marked = record.host_bound is not None and record.host_bound.marked
    return f"{record.energy_source}, {HOST_BOUND_MARK}" if marked else record.energy_source


def request_energy_cells(record: RunRecord) -> tuple[str, str, str]:
    """Energy per request at p50, p90 and p99 (J); ``withheld`` or ``-`` without them."""
    s = record.serving
    if s is None or s.request_energy_j is None:
        return ("withheld" if s is not None and s.split_withheld else "-", "-", "-")
    q = s.request_energy_j
    return (_fmt(q.p50), _fmt(q.p90), _fmt(q.p99))


def serving_rows(records: list[RunRecord]) -> list[tuple[str, ...]]:
    """The table's cells, one tuple per record (columns of :data:`COLUMNS`)."""
    rows: list[tuple[str, ...]] = []
    for r in records:
        s, p = r.serving, r.phase("request")
        basis = interval_basis(r)
        rows.append(
            (
                str(r.workload.batch_size),
                _fmt(s.achieved_concurrency if s else None),
                _fmt(p.energy_per_token_j if p else None, 1e3),
                interval_text(p),
                basis.label() if basis is not None else "-",
                _fmt(p.avg_power_w if p else None),
                _fmt(p.throughput_tokens_per_s if p else None),
                _fmt(s.ttft_s.p50 if s and s.ttft_s else None, 1e3),
                _fmt(s.tpot_s.p50 if s and s.tpot_s else None, 1e3),
                *request_energy_cells(r),
                _fmt(s.run_energy_per_token_j if s else None, 1e3),
                (s.engine if s else None) or "-",
                source_cell(r),
            )
        )
    return rows


def serving_table(records: list[RunRecord]) -> Table:
    """A rich table of the levels measured: one row per record.

    With ``--runs N`` the ± 95% column is the interval between the runs (``interval`` says
    so); a level the host-bound rule marks says ``host-bound`` beside its source.
    """
    table = Table(title=TITLE, caption=CAPTION)
    for column in COLUMNS:
        table.add_column(column, overflow="fold", **_WIDTHS.get(column, {}))
    for row in serving_rows(records):
        table.add_row(*row)
    return table
