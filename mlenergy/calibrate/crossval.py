"""Grouped cross-validation of the estimator on measurements.

Rows are grouped by architecture (models sharing a text architecture, e.g. ``Qwen3-8B`` and
``Qwen3-VL-8B``, or a model and its FP8 checkpoint, fall in one group), so no model is both in
a fit and in its test fold. The report gives absolute percentage errors (APE) of energy per
token (median and 90th percentile), throughput and average power (medians), by GPU and by
dense / MoE / hybrid.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mlenergy.calibrate.calibration import featurise, fit, fit_weights, host_bound, itl_targets
from mlenergy.errors import UserError
from mlenergy.estimate.coefficients import Coefficients, default_coefficients, interval_class
from mlenergy.estimate.configs import resolve_model
from mlenergy.estimate.features import Features
from mlenergy.estimate.physics import lockstep_replicas, predict
from mlenergy.estimate.prediction import Prediction
from mlenergy.estimate.task_defaults import has_value
from mlenergy.progress import progress_bar
from mlenergy.reference.measurements import model_group

TARGETS = {
    "energy_median": 8.0,
    "energy_p90": 25.0,
    "throughput_median": 10.0,
    "power_median": 8.0,
}
"""Accuracy targets (percent, absolute error) of the overall figures on models left out."""

SIGNED_TARGET = 5.0
"""Largest signed median error (percent) of throughput and of power on every GPU and on
dense and MoE models alike: a bias beyond it is a bias, whatever the absolute figures."""

HELD_OUT_GPU_TARGET = 12.0
"""Largest energy-per-token median error (percent) on a GPU left out of the fit entirely
(``--hold-out gpu``)."""


@dataclass(frozen=True)
class TargetCheck:
    """One accuracy target and how the cross-validation fares against it.

    Attributes:
        name: What is checked, e.g. ``energy_median`` or ``throughput_signed[gpu=B200]``.
        value: The figure, in percent (signed for a bias check).
        limit: The target, in percent: ``|value| <= limit`` for a bias, ``value <= limit``
            for an absolute error.
        met: Whether the figure meets the target.
    """

    name: str
    value: float
    limit: float
    met: bool

    def describe(self) -> str:
        """``name value (target): yes|NO`` for reports."""
        if "signed" in self.name:
            figure, bound = f"{self.value:+.1f}%", f"within +/-{self.limit:g}"
        else:
            figure, bound = f"{self.value:.1f}%", f"<= {self.limit:g}"
        return f"{self.name} {figure} ({bound}): {'yes' if self.met else 'NO'}"


@dataclass(frozen=True)
class EnergyTail:
    """The rows behind the energy p90: how many are over its target and which kinds.

    Attributes:
        threshold: The p90 target, in percent.
        over: Rows whose energy per token is off by more than ``threshold``.
        allowed: The most rows a p90 within ``threshold`` allows (a tenth of all rows).
        stalled: Of ``over``, rows whose runs stalled beyond what the inputs say: matched
            by the host-bound rule, or data-parallel attention with expert parallelism.
    """

    threshold: float
    over: int
    allowed: int
    stalled: int

    def describe(self) -> str:
        """One line for reports."""
        return (
            f"energy tail: {self.over} rows over {self.threshold:g}% (a p90 of "
            f"{self.threshold:g}% allows {self.allowed}); {self.stalled} of them host-bound or "
            "data-parallel attention with expert parallelism"
        )


def architecture_group(config_id: str, configs_dir: str | Path | None = None) -> str:
    """A key shared by models with the same text architecture (variants, FP8, VL twins)."""
    try:
        spec, _ = resolve_model(config_id, configs_dir)
    except Exception:
        return config_id
    return (
        f"{spec.hidden_size}x{spec.num_layers}x{spec.num_heads}x{spec.num_experts or 0}"
        f"x{spec.intermediate_size}x{spec.moe_intermediate_size or 0}"
    )


def model_family(model_group: str) -> str:
    """The model line a cross-validation group belongs to: the first word of its name.

    ``qwen3-235b-a22b`` and ``qwen3-vl-8b`` are ``qwen3``; ``llama-3.1-70b`` and
    ``llama-4-scout-17b-16e`` are ``llama``; ``gpt-oss-120b`` is ``gpt``. Leaving a family out
    removes every size, generation, checkpoint format and multimodal twin of a vendor's line
    from the fit, so a cost term fitted on one family must predict another.
    """
    return model_group.split("-")[0].lower()


def family_folds(rows: pd.DataFrame) -> pd.Series:
    """A fold key per row: its model family, families sharing an architecture merged.

    Two families whose models share a text architecture (e.g. ``codellama-70b`` and
    ``llama-3.1-70b``) fall in one key, so that no architecture is in both fit and test.

    Args:
        rows: Rows with ``arch_group`` and ``model_group`` (else ``config_id``).
    """
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    groups = rows["model_group"] if "model_group" in rows else rows["config_id"].map(model_group)
    fam = groups.astype(str).map(model_family)
    for _, members in fam.groupby(rows["arch_group"]):
        first = root(members.iloc[0])
        for other in members.unique():
            parent[root(other)] = first
    keys = {f: root(f) for f in fam.unique()}
    return fam.map(lambda f: "+".join(sorted(g for g in keys if keys[g] == keys[f])))


HOLD_OUT = ("architecture", "family", "gpu")
"""What a cross-validation fold may hold out (``validate --hold-out``)."""


@dataclass
class CrossValidation:
    """Out-of-fold predictions and their summary.

    Attributes:
        rows: One row per measurement with ``pred_*`` columns and ``ape_*`` (percent;
            ``ape_itl``: measured median inter-token latency vs the predicted median step,
            where measured), and ``host_bound`` (the configuration matches
            the host-bound rule of the shipped coefficients, :mod:`~mlenergy.estimate.host_bound`).
        folds: Number of folds.
    """

    rows: pd.DataFrame
    folds: int

    def summary(self, by: str | list[str] | None = None) -> pd.DataFrame:
        """Error figures of the out-of-fold predictions, overall or by group (percent).

        Columns: ``energy_median`` / ``energy_p90`` (absolute error of energy per token),
        ``throughput_median`` and ``power_median`` (absolute), ``throughput_signed`` and
        ``power_signed`` (median of ``predicted / measured - 1``: above 0 is over-prediction,
        so a bias shows instead of averaging away) and ``interval_coverage`` (share of rows
        whose measured energy per token lies inside the shipped 90% interval around the
        out-of-fold prediction).

        Args:
            by: Column(s) to group by (e.g. ``"gpu"``, ``"kind"``, ``"model_group"``), or
                ``None`` for one overall row.
        """
        df = self.rows
        keys = [by] if isinstance(by, str) else list(by or [])

        def agg(d: pd.DataFrame) -> pd.Series:
            return pd.Series(
                {
                    "n": len(d),
                    "energy_median": d["ape_energy"].median(),
                    "energy_p90": d["ape_energy"].quantile(0.9),
                    "throughput_median": d["ape_throughput"].median(),
                    "power_median": d["ape_power"].median(),
                    "throughput_signed": d["signed_throughput"].median(),
                    "power_signed": d["signed_power"].median(),
                    "interval_coverage": 100.0 * d["in_interval"].mean(),
                }
            )

        if not keys:
            return agg(df).to_frame("all").T
        # pandas-stubs' apply takes no include_groups (pandas 2.2 needs it to stay quiet)
        return df.groupby(keys).apply(agg, include_groups=False)  # type: ignore[call-overload]

    def meets_targets(self) -> dict[str, bool]:
        """Whether the overall figures meet :data:`TARGETS`."""
        s = self.summary().iloc[0]
        return {k: bool(s[k] <= v) for k, v in TARGETS.items()}

    def stalled(self) -> np.ndarray:
        """Rows whose runs stalled beyond what their inputs say (a boolean mask).

        They match the host-bound rule, or run data-parallel attention with expert
        parallelism (:func:`~mlenergy.estimate.physics.lockstep_replicas`), whose measured
        steps carry host stalls the physics does not model.
        """
        r = self.rows
        lockstep = lockstep_replicas(
            r["expert_parallel"].to_numpy(float), r["data_parallel"].to_numpy(float)
        )
        return r["host_bound"].to_numpy(bool) | lockstep

    def without_stalled(self) -> CrossValidation:
        """The same out-of-fold predictions on the rows that did not stall (:meth:`stalled`)."""
        keep = ~self.stalled()
        return CrossValidation(rows=self.rows[keep].reset_index(drop=True), folds=self.folds)

    def energy_tail(self) -> EnergyTail:
        """How many rows the energy p90 target leaves out, and how many of them stalled."""
        r = self.rows
        over = r["ape_energy"].to_numpy(float) > TARGETS["energy_p90"]
        stalled = self.stalled()
        return EnergyTail(
            threshold=TARGETS["energy_p90"],
            over=int(over.sum()),
            allowed=int(len(r) // 10),
            stalled=int((over & stalled).sum()),
        )

    def target_checks(self, held_out_gpu: bool = False) -> list[TargetCheck]:
        """Every accuracy target the figures are held to, each with its figure.

        The overall absolute errors against :data:`TARGETS`; the signed median errors of
        throughput and power on every GPU and on dense and MoE models against
        :data:`SIGNED_TARGET`; with ``held_out_gpu`` (folds that hold out a GPU) the energy
        median of every GPU against :data:`HELD_OUT_GPU_TARGET`.

        Args:
            held_out_gpu: The folds held out whole GPUs (``group_by="gpu"``).
        """
        s = self.summary().iloc[0]
        checks = [TargetCheck(k, float(s[k]), v, bool(s[k] <= v)) for k, v in TARGETS.items()]
        groups = [("gpu", g) for g in sorted(self.rows["gpu"].unique())]
        groups += [("kind", k) for k in ("dense", "moe") if (self.rows["kind"] == k).any()]
        for col, key in groups:
            part = self.summary(col).loc[key]
            for half in ("throughput_signed", "power_signed"):
                v = float(part[half])
                checks.append(
                    TargetCheck(f"{half}[{col}={key}]", v, SIGNED_TARGET, abs(v) <= SIGNED_TARGET)
                )
        if held_out_gpu:
            for gpu, row in self.summary("gpu").iterrows():
                v = float(row["energy_median"])
                checks.append(
                    TargetCheck(
                        f"energy_median[held-out gpu={gpu}]",
                        v,
                        HELD_OUT_GPU_TARGET,
                        v <= HELD_OUT_GPU_TARGET,
                    )
                )
        return checks


def _ape(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return 100.0 * np.abs(pred / meas - 1.0)


def _signed(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return 100.0 * (pred / meas - 1.0)


def in_interval(rows: pd.DataFrame, coef: Coefficients, unseen_gpu: bool) -> np.ndarray:
    """Whether each row's measured energy per token lies in the 90% interval of its prediction.

    The interval is the shipped one (:meth:`Coefficients.interval_logs`, the host-bound
    rows' own where they have one) around ``pred_energy_per_token_j``, widened by
    ``unseen_gpu_widen`` when the row's GPU was held out of the fit.

    Args:
        rows: Rows with ``pred_energy_per_token_j``, ``energy_per_token_j`` and
            ``host_bound``.
        coef: The coefficients whose interval is checked.
        unseen_gpu: The rows' GPU was absent from the fit that predicted them.
    """
    widen = coef.unseen_gpu_widen if unseen_gpu else 1.0
    host = rows["host_bound"].to_numpy(bool)
    kinds = rows["kind"] if "kind" in rows else [""] * len(rows)
    # A GPU held out of the fit has no class interval of its own: the common one, widened.
    keys = [
        None if unseen_gpu else interval_class(str(g), str(k))
        for g, k in zip(rows["gpu"], kinds, strict=True)
    ]
    bounds = np.array([coef.interval_logs(bool(h), k) for h, k in zip(host, keys, strict=True)])
    lo, hi = bounds[:, 0] * widen, bounds[:, 1] * widen
    log_ratio = np.log(
        rows["energy_per_token_j"].to_numpy(float) / rows["pred_energy_per_token_j"].to_numpy(float)
    )
    return (log_ratio >= lo) & (log_ratio <= hi)


_PREDICTED = {
    "e": "energy_per_token_j",
    "t": "throughput_tokens_per_s",
    "p": "avg_power_w",
    "i": "median_step_s",
}
"""Out-of-fold prediction columns (short key: the prediction's name)."""


def _fold_prediction(
    feat: Features,
    rows: pd.DataFrame,
    train: np.ndarray,
    test: np.ndarray,
    start: Coefficients,
    weights: np.ndarray | None,
    itl: np.ndarray | None,
    tasks: np.ndarray,
    fit_tasks: bool,
) -> Prediction:
    """Fit on the ``train`` rows from ``start`` and predict the ``test`` rows."""
    coef = fit(
        feat.rows(train),
        rows.loc[train, "throughput_tokens_per_s"].to_numpy(float),
        rows.loc[train, "avg_power_w"].to_numpy(float),
        start=start,
        weights=weights[train] if weights is not None else None,
        tasks=tasks[train] if fit_tasks else None,
        itl=itl[train] if itl is not None else None,
    )
    test_feat = feat.rows(test)
    if fit_tasks:
        lengths = np.array([coef.task_input_tokens.get(t, np.nan) for t in tasks[test]])
        in_tok = np.where(np.isnan(lengths), test_feat.input_tokens, lengths)
        test_feat = test_feat.replace(input_tokens=in_tok)
    return predict(test_feat, coef)


def cross_validate(
    df: pd.DataFrame,
    folds: int | None = None,
    configs_dir: str | Path | None = None,
    start: Coefficients | None = None,
    fit_tasks: bool = False,
    group_by: str = "architecture",
    show_progress: bool = False,
) -> CrossValidation:
    """Leave-group-out cross-validation (groups: architectures).

    Args:
        df: Measurement frame (see :func:`~mlenergy.reference.measurements.load_reference`).
        folds: Number of folds (default: one per group, i.e. leave-one-architecture-out).
        configs_dir: Folder of model configs.
        start: Starting coefficients of each fit (default: the code defaults,
            ``Coefficients()``, the start of the shipped fit; never the shipped coefficients,
            which were fitted on the held-out rows too).
        fit_tasks: Also fit task prompt lengths inside each fold (only from training rows).
        group_by: ``architecture`` (no model in both fit and test), ``family`` (no model
            line in both: :func:`model_family`, families sharing an architecture merged) or
            ``gpu`` (no GPU in both: the held-out GPU is predicted from its datasheet
            figures alone).
        show_progress: Draw a progress bar on standard error, one step per fold: a
            leave-one-out run takes minutes.

    Returns:
        Out-of-fold predictions for every row that could be prepared.
    """
    if group_by not in HOLD_OUT:
        raise UserError(f"unknown hold-out '{group_by}'", f"Use one of {', '.join(HOLD_OUT)}")
    feat, keep = featurise(df, configs_dir)
    rows = df.iloc[keep].reset_index(drop=True)
    rows["arch_group"] = rows["config_id"].map(lambda m: architecture_group(m, configs_dir))
    # Inputs only (GPU, GPU count, task): configurations whose reference runs were often
    # host-bound (see :mod:`~mlenergy.estimate.host_bound`), reported apart by ``validate``.
    rows["host_bound"] = host_bound(rows)
    rows["family"] = family_folds(rows)
    key = {"gpu": "gpu", "family": "family"}.get(group_by, "arch_group")
    groups = sorted(rows[key].unique())
    if folds is not None and folds < 2:
        raise UserError(f"folds must be >= 2, got {folds}", "Give 2 or more folds")
    n_folds = len(groups) if folds is None else min(folds, len(groups))
    rng = np.random.default_rng(0)
    order = rng.permutation(len(groups))
    fold_of = {groups[g]: i % n_folds for i, g in enumerate(order)}
    fold = rows[key].map(fold_of).to_numpy()
    # Each fold starts from the code defaults, as the shipped fit does (calibrate_all). The
    # shipped coefficients would leak the held-out rows: the fit has flat directions, and a
    # fold started at the all-row optimum stays near it along them.
    base = start or Coefficients()
    explicit = rows["input_tokens"].map(has_value) if "input_tokens" in rows else None
    tasks_all = rows["task"].fillna("").astype(str).to_numpy()
    if explicit is not None:
        tasks_all = np.where(explicit, "", tasks_all)
    weights = fit_weights(rows)
    itl = itl_targets(rows)
    out = {k: np.full(len(rows), np.nan) for k in ("e", "t", "p", "i")}
    start_coef = base.replace(task_input_tokens={}, calibrated_gpus=())
    with progress_bar(
        n_folds, f"cross-validating ({group_by} held out)", unit="fold", enabled=show_progress
    ) as bar:
        for k in range(n_folds):
            train, test = fold != k, fold == k
            if test.any() and train.any():
                pred = _fold_prediction(
                    feat, rows, train, test, start_coef, weights, itl, tasks_all, fit_tasks
                )
                for short, name in _PREDICTED.items():
                    out[short][test] = getattr(pred, name)
            bar.advance()
    rows["pred_energy_per_token_j"] = out["e"]
    rows["pred_throughput_tokens_per_s"] = out["t"]
    rows["pred_avg_power_w"] = out["p"]
    rows["ape_energy"] = _ape(out["e"], rows["energy_per_token_j"].to_numpy(float))
    rows["ape_throughput"] = _ape(out["t"], rows["throughput_tokens_per_s"].to_numpy(float))
    rows["ape_power"] = _ape(out["p"], rows["avg_power_w"].to_numpy(float))
    rows["signed_throughput"] = _signed(out["t"], rows["throughput_tokens_per_s"].to_numpy(float))
    rows["signed_power"] = _signed(out["p"], rows["avg_power_w"].to_numpy(float))
    rows["in_interval"] = in_interval(rows, default_coefficients(), unseen_gpu=group_by == "gpu")
    # Median inter-token latency vs the median step (NaN where not measured: the v2 tables
    # publish a mean time per output token including prefill stalls).
    rows["pred_itl_s"] = out["i"]
    measured_itl = itl_targets(rows)
    if measured_itl is None:
        measured_itl = np.full(len(rows), np.nan)
    rows["ape_itl"] = _ape(out["i"], measured_itl)
    rows["log_ratio_energy"] = np.log(rows["energy_per_token_j"].to_numpy(float) / out["e"])
    return CrossValidation(rows=rows.dropna(subset=["ape_energy"]), folds=n_folds)


def in_sample(df: pd.DataFrame, coef: Coefficients | None = None, configs_dir=None) -> pd.DataFrame:
    """Predictions of fixed coefficients on every row (no refitting), with APE columns."""
    coef = coef or default_coefficients()
    feat, keep = featurise(df, configs_dir)
    rows = df.iloc[keep].reset_index(drop=True)
    pred = predict(feat, coef)
    rows["pred_energy_per_token_j"] = pred.energy_per_token_j
    rows["pred_throughput_tokens_per_s"] = pred.throughput_tokens_per_s
    rows["pred_avg_power_w"] = pred.avg_power_w
    rows["ape_energy"] = _ape(pred.energy_per_token_j, rows["energy_per_token_j"].to_numpy(float))
    rows["ape_throughput"] = _ape(
        pred.throughput_tokens_per_s, rows["throughput_tokens_per_s"].to_numpy(float)
    )
    rows["ape_power"] = _ape(pred.avg_power_w, rows["avg_power_w"].to_numpy(float))
    rows["signed_throughput"] = _signed(
        pred.throughput_tokens_per_s, rows["throughput_tokens_per_s"].to_numpy(float)
    )
    rows["signed_power"] = _signed(pred.avg_power_w, rows["avg_power_w"].to_numpy(float))
    rows["signed_energy"] = _signed(
        pred.energy_per_token_j, rows["energy_per_token_j"].to_numpy(float)
    )
    return rows


GROUP_ALIASES = {"model": "model_group", "architecture": "kind", "dense-moe": "kind"}
"""Names ``validate --group-by`` accepts for the columns of :attr:`CrossValidation.rows`."""


def validation_tables(cv: CrossValidation, group_by: list[str] | None = None) -> dict:
    """The tables ``validate`` reports: overall, by GPU, kind, both, family, engine, rule.

    The host-bound rule's table puts the matched configurations beside the others.

    Args:
        cv: The cross-validation.
        group_by: Extra groupings (``model``, ``gpu``, ``kind``, ``task``, ``source`` or any
            column of ``cv.rows``).

    Returns:
        Table name to frame of :meth:`CrossValidation.summary` figures (percent).

    Raises:
        UserError: An extra grouping names no column.
    """
    tables = {"overall": cv.summary(), "gpu": cv.summary("gpu"), "kind": cv.summary("kind")}
    tables["gpu x kind"] = cv.summary(["gpu", "kind"])
    if "family" in cv.rows:
        tables["family"] = cv.summary("family")
    if "engine" in cv.rows:
        tables["engine"] = cv.summary("engine")
    by_rule = cv.summary("host_bound")
    tables["host-bound rule"] = by_rule.rename(index={True: "matched", False: "not matched"})
    for g in group_by or []:
        col = GROUP_ALIASES.get(g, g)
        if col not in cv.rows:
            raise UserError(f"unknown --group-by '{g}'", "Use model, gpu, kind, task or source")
        tables[g] = cv.summary(col)
    return tables
