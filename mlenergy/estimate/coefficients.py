"""The fitted global coefficients of the physical model, and the shipped set.

:class:`Coefficients` holds every number :mod:`mlenergy.calibrate.calibration` fits (few, and
none per model or per GPU, so that they generalise) and the few it sets, including the fitted
overhead terms of each engine profile (``engine_overheads``, by profile name). The shipped
values live in ``coefficients.json`` next to this module (derived numbers only); the
calibration report of the same fit (interval quantiles, host-bound rule, fitted prompt
lengths, calibrated GPUs: :class:`~mlenergy.estimate.calibration_report.CalibrationReport`)
lives beside it in ``coefficients.report.json``. A coefficients file ``X.json`` always has its
report at ``X.report.json`` (:func:`report_path`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from mlenergy.errors import UserError
from mlenergy.estimate.calibration_report import (
    REPORT_FIELDS,
    CalibrationReport,
    HostBoundRule,
)
from mlenergy.estimate.engines import (
    BY_NAME,
    FITTED,
    LEGACY_ENGINE,
    OVERHEADS,
    PROFILES,
    fitted_overheads,
)

__all__ = ["COEFFICIENTS_FILE", "CalibrationReport", "Coefficients", "HostBoundRule"]

COEFFICIENTS_FILE = "coefficients.json"
REPORT_SUFFIX = ".report.json"
"""A coefficients file ``X.json`` has its calibration report at ``X.report.json``."""

OVERHEAD_START: dict[str, float] = {"host_slowdown": 5.0, "worker_s": 1e-4, "moe_layer_s": 1e-4}
"""Starting values of fitted engine overhead terms (the code defaults of a fit)."""

FLAT_OVERHEAD_NAMES: dict[str, str] = {
    "legacy_slowdown": "host_slowdown",
    "legacy_worker_s": "worker_s",
    "legacy_moe_layer_s": "moe_layer_s",
}
"""Names of the 2024 profile's terms in coefficient files written before profiles carried
their own terms (still read)."""


def overhead_name(profile: str, term: str) -> str:
    """The fitted-coefficient name of a profile's overhead term: ``<profile>.<term>``."""
    return f"{profile}.{term}"


def _start_overheads() -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for profile, term in fitted_overheads():
        out.setdefault(profile, {})[term] = OVERHEAD_START[term]
    return out


def report_path(path: str | Path) -> Path:
    """The report file beside a coefficients file: ``X.json`` -> ``X.report.json``."""
    p = Path(path)
    return p.with_name(p.name.removesuffix(".json") + REPORT_SUFFIX)


@dataclass(frozen=True)
class Coefficients:
    """Fitted global coefficients of the physical model (few, so that they generalise).

    Attributes:
        eta_mem: Achieved fraction of datasheet memory bandwidth in decode.
        mem_ceiling: GPU-independent streaming ceiling in bytes/s, in series with
            ``eta_mem`` times the datasheet bandwidth (effective bandwidth
            ``1 / (1 / (eta_mem BW) + 1 / mem_ceiling)``): faster memories are harder to
            saturate with latency-bound decode kernels.
        moe_ceiling: The same ceiling (bytes/s) for the routed experts' weights: a grouped
            expert GEMM streams one small matrix per expert hit on the GPU, which reaches
            less of the memory system than one large dense matrix.
        eta_comp: Achieved fraction of datasheet tensor FLOP/s in the matmuls of a
            decode-only step (and in decode attention).
        eta_prefill: Achieved fraction of datasheet tensor FLOP/s in prefill, and in every
            matmul of a mixed step (decode and prompt rows share one taller GEMM).
        overlap_p: Exponent of the soft maximum combining memory and compute time.
        step_s: Fixed cost per serving step in seconds (launches, scheduler, sampling).
        layer_s: Fixed cost per layer per step in seconds (kernel launches).
        moe_layer_s: Extra fixed cost per MoE layer per step in seconds (routing, token
            permutation, grouped-GEMM launches).
        fp8_moe_layer_s: Extra cost per MoE layer per step when the routed experts are fp8
            (block-scaled checkpoints take another grouped-GEMM path: activations quantised
            per token group, scales applied per block), in seconds; counted as busy time.
        moe_tile_s: Extra cost per MoE layer per step when expert parallelism shards
            unquantised experts and the step's tokens exceed the experts a GPU holds (vLLM's
            untuned fused-MoE kernel switches from 16-row to 64-row tiles), in seconds;
            counted as busy time.
        seq_s: Cost per sequence per step in seconds (current engine).
        seq_busy: Share of ``seq_s`` that keeps the GPU busy (per-sequence sampling,
            logits and attention-metadata kernels), drawing ``p_mem`` power; the rest, and
            an engine profile's extra host overhead (its ``host_slowdown``), is host time.
        prefill_layer_s: Extra cost per layer of a step that carries prompt tokens, in
            seconds (a mixed prefill/decode batch runs outside the captured CUDA graphs).
        mamba_prefill_s: Extra GPU time per Mamba layer of a step that carries prompt tokens,
            in seconds at the spec clock (vLLM 0.11's chunked-scan prefill path of Mamba2
            hybrids: conv1d, chunk cumsum/state/scan and state passing), counted as compute
            time for power.
        visual_token_s: Host time per visual prompt token (images, video) in seconds, paid
            by the step that prefills the prompt with the GPUs waiting: the engine's intake
            of the prompt's pixel tensors (the reference multimodal runs spend 50-150 ms per
            request beyond their prefill work, on H100 and B200 alike).
        collective_s: Latency per collective (all-reduce or all-to-all) per log2 step of its
            participants, in seconds.
        all_to_all_s: Latency per expert-parallel dispatch or combine, in seconds.
        eta_link: Achieved fraction of interconnect bandwidth.
        routing_spread: Effective fraction of the experts that a step's tokens draw from
            (1: uniform routing; lower: skewed, fewer distinct experts hit). Not fitted: the
            reference data prefer uniform routing.
        moe_min_cols: Fewest output columns (all hit experts of a GPU together) at which a
            grouped expert GEMM streams at full bandwidth; fewer take about as long as this
            many (a soft maximum with exponent ``overlap_p``: the floor sets in gradually).
        dequant_flops: Work to dequantise one scaled low-precision weight element, in
            tensor-core FLOP equivalents. Not fitted (0): the reference data cannot separate
            it from other costs and a value fitted on FP8 did not transfer to MXFP4.
        idle_frac: Idle power as a fraction of TDP, when the catalog has no idle figure.
            Not fitted (0.2, the upper end of the H100's measured idle share): on the one
            GPU that uses it (B200) it trades against ``p_base`` and ran from bound to bound.
        p_base: Power above idle while serving, as a fraction of (TDP - idle).
        p_comp: Extra power fraction at full compute utilisation.
        p_mem: Extra power fraction while memory traffic or collectives keep the GPU busy.
        p_quant: Extra power fraction while scaled low-precision weights (fp8, mxfp4,
            nvfp4) are dequantised as they stream (for the time their stored bytes take at the
            effective bandwidth: an MXFP4 weight costs half an fp8 one).
        voltage_floor: Core voltage at and below the knee clock relative to that at the
            highest; dynamic power scales as ``r * v(r)^2``
            (:func:`~mlenergy.estimate.power_model.relative_voltage`).
        engine_overheads: Fitted overhead terms per engine profile (``{profile: {term:
            value}}``; the terms are :data:`~mlenergy.estimate.engines.OVERHEADS`, the
            profiles those of ``engines.json`` whose entry says ``fitted``).
        report: The calibration report of the fit (interval quantiles, host-bound rule,
            fitted prompt lengths, calibrated GPUs), read beside the coefficients file. Its
            entries read as attributes too (``coef.log_q05``, :meth:`__getattr__`), and
            :meth:`replace` takes them.
    """

    eta_mem: float = 0.9
    mem_ceiling: float = 1e13
    moe_ceiling: float = 1e13
    eta_comp: float = 0.5
    eta_prefill: float = 0.7
    overlap_p: float = 3.0
    step_s: float = 1e-4
    layer_s: float = 4e-5
    moe_layer_s: float = 6e-5
    fp8_moe_layer_s: float = 1e-4
    moe_tile_s: float = 5e-5
    seq_s: float = 3.5e-5
    seq_busy: float = 0.5
    prefill_layer_s: float = 1e-4
    mamba_prefill_s: float = 1e-4
    visual_token_s: float = 2e-5
    collective_s: float = 5e-6
    all_to_all_s: float = 3e-5
    eta_link: float = 0.5
    routing_spread: float = 1.0
    moe_min_cols: float = 16384.0
    dequant_flops: float = 0.0
    idle_frac: float = 0.2
    p_base: float = 0.15
    p_comp: float = 0.8
    p_mem: float = 0.6
    p_quant: float = 0.3
    voltage_floor: float = 0.65
    engine_overheads: dict[str, dict[str, float]] = field(default_factory=_start_overheads)
    report: CalibrationReport = field(default_factory=CalibrationReport)

    FITTED = (
        "eta_mem",
        "eta_comp",
        "eta_prefill",
        "step_s",
        "layer_s",
        "moe_layer_s",
        "seq_s",
        "collective_s",
        "all_to_all_s",
        "p_base",
        "p_comp",
        "p_mem",
        "mem_ceiling",
        "moe_ceiling",
        "p_quant",
        "prefill_layer_s",
        "mamba_prefill_s",
        "visual_token_s",
        "fp8_moe_layer_s",
        "moe_tile_s",
        "seq_busy",
        "moe_min_cols",
        *(overhead_name(p, t) for p, t in fitted_overheads()),
    )
    """Every fitted coefficient: the physics' own, then each profile's fitted overheads."""

    def __getattr__(self, name: str) -> Any:
        """A report entry (``coef.log_q05``) or a fitted overhead (``<profile>.<term>``).

        The report's entries read through the coefficients that were fitted with them.
        """
        if name in REPORT_FIELDS and "report" in self.__dict__:
            return getattr(self.__dict__["report"], name)
        profile, dot, term = name.partition(".")
        if dot and profile in self.__dict__.get("engine_overheads", {}):
            overheads = self.__dict__["engine_overheads"][profile]
            if term in overheads:
                return overheads[term]
        raise AttributeError(name)

    def overhead(self, profile: str, term: str) -> float:
        """A profile's overhead term: its fixed catalog value, else the fitted one."""
        value = BY_NAME[profile].overheads[term]
        if value != FITTED:
            return float(value)
        fitted = self.engine_overheads.get(profile, {})
        return float(fitted.get(term, OVERHEAD_START[term]))

    def interval_logs(
        self, host_bound: bool = False, klass: str | None = None
    ) -> tuple[float, float]:
        """The (5th, 95th) percentile log errors of the 90% interval of energy per token.

        Args:
            host_bound: The configuration matches the host-bound rule
                (:mod:`~mlenergy.estimate.host_bound`): its own quantiles when calibrated.
            klass: ``<gpu>/<family>`` (:func:`interval_class`): its own quantiles when
                calibrated (the host-bound ones take precedence).
        """
        r = self.report
        if host_bound and r.log_q05_host is not None and r.log_q95_host is not None:
            return r.log_q05_host, r.log_q95_host
        if klass is not None and klass in r.interval_by_class:
            lo, hi = r.interval_by_class[klass]
            return float(lo), float(hi)
        return r.log_q05, r.log_q95

    def replace(self, **kw: Any) -> Coefficients:
        """A copy with some entries replaced: fields, report entries or ``<profile>.<term>``."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        report = {k: kw.pop(k) for k in list(kw) if k in REPORT_FIELDS}
        if report:
            data["report"] = CalibrationReport.from_dict(
                {**{n: getattr(self.report, n) for n in REPORT_FIELDS}, **report}
            )
        dotted = {k: kw.pop(k) for k in list(kw) if "." in k}
        if dotted:
            overheads = {p: dict(t) for p, t in self.engine_overheads.items()}
            for name, value in dotted.items():
                profile, _, term = name.partition(".")
                if profile not in BY_NAME or term not in OVERHEADS:
                    raise TypeError(f"no engine overhead {name}")
                overheads.setdefault(profile, {})[term] = float(value)
            data["engine_overheads"] = overheads
        data.update(kw)
        return Coefficients(**data)

    def to_dict(self) -> dict[str, object]:
        """The coefficients as JSON-ready data (the report is not part of them)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "report"}
        data["engine_overheads"] = {p: dict(t) for p, t in self.engine_overheads.items()}
        return data

    def save(self, path: str | Path) -> Path:
        """Write the coefficients and, beside them, their report (atomically); return the path.

        Args:
            path: A ``.json`` file, or a folder (``coefficients.json`` inside). The report goes
                to :func:`report_path` of it.
        """
        p = Path(path)
        if p.is_dir():
            p = p / COEFFICIENTS_FILE
        p.parent.mkdir(parents=True, exist_ok=True)
        _write_json(report_path(p), self.report.to_dict())
        _write_json(p, self.to_dict())
        return p

    @classmethod
    def load(cls, path: str | Path | None = None) -> Coefficients:
        """Read coefficients from ``path`` (a file or folder), or the shipped defaults.

        The report comes from :func:`report_path` of the file when it is there. A file
        without one (or one written before the two were split, which holds both) keeps the
        report entries it has; every other entry is the code default: the common interval,
        no host-bound rule, no calibrated GPU (so every GPU's interval is widened). The
        shipped report is never borrowed for a user's fit: its quantiles were measured on
        the shipped coefficients.
        """
        if path is None:
            return default_coefficients()
        p = Path(path)
        if p.is_dir():
            p = p / COEFFICIENTS_FILE
        if not p.is_file():
            raise UserError(f"coefficients file '{p}' does not exist", "Run estimate calibrate")
        return cls._from_files(p)

    @classmethod
    def _from_files(cls, p: Path) -> Coefficients:
        data = _read_json(p)
        beside = report_path(p)
        if beside.is_file():
            data = {**data, **_read_json(beside)}
        return cls._from_dict(data)

    @classmethod
    def _from_dict(cls, data: dict) -> Coefficients:
        names = {f.name for f in fields(cls)} - {"report"}
        kw = {k: v for k, v in data.items() if k in names}
        overheads = _start_overheads()
        for profile, terms in (kw.get("engine_overheads") or {}).items():
            overheads.setdefault(str(profile), {}).update({t: float(v) for t, v in terms.items()})
        for flat, term in FLAT_OVERHEAD_NAMES.items():
            if flat in data:
                overheads.setdefault(LEGACY_ENGINE, {})[term] = float(data[flat])
        kw["engine_overheads"] = overheads
        kw["report"] = CalibrationReport.from_dict(data)
        return cls(**kw)


def _read_json(p: Path) -> dict:
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read coefficients file '{p}': {exc}") from exc
    if not isinstance(data, dict):
        raise UserError(f"coefficients file '{p}' is not a JSON object")
    return data


def _write_json(p: Path, data: dict) -> None:
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(p)


def row_overheads(engine: np.ndarray, c: Coefficients) -> dict[str, np.ndarray]:
    """Each row's engine overhead terms (:data:`~mlenergy.estimate.engines.OVERHEADS`).

    Args:
        engine: The ``engine`` feature: each row's position in
            :data:`~mlenergy.estimate.engines.PROFILES`.
        c: Coefficients holding the fitted terms.
    """
    idx = np.asarray(engine).astype(np.intp)
    return {
        term: np.array([c.overhead(p.name, term) for p in PROFILES], dtype=float)[idx]
        for term in OVERHEADS
    }


def interval_class(gpu: str, family: str) -> str:
    """The key of :attr:`CalibrationReport.interval_by_class`: ``<catalog gpu>/<family>``."""
    return f"{gpu}/{family}"


@cache
def default_coefficients() -> Coefficients:
    """The shipped coefficients (fitted on the reference measurements), with their report."""
    res = Path(__file__).parent / COEFFICIENTS_FILE
    if res.is_file():
        return Coefficients._from_files(res)
    return Coefficients()
