"""The most tokens per second under a site power cap and a latency deadline.

A candidate configuration serves ``replicas = floor(budget / replica peak site power)`` copies.
A replica's IT power is its average GPU power (W, all its GPUs) plus the host share
(``host_w_per_gpu x num_gpus``); PUE multiplies all of it (cooling and conversion serve the hosts
as well as the GPUs). The budget is checked against the replica's *peak* site power,
``(peak_factor x GPU power + host share) x PUE``: ``peak_factor`` (>= 1) reserves headroom above
the measured average GPU power, which is what the GPUs draw over a run, not at their peaks. Its
site throughput is ``replicas x throughput``. Only candidates whose median inter-token latency is
within the deadline count. Objectives: most site tokens per second (default) or fewest site joules
per token (average site power / site tokens per second, PUE and host power included).

>>> from mlenergy.optimize.power_cap import plan_power_cap
>>> result = plan_power_cap(100_000, "Qwen/Qwen3-30B-A3B-Instruct-2507", "lm-arena-chat",
...                         itl_limit_ms=50, sources="all")  # doctest: +SKIP
>>> result.table.head()  # ranked, with source labels  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlenergy.errors import UserError
from mlenergy.footprint import per_token_figures
from mlenergy.optimize.candidates import (
    CANDIDATE_COLUMNS,
    CONFIG_KEY,
    estimated_candidates,
    reference_candidates,
    store_candidates,
)
from mlenergy.optimize.site import SITE_HOST_W_PER_GPU, SITE_PUE, SiteParams
from mlenergy.records.metrics import DEFAULT_ITL_LIMIT_MS, meets_deadline
from mlenergy.reference.measurements import load_reference

SOURCES = ("measured", "estimated", "all")
OBJECTIVES = ("throughput", "energy-per-token")
DEFAULT_GPUS = ("H100-SXM5-80GB", "B200")
DEFAULT_PRECISIONS = ("bfloat16", "fp8", "nvfp4")
BEST_KEYS = (
    "gpu",
    "num_gpus",
    "tensor_parallel",
    "expert_parallel",
    "data_parallel",
    "max_num_seqs",
    "precision",
    "power_limit_w",
    "replicas",
    "site_tokens_per_s",
    "site_power_w",
    "site_peak_power_w",
    "energy_per_token_j",
    "gpu_energy_per_token_j",
    "median_itl_ms",
    "throughput_tokens_per_s",
    "avg_power_w",
    "source",
)


@dataclass(frozen=True)
class PowerCapResult:
    """The ranked table and the best configuration.

    Attributes:
        table: Every candidate within the deadline with at least one replica, best first
            (columns of :data:`CANDIDATE_COLUMNS` plus replicas and site figures).
        candidates: Every candidate considered, with site figures and ``within_deadline``.
        site: The site parameters.
        objective: ``throughput`` or ``energy-per-token``.
        itl_limit_ms: The deadline (median ITL, ms).
    """

    table: pd.DataFrame
    candidates: pd.DataFrame
    site: SiteParams
    objective: str
    itl_limit_ms: float

    @property
    def best(self) -> dict[str, Any]:
        """The best configuration (the keys of :data:`BEST_KEYS`)."""
        return _row(self.table.iloc[0])

    def cost_per_million_tokens(self) -> float | None:
        """Site energy cost of one million tokens at the best configuration (price units).

        ``None`` when no price was given.
        """
        if self.site.price_kwh is None:
            return None
        site_j = self.best["energy_per_token_j"]  # PUE and host power included already
        return per_token_figures(site_j, None, self.site.price_kwh)["cost_per_m_tokens"]

    def to_json(self, runners_up: int = 5) -> dict[str, Any]:
        """``best``, ``runners_up``, ``energy_cost_per_million_tokens`` and the inputs."""
        return {
            "best": self.best,
            "runners_up": [_row(r) for _, r in self.table.iloc[1 : 1 + runners_up].iterrows()],
            "energy_cost_per_million_tokens": self.cost_per_million_tokens(),
            "price_kwh": self.site.price_kwh,
            "budget_w": self.site.budget_w,
            "pue": self.site.pue,
            "host_w_per_gpu": self.site.host_w_per_gpu,
            "peak_factor": self.site.peak_factor,
            "itl_limit_ms": self.itl_limit_ms,
            "objective": self.objective,
            "candidates": len(self.candidates),
            "candidates_within_deadline": int(self.candidates["within_deadline"].sum()),
        }


def _row(r: pd.Series) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in BEST_KEYS:
        v = r[k]
        if isinstance(v, np.integer):
            v = int(v)
        elif isinstance(v, np.floating):
            v = float(v)
        if isinstance(v, float) and math.isnan(v):
            v = None
        out[k] = v
    return out


def site_figures(candidates: pd.DataFrame, site: SiteParams) -> pd.DataFrame:
    """Add the site columns to a candidate frame.

    Adds ``replica_site_w`` (average) and ``replica_peak_site_w``, ``replicas`` (as many as the
    budget holds at peak power), ``site_tokens_per_s``, ``site_power_w`` (average),
    ``site_peak_power_w`` (never above the budget) and ``energy_per_token_j`` (site J per token;
    the candidate's own is ``gpu_energy_per_token_j``).
    """
    df = candidates.copy()
    df["gpu_energy_per_token_j"] = df["energy_per_token_j"].astype(float)
    gpu_w = df["avg_power_w"].astype(float)
    num_gpus = df["num_gpus"].astype(float)
    per_replica = site.replica_site_w(gpu_w, num_gpus)
    peak_replica = site.replica_site_w(gpu_w, num_gpus, peak=True)
    df["replica_site_w"] = per_replica
    df["replica_peak_site_w"] = peak_replica
    df["replicas"] = np.floor(site.budget_w / peak_replica).astype(int)
    df["site_tokens_per_s"] = df["replicas"] * df["throughput_tokens_per_s"].astype(float)
    df["site_power_w"] = df["replicas"] * per_replica
    df["site_peak_power_w"] = df["replicas"] * peak_replica
    with np.errstate(divide="ignore", invalid="ignore"):
        df["energy_per_token_j"] = per_replica / df["throughput_tokens_per_s"].astype(float)
    return df


def rank(df: pd.DataFrame, objective: str) -> pd.DataFrame:
    """Sort best first: most site tokens/s (ties: fewer J/token) or fewest site J/token."""
    if objective == "throughput":
        keys, asc = ["site_tokens_per_s", "energy_per_token_j"], [False, True]
    else:
        keys, asc = ["energy_per_token_j", "site_tokens_per_s"], [True, False]
    return df.sort_values(keys, ascending=asc, kind="stable").reset_index(drop=True)


def _not_stored(reference: pd.DataFrame, stored: pd.DataFrame) -> pd.DataFrame:
    """The reference rows whose measurement is not already in the store.

    A store that an older mlenergy seeded with the reference (``leaderboard import-reference``,
    now a no-op) holds the same measurements as the reference tables; each is kept once, as the
    stored run (its source names the run id). A reference row is the stored one when its
    configuration matches and its throughput agrees within 0.1%.
    """
    if reference.empty or stored.empty:
        return reference
    merged = reference.reset_index().merge(
        stored[[*CONFIG_KEY, "throughput_tokens_per_s"]],
        on=list(CONFIG_KEY),
        how="left",
        suffixes=("", "_stored"),
    )
    close = (
        merged["throughput_tokens_per_s"] - merged["throughput_tokens_per_s_stored"]
    ).abs() <= 1e-3 * merged["throughput_tokens_per_s"].abs()
    duplicate = set(merged.loc[close, "index"])
    return reference[~reference.index.isin(duplicate)]


def gather_candidates(
    model: str,
    task: str,
    sources: str = "measured",
    reference: str | Path | None = None,
    data_dir: str | Path | None = None,
    gpus: list[str] | None = None,
    precisions: list[str] | None = None,
    power_limits: list[float | None] | None = None,
) -> pd.DataFrame:
    """Measured candidates (store and reference) and, unless ``measured``, estimated ones.

    Raises:
        UserError: Unknown ``sources``, or no measurement and no estimate possible.
    """
    if sources not in SOURCES:
        raise UserError(f"--sources {sources!r} is unknown", f"Use one of {', '.join(SOURCES)}")
    stored = store_candidates(model, task, data_dir)
    frames = [stored]
    try:
        frames.append(_not_stored(reference_candidates(model, task, reference), stored))
    except UserError:
        if reference is not None:
            raise
    measured = pd.concat([f for f in frames if not f.empty] or [frames[0]], ignore_index=True)
    if sources == "estimated":
        measured_for_dedup = measured
        measured = pd.DataFrame(columns=CANDIDATE_COLUMNS)
    else:
        measured_for_dedup = measured
    if sources == "measured":
        if measured.empty:
            raise UserError(
                f"no measurement of model {model!r} on task {task!r}",
                "Use --sources all to add estimates, or check the model id and task",
            )
        return measured
    est = estimated_candidates(
        model,
        task,
        list(gpus or DEFAULT_GPUS),
        list(precisions or DEFAULT_PRECISIONS),
        power_limits or [None],
        measured_for_dedup,
        reference,
    )
    out = pd.concat([f for f in (measured, est) if not f.empty], ignore_index=True)
    return out


def plan_power_cap(
    budget_w: float,
    model: str,
    task: str,
    itl_limit_ms: float = DEFAULT_ITL_LIMIT_MS,
    candidates: pd.DataFrame | None = None,
    sources: str = "measured",
    objective: str = "throughput",
    pue: float = SITE_PUE,
    host_w_per_gpu: float = SITE_HOST_W_PER_GPU,
    price_kwh: float | None = None,
    reference: str | Path | None = None,
    data_dir: str | Path | None = None,
    gpus: list[str] | None = None,
    precisions: list[str] | None = None,
    power_limits: list[float | None] | None = None,
    peak_factor: float = 1.0,
) -> PowerCapResult:
    """The best serving configuration for a site power budget and a latency deadline.

    Args:
        budget_w: Site power budget (W).
        model: Model id.
        task: Workload (``lm-arena-chat``...).
        itl_limit_ms: Deadline on the median inter-token latency (ms; default
            :data:`~mlenergy.records.metrics.DEFAULT_ITL_LIMIT_MS`).
        candidates: A candidate frame (columns of :data:`CANDIDATE_COLUMNS`); default:
            gathered from the store, the reference runs and, per ``sources``, the estimator.
        sources: ``measured``, ``estimated`` or ``all``.
        objective: ``throughput`` (site tokens/s) or ``energy-per-token`` (site J/token).
        pue: Power usage effectiveness of the site (>= 1).
        host_w_per_gpu: Host (CPU, memory, network) power per GPU (W).
        price_kwh: Electricity price per kWh (``None``: show no cost).
        reference: Reference folder (default: found next to the repository).
        data_dir: Store folder.
        gpus: GPUs to estimate for.
        precisions: Weight precisions to estimate for.
        power_limits: Per-GPU power limits to estimate for (None: TDP).
        peak_factor: Peak GPU power over average GPU power (>= 1) the budget must hold.

    Raises:
        UserError: Bad parameters, no candidate, none within the deadline, or a budget below
            one replica's power.
    """
    site = SiteParams(budget_w, pue, host_w_per_gpu, price_kwh, peak_factor)
    site.check()
    if objective not in OBJECTIVES:
        raise UserError(
            f"--objective {objective!r} is unknown", f"Use one of {', '.join(OBJECTIVES)}"
        )
    if not itl_limit_ms > 0:
        raise UserError(f"--itl-limit-ms is {itl_limit_ms}; it must be > 0", "Pass e.g. 50")
    if candidates is None:
        candidates = gather_candidates(
            model, task, sources, reference, data_dir, gpus, precisions, power_limits
        )
    missing = [c for c in CANDIDATE_COLUMNS if c not in candidates.columns]
    if missing:
        raise UserError(f"candidate table lacks column(s) {', '.join(missing)}", "Add them")
    df = site_figures(candidates, site)
    df["within_deadline"] = meets_deadline(df["median_itl_ms"], itl_limit_ms)
    fast = df[df["within_deadline"]]
    if fast.empty:
        best_itl = float(df["median_itl_ms"].min())
        raise UserError(
            f"no candidate meets --itl-limit-ms {itl_limit_ms:g} (fastest: {best_itl:.1f} ms)",
            "Relax the deadline or add --sources all",
        )
    fits = fast[fast["replicas"] >= 1]
    if fits.empty:
        smallest = float(fast["replica_peak_site_w"].min())
        raise UserError(
            f"--budget-w {budget_w:g} is below one replica's power ({smallest:.0f} W with PUE, "
            "host power and peak factor)",
            "Raise the budget",
        )
    ranked = rank(fits, objective)
    # A power limit above what the configuration draws changes nothing: keep the lowest one.
    same = [c for c in ranked.columns if c not in ("power_limit_w", "within_deadline")]
    ranked = ranked.sort_values("power_limit_w", kind="stable").drop_duplicates(subset=same)
    return PowerCapResult(rank(ranked, objective), df, site, objective, itl_limit_ms)


def _cost_line(result: PowerCapResult) -> str:
    """``  energy cost X per million tokens at P/kWh; `` when a price was given, else ``  ``."""
    cost = result.cost_per_million_tokens()
    if cost is None:
        return "  "
    return f"  energy cost {cost:.4f} per million tokens at {result.site.price_kwh:g}/kWh; "


def summary_lines(result: PowerCapResult, runners_up: int = 5) -> list[str]:
    """One screen: the best configuration, its site figures, the runners-up."""
    b = result.best
    pl = f"{b['power_limit_w']:.0f} W" if b["power_limit_w"] else "default"
    lines = [
        f"best under {result.site.budget_w:,.0f} W (PUE {result.site.pue} on GPUs and hosts, host "
        f"{result.site.host_w_per_gpu:g} W/GPU, peak factor {result.site.peak_factor:g}), "
        f"median ITL <= {result.itl_limit_ms:g} ms:",
        f"  {b['replicas']} x {b['gpu']} x{b['num_gpus']} (TP{b['tensor_parallel']} "
        f"EP{b['expert_parallel']} DP{b['data_parallel']}), {b['precision']}, max_num_seqs "
        f"{b['max_num_seqs']}, power limit {pl}",
        f"  {b['site_tokens_per_s']:,.0f} tokens/s at {b['site_power_w']:,.0f} W average "
        f"({b['site_peak_power_w']:,.0f} W at peak), "
        f"{b['energy_per_token_j']:.3f} J/token (site), ITL {b['median_itl_ms']:.1f} ms",
        _cost_line(result) + f"source {b['source']}",
        f"runners-up ({len(result.table) - 1} more within the deadline):",
    ]
    for _, r in result.table.iloc[1 : 1 + runners_up].iterrows():
        lines.append(
            f"  {int(r['replicas'])} x {r['gpu']} x{int(r['num_gpus'])} "
            f"TP{int(r['tensor_parallel'])} EP{int(r['expert_parallel'])} {r['precision']} "
            f"seqs {int(r['max_num_seqs'])} PL {r['power_limit_w']:.0f} W: "
            f"{r['site_tokens_per_s']:,.0f} tok/s, {r['energy_per_token_j']:.3f} J/tok, "
            f"ITL {r['median_itl_ms']:.1f} ms [{r['source']}]"
        )
    return lines


@dataclass(frozen=True)
class BestPerModel:
    """The best configuration of each model, and the models that fit nothing.

    Attributes:
        table: ``model_id`` plus the :data:`BEST_KEYS` columns, one row per model, most site
            tokens per second first (ties keep the models' order).
        left_out: ``(model_id, reason)`` for each model with no configuration within the
            deadline and the budget (the planner's reason, e.g. the fastest median ITL).
    """

    table: pd.DataFrame
    left_out: tuple[tuple[str, str], ...]


def best_per_model(
    budget_w: float,
    task: str,
    itl_limit_ms: float,
    models: list[str] | None = None,
    sources: str = "measured",
    reference: str | Path | None = None,
    data_dir: str | Path | None = None,
    candidates: Mapping[str, pd.DataFrame] | None = None,
    **site: Any,
) -> BestPerModel:
    """The best configuration of every model for one budget and deadline (one row per model).

    The one rule of the best configuration per model, shared by the library and the
    leaderboard's Power budget view: :func:`plan_power_cap` once per model.

    Args:
        budget_w: Site power budget (W).
        task: Workload.
        itl_limit_ms: Median-ITL deadline (ms).
        models: Model ids (default: the models of ``candidates``, else every model the
            reference runs measured on ``task``).
        sources: As :func:`plan_power_cap`.
        reference: Reference folder.
        data_dir: Store folder.
        candidates: Each model's candidate table (columns of :data:`CANDIDATE_COLUMNS`),
            instead of gathering them from the store and the reference.
        **site: ``pue``, ``host_w_per_gpu``, ``price_kwh``, ``objective``, ``gpus``...

    Returns:
        The table and the models left out, each with the planner's reason.
    """
    if models is None and candidates is not None:
        models = list(candidates)
    elif models is None:
        ref = load_reference(reference, include_v2=True)
        models = sorted(ref.loc[ref["task"] == task, "model_id"].unique())
    rows, left_out = [], []
    for model in models:
        given = None if candidates is None else candidates.get(model)
        try:
            if candidates is not None and given is None:
                raise UserError(f"no candidate configuration of {model!r}")
            result = plan_power_cap(
                budget_w,
                model,
                task,
                itl_limit_ms,
                candidates=given,
                sources=sources,
                reference=reference,
                data_dir=data_dir,
                **site,
            )
        except UserError as exc:
            left_out.append((model, exc.problem))
            continue
        rows.append({"model_id": model, **result.best})
    table = pd.DataFrame(rows, columns=["model_id", *BEST_KEYS])
    table = table.sort_values("site_tokens_per_s", ascending=False, kind="stable")
    return BestPerModel(table.reset_index(drop=True), tuple(left_out))
