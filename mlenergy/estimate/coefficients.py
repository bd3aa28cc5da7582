"""The fitted global coefficients of the physical model, and the shipped set.

:class:`Coefficients` holds every number :mod:`mlenergy.estimate.calibration` fits (few, and
none per model or per GPU, so that they generalise) and the few it sets; the shipped values
live in ``coefficients.json`` next to this module (derived numbers only).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from functools import cache
from pathlib import Path

from mlenergy.errors import UserError

COEFFICIENTS_FILE = "coefficients.json"


@dataclass(frozen=True)
class HostBoundRule:
    """Configurations whose calibration runs were host-bound: a fact of the calibration data.

    In the v3 reference data, single-GPU B200 runs of the long-output and multimodal tasks
    often sat at 25-45 ms per step with the GPU near idle, whatever the batch (see
    :mod:`~mlenergy.estimate.host_bound`). The rule names such configurations by their inputs
    only, so it ships with the coefficients fitted on that data (``coefficients.json``).

    Attributes:
        gpu: Catalog GPU name (e.g. ``B200``).
        num_gpus: GPUs of the configuration.
        tasks: Canonical task labels.
    """

    gpu: str
    num_gpus: int
    tasks: tuple[str, ...]

    def describe(self) -> str:
        """The configurations in words, e.g. ``one B200 with gpqa, image-chat or video-chat``."""
        count = "one" if self.num_gpus == 1 else str(self.num_gpus)
        tasks = list(self.tasks)
        listed = ", ".join(tasks[:-1]) + f" or {tasks[-1]}" if len(tasks) > 1 else "".join(tasks)
        return f"{count} {self.gpu} with {listed}"


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
        legacy_moe_layer_s: Further cost per MoE layer per step of the older engine of the v2
            data (vLLM 0.5.4), in seconds before ``legacy_slowdown``: its MoE layers were far
            costlier than today's, so they get their own term instead of inflating
            ``moe_layer_s`` for the current engine.
        legacy_worker_s: Host time per step for each GPU of a replica beyond the first, in the
            older engine of the v2 data (seconds; not scaled by ``legacy_slowdown``): its
            driver process hands every step's inputs to the other workers before the GPUs
            start, while they wait. Today's engine fits no such cost.
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
            the older engine's extra host overhead (``legacy_slowdown``), is host time.
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
        legacy_slowdown: Factor on the host-side overheads (step, layer, sequence costs) for
            the older engine of the v2 data (vLLM 0.5.4).
        log_q05: 5th percentile of log(measured/predicted) energy per token (cross-validated).
        log_q95: 95th percentile of the same.
        log_q05_host: 5th percentile of the same over configurations whose reference runs
            were host-bound (:mod:`~mlenergy.estimate.host_bound`); ``None``: use ``log_q05``.
        log_q95_host: 95th percentile of the same; ``None``: use ``log_q95``.
        unseen_gpu_widen: Interval widening factor for GPUs absent from calibration.
        interval_by_class: (5th, 95th) percentile log errors per ``<gpu>/<family>`` class
            (e.g. ``B200/moe``) with enough cross-validated rows, outside the host-bound
            rule: the interval is wider where the data say so (and narrower), else the
            common ``log_q05``/``log_q95``.
        task_input_tokens: Mean prompt length per task label (tokens), fitted as workload
            descriptors because the reference data does not publish prompt lengths.
        calibrated_gpus: GPUs present in the calibration data.
        host_bound_rule: Configurations whose calibration runs were host-bound (``None``: no
            such configurations known); kept with the coefficients fitted on that data.
        fit_info: Free-form description of the fit.
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
    legacy_moe_layer_s: float = 1e-4
    legacy_worker_s: float = 1e-4
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
    legacy_slowdown: float = 5.0
    log_q05: float = -0.25
    log_q95: float = 0.25
    log_q05_host: float | None = None
    log_q95_host: float | None = None
    unseen_gpu_widen: float = 1.5
    calibrated_gpus: tuple[str, ...] = ()
    task_input_tokens: dict[str, float] = field(default_factory=dict)
    host_bound_rule: HostBoundRule | None = None
    interval_by_class: dict[str, tuple[float, float]] = field(default_factory=dict)
    fit_info: dict[str, object] = field(default_factory=dict, compare=False)

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
        "legacy_slowdown",
        "mem_ceiling",
        "moe_ceiling",
        "p_quant",
        "prefill_layer_s",
        "mamba_prefill_s",
        "visual_token_s",
        "legacy_moe_layer_s",
        "legacy_worker_s",
        "fp8_moe_layer_s",
        "moe_tile_s",
        "seq_busy",
        "moe_min_cols",
    )

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
        if host_bound and self.log_q05_host is not None and self.log_q95_host is not None:
            return self.log_q05_host, self.log_q95_host
        if klass is not None and klass in self.interval_by_class:
            lo, hi = self.interval_by_class[klass]
            return float(lo), float(hi)
        return self.log_q05, self.log_q95

    def replace(self, **kw: object) -> Coefficients:
        """Return a copy with some fields replaced."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data.update(kw)
        return Coefficients(**data)  # type: ignore[arg-type]

    def save(self, path: str | Path) -> Path:
        """Write the coefficients as JSON (atomically) and return the path."""
        p = Path(path)
        if p.is_dir():
            p = p / COEFFICIENTS_FILE
        p.parent.mkdir(parents=True, exist_ok=True)
        data = asdict(self)
        data["calibrated_gpus"] = list(self.calibrated_gpus)
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        tmp.replace(p)
        return p

    @classmethod
    def load(cls, path: str | Path | None = None) -> Coefficients:
        """Read coefficients from ``path`` (a file or folder), or the shipped defaults."""
        if path is None:
            return default_coefficients()
        p = Path(path)
        if p.is_dir():
            p = p / COEFFICIENTS_FILE
        if not p.is_file():
            raise UserError(f"coefficients file '{p}' does not exist", "Run estimate calibrate")
        return cls._from_dict(json.loads(p.read_text()))

    @classmethod
    def _from_dict(cls, data: dict) -> Coefficients:
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in names}
        kw["calibrated_gpus"] = tuple(kw.get("calibrated_gpus") or ())
        kw["interval_by_class"] = {
            str(k): (float(v[0]), float(v[1]))
            for k, v in (kw.get("interval_by_class") or {}).items()
        }
        rule = kw.get("host_bound_rule")
        if rule is not None:
            kw["host_bound_rule"] = HostBoundRule(
                gpu=str(rule["gpu"]), num_gpus=int(rule["num_gpus"]), tasks=tuple(rule["tasks"])
            )
        return cls(**kw)


def interval_class(gpu: str, family: str) -> str:
    """The key of :attr:`Coefficients.interval_by_class`: ``<catalog gpu>/<family>``."""
    return f"{gpu}/{family}"


@cache
def default_coefficients() -> Coefficients:
    """The coefficients shipped with the package (fitted on the reference measurements)."""
    res = Path(__file__).parent / COEFFICIENTS_FILE
    if res.is_file():
        return Coefficients._from_dict(json.loads(res.read_text()))
    return Coefficients()
