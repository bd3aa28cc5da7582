"""Turn user inputs (model, GPU, parallelism, batch, lengths) into the physical model's arrays.

Resolves models (config path or id under a configs folder, ``-FP8`` suffix), GPUs (catalog or
spec file), task defaults for missing prompt lengths, checks the input (naming the bad field)
and whether the configuration fits in memory (the rule is in :mod:`~mlenergy.estimate.memory`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from mlenergy.errors import UserError
from mlenergy.estimate.catalog import GpuSpec, resolve_gpu
from mlenergy.estimate.checks import (  # noqa: F401 (re-exported: one import site for callers)
    BATCH_CAP_TOLERANCE,
    check_layout,
    check_workload,
    clock_power_error,
    expected_num_gpus,
)
from mlenergy.estimate.checks import positive as _positive
from mlenergy.estimate.engines import canonical_task
from mlenergy.estimate.memory import fit_verdict, memory_bytes, memory_row, usable_bytes
from mlenergy.estimate.physics import FEATURES
from mlenergy.estimate.profile import ModelProfile, build_profile, normalise_precision
from mlenergy.models.architecture import ArchitectureSpec

TASK_INPUT_TOKENS: dict[str, int] = {
    "lm-arena-chat": 250,
    "gpqa": 300,
    "sourcegraph-fim": 2000,
    "image-chat": 1200,
    "video-chat": 2000,
    "sharegpt-chat": 250,
    "code": 400,
}
"""Mean prompt length (tokens) assumed per task when ``input_tokens`` is not given.

Prompt lengths are not published with the reference measurements; these are typical means of
each workload. Multimodal tasks count the LLM tokens an image or a video leaves after the
vision encoder's 2x2 merge: about 1000 for a one-megapixel image, about 2000 for a sampled
clip (some ten temporal patches of ~200 tokens), which is also the mean context the measured
decode steps of the video-chat rows imply."""

DEFAULT_INPUT_TOKENS = 512


@dataclass(frozen=True)
class Workload:
    """One configuration to estimate.

    Attributes:
        batch_size: Average number of sequences decoding together (all replicas).
        input_tokens: Mean prompt length in tokens.
        output_tokens: Mean output length in tokens.
        num_gpus: GPUs used.
        tensor_parallel: Tensor-parallel degree.
        expert_parallel: Expert-parallel degree (>1: experts sharded over all GPUs).
        data_parallel: Data-parallel replicas.
        pipeline_parallel: Pipeline stages.
        sm_clock_mhz: Locked SM clock in MHz (``None``: the GPU's maximum).
        power_limit_w: Power limit per GPU in watts (``None``: TDP).
        legacy_engine: True for the older serving engine of the v2 measurements.
        max_num_seqs: The engine's concurrency cap over all replicas (``None``: none given);
            ``batch_size`` may not exceed it.
        input_tokens_given: False when ``input_tokens`` is a task default (a guess): then a
            KV cache that does not fit is a warning, not an error.
    """

    batch_size: float
    input_tokens: float
    output_tokens: float
    num_gpus: int = 1
    tensor_parallel: int = 1
    expert_parallel: int = 1
    data_parallel: int = 1
    pipeline_parallel: int = 1
    sm_clock_mhz: float | None = None
    power_limit_w: float | None = None
    legacy_engine: bool = False
    max_num_seqs: float | None = None
    input_tokens_given: bool = True


def default_configs_dir() -> Path | None:
    """``<reference>/model-configs`` when the reference data is present, else ``None``."""
    from mlenergy.estimate.reference import reference_dir

    ref = reference_dir()
    return ref / "model-configs" if ref is not None else None


@lru_cache(maxsize=512)
def _load_config(path: str) -> ArchitectureSpec:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"model config '{p}' is not valid JSON ({exc.msg})") from None
    return ArchitectureSpec.from_config(data)


TUNE_TOKENS = frozenset({"instruct", "thinking", "chat", "it", "hf", "base", "pt"})
"""Name tokens of chat/reasoning tunes of one architecture (``Instruct``, ``Thinking``, and
``pt``/``Base`` for the pretrained checkpoint)."""
VARIANT_TOKENS = TUNE_TOKENS | {"bf16", "fp16", "vl", "meta"}
"""Dash-separated name tokens that mark a variant of the same text architecture: the tunes,
weight-dtype tags of a bf16/fp16 checkpoint, ``VL`` (a vision-language wrapper around the
same language model) and the brand prefix of ``Meta-Llama-3.1`` (renamed ``Llama-3.1``)."""
FP8_SUFFIX = "-FP8"


@dataclass(frozen=True)
class ResolvedModel:
    """A model id or path resolved to its config.

    Attributes:
        spec: The architecture.
        fp8: True when the id asked for FP8 weights (trailing ``-FP8``).
        path: The config file used.
        note: Empty when the id's own config (or the given path) was used, else a sentence
            naming the variant's config that stood in for it.
    """

    spec: ArchitectureSpec
    fp8: bool
    path: Path
    note: str = ""


def _stem(name: str) -> tuple[str, frozenset[str]]:
    """Split a model name into its architecture stem and its variant tokens (lower case)."""
    tokens = name.lower().split("-")
    stem = "-".join(t for t in tokens if t not in VARIANT_TOKENS)
    return stem, frozenset(t for t in tokens if t in VARIANT_TOKENS)


@lru_cache(maxsize=64)
def _config_files(folder: str) -> tuple[str, ...]:
    return tuple(sorted(p.name for p in Path(folder).glob("*.json")))


def config_candidates(model_id: str, folder: Path) -> list[Path]:
    """Config files that can describe ``model_id`` (``-FP8`` already removed), best first.

    Order: the exact ``<org>__<name>.json``; the same name in another letter case; then files
    of the same organisation (any, for an id without one) whose name differs only by variant
    tokens
    (:data:`VARIANT_TOKENS`, e.g. ``-Thinking-2507`` vs ``-Instruct-2507``,
    ``-v2-VL-BF16`` vs ``-v2``), fewest differing non-tune tokens (``VL``, dtype tags) first,
    then fewest differing tune tokens, then by name.
    """
    exact = model_id.replace("/", "__") + ".json"
    files = _config_files(str(folder))
    out = [exact] if exact in files else []
    out += [f for f in files if f.lower() == exact.lower() and f != exact]
    org, _, name = model_id.rpartition("/")
    stem, tags = _stem(name)
    ranked = []
    for f in files:
        f_org, _, f_name = f[: -len(".json")].rpartition("__")
        if f in out or (org and f_org.lower() != org.lower()):
            continue
        f_stem, f_tags = _stem(f_name)
        if f_stem == stem:
            diff = tags ^ f_tags
            ranked.append((len(diff - TUNE_TOKENS), len(diff & TUNE_TOKENS), f))
    out += [f for *_, f in sorted(ranked)]
    if not org and len({f.rpartition("__")[0].lower() for f in out}) > 1:
        return []  # the same name under several organisations: ambiguous without one
    return [folder / f for f in out]


def resolve_model_config(model: str, configs_dir: str | Path | None = None) -> ResolvedModel:
    """Resolve ``model`` to its config: the one resolution rule of every estimator path.

    Args:
        model: A path to a ``config.json`` (or a folder holding one), or a model id resolved
            under ``configs_dir`` by :func:`config_candidates`: ``<org>__<name>.json``, else a
            variant with the same text architecture. A trailing ``-FP8`` selects the base
            model's config with FP8 weights.
        configs_dir: Folder of ``<org>__<name>.json`` configs (default: the reference's).

    Raises:
        UserError: No config can be found, or it is incomplete (names the field).
    """
    text = str(model).strip()
    if not text:
        raise UserError("model is empty", "Give a config.json path or a model id")
    p = Path(text)
    if p.is_dir() and (p / "config.json").is_file():
        p = p / "config.json"
    if p.suffix == ".json" or p.is_file():
        if not p.is_file():
            raise UserError(f"model config '{p}' does not exist", "Check the --model path")
        return ResolvedModel(_load_config(str(p.resolve())), False, p)
    fp8 = text.upper().endswith(FP8_SUFFIX)
    base = text[: -len(FP8_SUFFIX)] if fp8 else text
    folder = Path(configs_dir) if configs_dir else default_configs_dir()
    if folder is None:
        raise UserError(
            f"model '{text}' is an id but no configs folder is known",
            "Pass --configs-dir or a path to a config.json",
        )
    exact = base.replace("/", "__") + ".json"
    found = config_candidates(base, folder) if folder.is_dir() else []
    if not found:
        raise UserError(
            f"model '{text}': no config '{exact}' in {folder}, nor one of a variant with the "
            "same architecture" + ("" if "/" in base else " under exactly one organisation"),
            "Put the model's config.json there as <org>__<name>.json or pass its path"
            + ("" if "/" in base else " (or give the id as <org>/<name>)"),
        )
    path = found[0]
    note = ""
    same_name = path.stem.rpartition("__")[2].lower() == base.rpartition("/")[2].lower()
    if path.name.lower() != exact.lower():
        why = "the id has no organisation" if same_name else "variant with the same architecture"
        note = f"config {path.name} used for {base} ({why})"
    return ResolvedModel(_load_config(str(path.resolve())), fp8, path, note)


def resolve_model(
    model: str, configs_dir: str | Path | None = None
) -> tuple[ArchitectureSpec, bool]:
    """Return the architecture of ``model`` and whether its id asks for FP8 weights.

    See :func:`resolve_model_config` (the resolution rule); this form drops the path and note.
    """
    r = resolve_model_config(model, configs_dir)
    return r.spec, r.fp8


def check_memory(
    spec: ArchitectureSpec,
    prof: ModelProfile,
    gpu: GpuSpec,
    w: Workload,
) -> tuple[dict[str, float], str]:
    """Apply the engine's fit rule (:mod:`mlenergy.estimate.memory`) to one configuration.

    Args:
        spec: Architecture.
        prof: Its profile at the weight precision.
        gpu: The GPU.
        w: The workload (``max_num_seqs`` sizes the sampler workspace, default the batch;
            ``input_tokens_given`` decides error or warning for the KV cache).

    Returns:
        Per-GPU memory in GB (``weights``, ``workspace``, ``kv_cache``, ``total``,
        ``usable``) and a warning (empty if none).

    Raises:
        UserError: Weights and workspace do not fit, or (prompt length given) the KV cache of
            ``batch_size`` sequences does not fit; the message carries the arithmetic.
    """
    f = {**feature_row(prof, gpu, w), **memory_row(spec, prof)}
    f["seqs"] = w.batch_size if w.max_num_seqs is None else w.max_num_seqs
    weights, workspace, kv, per_seq = (float(x) for x in memory_bytes(f))
    error, fix, warning = fit_verdict(
        weights=weights,
        workspace=workspace,
        kv=kv,
        per_seq=per_seq,
        batch=w.batch_size,
        dp=w.data_parallel,
        ctx=w.input_tokens + 0.5 * w.output_tokens,
        memory_gb=gpu.memory_gb,
        gpu_name=gpu.name,
        input_given=w.input_tokens_given,
    )
    if error:
        raise UserError(error, fix)
    gb = {
        "weights": weights / 1e9,
        "workspace": workspace / 1e9,
        "kv_cache": kv / 1e9,
        "total": (weights + workspace + kv) / 1e9,
        "usable": float(usable_bytes(gpu.memory_gb)) / 1e9,
    }
    return gb, warning


def feature_row(prof: ModelProfile, gpu: GpuSpec, w: Workload) -> dict[str, float]:
    """Feature values (see :data:`~mlenergy.estimate.physics.FEATURES`) of one configuration."""
    return {
        "common_bytes": prof.common_bytes,
        "expert_bytes": prof.expert_bytes,
        "n_moe_layers": prof.n_moe_layers,
        "num_experts": prof.num_experts,
        "experts_per_token": prof.experts_per_token,
        "dense_flops": prof.dense_flops_per_token,
        "expert_flops": prof.expert_flops_per_token,
        "kv_full": prof.kv_full_bytes_per_token,
        "kv_window": prof.kv_window_bytes_per_token,
        "window": prof.window,
        "attn_full": prof.attn_full_flops,
        "attn_window": prof.attn_window_flops,
        "ssm_bytes": prof.ssm_state_bytes,
        "ssm_flops": prof.ssm_flops_per_token,
        "quant_common": prof.quant_common_elems,
        "quant_expert": prof.quant_expert_elems,
        "quant_common_bytes": prof.quant_common_bytes,
        "quant_expert_bytes": prof.quant_expert_bytes,
        "num_kv_heads": prof.num_kv_heads,
        "latent_kv": float(prof.latent_kv),
        "num_layers": prof.num_layers,
        "hidden_size": prof.hidden_size,
        "expert_inter": prof.expert_intermediate,
        "n_mamba_layers": prof.n_mamba_layers,
        # The block-scaled fp8 MoE path needs fp8 tensor cores; without them (Ampere) vLLM
        # runs weight-only kernels that dequantise to BF16, with no activation quantisation.
        "fp8_experts": float(
            prof.expert_precision == "fp8" and prof.n_moe_layers > 0 and gpu.native("fp8")
        ),
        "bandwidth": gpu.memory_bandwidth_tb_s * 1e12,
        "peak_dense": gpu.peak_tflops(prof.precision) * 1e12,
        "peak_expert": gpu.peak_tflops(prof.expert_precision) * 1e12,
        "spec_clock": gpu.clock_at_spec_mhz,
        "max_clock": gpu.max_sm_clock_mhz,
        "min_clock": gpu.min_sm_clock_mhz or 0.3 * gpu.max_sm_clock_mhz,
        "tdp": gpu.tdp_w,
        "idle": np.nan if gpu.idle_power_w is None else gpu.idle_power_w,
        "link": gpu.interconnect_gb_s * 1e9,
        "num_gpus": w.num_gpus,
        "tp": w.tensor_parallel,
        "ep": w.expert_parallel,
        "dp": w.data_parallel,
        "pp": w.pipeline_parallel,
        "batch": w.batch_size,
        "input_tokens": w.input_tokens,
        "output_tokens": w.output_tokens,
        "legacy": float(w.legacy_engine),
        "clock": np.nan if w.sm_clock_mhz is None else w.sm_clock_mhz,
        "power_limit": np.nan if w.power_limit_w is None else w.power_limit_w,
    }


def stack(rows: list[dict[str, float]]) -> dict[str, np.ndarray]:
    """Stack feature rows into one float64 array per feature."""
    return {name: np.array([r[name] for r in rows], dtype=np.float64) for name in FEATURES}


def has_value(value: object) -> bool:
    """True unless ``value`` is None, empty or NaN (a blank CSV cell)."""
    return value is not None and str(value).strip() not in ("", "nan", "NaN", "None")


def task_input_tokens(task: str | None) -> float:
    """Default mean prompt length (tokens) of a task: calibrated table, else built-in."""
    from mlenergy.estimate.coefficients import default_coefficients

    key = canonical_task(task)
    fitted = default_coefficients().task_input_tokens
    if key in fitted:
        return float(fitted[key])
    return float(TASK_INPUT_TOKENS.get(key, DEFAULT_INPUT_TOKENS))


def input_tokens_for(task: str | None, input_tokens: float | str | None) -> float:
    """The prompt length: ``input_tokens`` when given, else the task default (tokens)."""
    if has_value(input_tokens):
        return _positive("input_tokens", input_tokens, allow_zero=True)
    return task_input_tokens(task)


def weight_precision(fp8_id: bool, precision: str | None, stored: str | None = None) -> str:
    """Weight precision of a row: ``precision``, else what the checkpoint stores.

    Empty (or ``auto``) ``precision``: fp8 for a ``-FP8`` id or a checkpoint whose
    ``quantization_config`` says ``quant_method: fp8`` (DeepSeek-V3/R1 ship fp8 weights, and
    vLLM serves them so),
    else bfloat16 (gpt-oss style ``mxfp4`` checkpoints are handled by the profile).
    A ``-FP8`` id means fp8 weights: its precision must be empty or ``fp8``.

    Args:
        fp8_id: The model id ends in ``-FP8``.
        precision: The requested precision (may be empty).
        stored: The checkpoint's ``quant_method`` (None if unquantised).

    Raises:
        UserError: A ``-FP8`` id with another precision (conflicting precision).
    """
    p = (precision or "").strip()
    if p.lower() == "auto":  # vLLM's --dtype auto: what the checkpoint stores
        p = ""
    if fp8_id:
        if p and normalise_precision(p) != "fp8":
            raise UserError(
                f"precision '{p}' conflicts with the model's -FP8 weights",
                "Omit --precision or give fp8 for a -FP8 model (or drop the -FP8 suffix)",
            )
        return "fp8"
    if not p and stored == "fp8":
        return "fp8"
    return normalise_precision(p or None)


@dataclass(frozen=True)
class Prepared:
    """One resolved, validated, featurised configuration.

    Attributes:
        spec: Architecture.
        prof: Profile at the weight precision.
        gpu: GPU datasheet.
        features: Feature row of :data:`~mlenergy.estimate.physics.FEATURES`.
        memory_gb: Per-GPU memory in GB (empty when the fit was not checked).
        warnings: Caveats of the estimate (variant config used, KV cache at a task-default
            prompt length that may not fit).
    """

    spec: ArchitectureSpec
    prof: ModelProfile
    gpu: GpuSpec
    features: dict[str, float]
    memory_gb: dict[str, float]
    warnings: tuple[str, ...]


def prepare_config(
    model: str,
    gpu: str | GpuSpec,
    workload: Workload,
    precision: str | None = None,
    configs_dir: str | Path | None = None,
    check_fit: bool = True,
) -> Prepared:
    """Resolve, validate, check the memory fit of and featurise one configuration.

    Raises:
        UserError: Any invalid input, naming the field, or a configuration that does not fit.
    """
    resolved = resolve_model_config(model, configs_dir)
    spec = resolved.spec
    prec = weight_precision(resolved.fp8, precision, spec.quant_method)
    gpu_spec = resolve_gpu(gpu)
    check_workload(workload, spec, gpu_spec)
    prof = _profile(spec, prec)
    warnings = [resolved.note] if resolved.note else []
    memory: dict[str, float] = {}
    if check_fit:
        memory, warning = check_memory(spec, prof, gpu_spec, workload)
        warnings += [warning] if warning else []
    feat = feature_row(prof, gpu_spec, workload)
    return Prepared(spec, prof, gpu_spec, feat, memory, tuple(warnings))


def prepare(
    model: str,
    gpu: str | GpuSpec,
    workload: Workload,
    precision: str | None = None,
    configs_dir: str | Path | None = None,
    check_fit: bool = True,
) -> tuple[ArchitectureSpec, ModelProfile, GpuSpec, dict[str, float]]:
    """:func:`prepare_config` as a tuple ``(spec, profile, gpu, features)``.

    Raises:
        UserError: Any invalid input, naming the field, or a configuration that does not fit.
    """
    p = prepare_config(model, gpu, workload, precision, configs_dir, check_fit)
    return p.spec, p.prof, p.gpu, p.features


_PROFILE_CACHE: dict[tuple[ArchitectureSpec, str], ModelProfile] = {}


def _profile(spec: ArchitectureSpec, precision: str) -> ModelProfile:
    key = (spec, precision)
    prof = _PROFILE_CACHE.get(key)
    if prof is None:
        prof = build_profile(spec, precision)
        _PROFILE_CACHE[key] = prof
    return prof
