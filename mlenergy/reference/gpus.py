"""The GPU catalog and the one matcher of GPU names: datasheet figures by name, alias or file.

The shipped catalog (``gpu_catalog.json`` in the reference folder, see its row in
``SOURCES.md``) holds vendor datasheet figures (dense tensor figures, no sparsity) and every
name each GPU goes by; ``$MLENERGY_CATALOG_DIR/gpu_catalog.json`` replaces it
(:func:`mlenergy.reference.catalog_file`). The estimator, the store's submission rules, the
importers, the reference readers, the planners and the leaderboard all resolve names here
(:func:`find_gpu`, :func:`resolve_gpu`). A hypothetical chip is described by a YAML or JSON
file with the same keys; only ``memory_gb``, ``memory_bandwidth_tb_s``, ``tdp_w`` and
``bf16_tflops`` are required.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from mlenergy.errors import UserError
from mlenergy.reference import PACKAGE_DIR, catalog_file
from mlenergy.reference.precisions import tensor_cores

CATALOG_FILE = "gpu_catalog.json"
"""File name of the GPU catalog (shipped in the reference folder, or the override's)."""

REQUIRED_FIELDS = ("memory_gb", "memory_bandwidth_tb_s", "tdp_w", "bf16_tflops")
NUMERIC_FIELDS = (
    *REQUIRED_FIELDS,
    "fp32_tflops",
    "tf32_tflops",
    "fp8_tflops",
    "fp4_tflops",
    "max_sm_clock_mhz",
    "min_sm_clock_mhz",
    "spec_clock_mhz",
    "idle_power_w",
    "interconnect_gb_s",
    "sm_count",
)
"""Fields that must be positive numbers when given (optional ones may be left out or null)."""


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet figures of one accelerator.

    Attributes:
        name: Catalog name (e.g. ``H100-SXM5-80GB``) or the spec file's ``name``.
        memory_gb: Device memory in GB.
        memory_bandwidth_tb_s: Peak memory bandwidth in TB/s.
        tdp_w: Board power limit (TDP) in watts.
        bf16_tflops: Dense BF16/FP16 tensor peak in TFLOP/s at ``spec_clock_mhz``.
        fp8_tflops: Dense FP8 peak in TFLOP/s (``None``: no FP8 tensor cores).
        fp4_tflops: Dense FP4 peak in TFLOP/s (``None``: no FP4 tensor cores).
        max_sm_clock_mhz: Highest SM clock in MHz.
        min_sm_clock_mhz: Lowest settable SM clock in MHz (``None``: unknown).
        spec_clock_mhz: SM clock at which the TFLOP/s figures hold.
        idle_power_w: Measured idle power in watts. ``None`` in a spec: taken from a catalog GPU
            of the same vendor and architecture that has a measured figure, as the same
            fraction of TDP (an H200 idles like the H100 it shares its die with); with no such
            sibling it stays ``None`` and the estimator uses its fitted fraction of TDP.
        interconnect_gb_s: Per-GPU GPU-to-GPU bandwidth in GB/s (NVLink, Infinity Fabric, PCIe).
        vendor: Vendor name.
        architecture: Micro-architecture name.
        sm_count: Streaming multiprocessors (compute units).
        aliases: Other names that resolve to this entry.
        memory_type: Memory technology (``HBM3``, ``GDDR6``...), when known.
        fp32_tflops: FP32 (non-tensor) peak in TFLOP/s, when known.
        tf32_tflops: Dense TF32 tensor peak in TFLOP/s, when known.
        notes: Where a figure came from or what it assumes.
    """

    name: str
    memory_gb: float
    memory_bandwidth_tb_s: float
    tdp_w: float
    bf16_tflops: float
    fp8_tflops: float | None = None
    fp4_tflops: float | None = None
    max_sm_clock_mhz: float = 1980.0
    min_sm_clock_mhz: float | None = None
    spec_clock_mhz: float | None = None
    idle_power_w: float | None = None
    interconnect_gb_s: float = 32.0
    vendor: str = "unknown"
    architecture: str = "unknown"
    sm_count: int | None = None
    aliases: tuple[str, ...] = field(default=(), compare=False)
    memory_type: str | None = None
    fp32_tflops: float | None = None
    tf32_tflops: float | None = None
    notes: str = field(default="", compare=False)

    @property
    def clock_at_spec_mhz(self) -> float:
        """SM clock (MHz) at which the peak TFLOP/s figures hold."""
        return self.spec_clock_mhz or self.max_sm_clock_mhz

    def peak_tflops(self, precision: str) -> float:
        """Dense tensor peak (TFLOP/s) for matmuls with weights in ``precision``.

        Weights without native tensor-core support are dequantised and multiplied at BF16 rate.
        """
        cores = tensor_cores(precision)
        if cores == "fp4" and self.fp4_tflops:
            return self.fp4_tflops
        if cores == "fp8" and self.fp8_tflops:
            return self.fp8_tflops
        return self.bf16_tflops

    def native(self, precision: str) -> bool:
        """True when the tensor cores multiply weights in ``precision`` natively.

        A scaled low-precision format without its own datasheet peak (FP8 on Ampere, MXFP4 /
        NVFP4 before Blackwell) runs weight-only kernels that dequantise to BF16 in registers.
        """
        cores = tensor_cores(precision)
        if cores == "fp4":
            return bool(self.fp4_tflops)
        if cores == "fp8":
            return bool(self.fp8_tflops)
        return True

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-compatible)."""
        data = asdict(self)
        data["aliases"] = list(self.aliases)
        return data


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def catalog_path() -> Path:
    """The GPU catalog file read now: the override folder's when it has one, else shipped."""
    return catalog_file(CATALOG_FILE)


def _catalog() -> tuple[dict[str, GpuSpec], dict[str, str]]:
    """The GPU catalog by name, and every spelling's name (the current file)."""
    return _catalog_of(catalog_path())


@cache
def read_catalog_file(path: Path) -> dict[str, Any]:
    """A GPU catalog file parsed and checked (cached per path).

    Raises:
        UserError: The file is not valid JSON or lacks the ``gpus`` list.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read the gpus catalog {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        raise UserError(
            f"the gpus catalog {path} lacks gpus",
            f"Start from the shipped {PACKAGE_DIR / CATALOG_FILE}",
        )
    return data


@cache
def _catalog_of(path: Path) -> tuple[dict[str, GpuSpec], dict[str, str]]:
    raw = read_catalog_file(path)
    by_name: dict[str, GpuSpec] = {}
    alias: dict[str, str] = {}
    specs = [_from_mapping(entry, source="catalog") for entry in raw["gpus"]]
    for spec in specs:
        spec = with_sibling_idle(spec, specs)
        by_name[spec.name] = spec
        alias[_norm(spec.name)] = spec.name
        for a in spec.aliases:
            alias[_norm(a)] = spec.name
    return by_name, alias


def with_sibling_idle(spec: GpuSpec, known: list[GpuSpec]) -> GpuSpec:
    """Fill a missing idle power from a GPU of the same vendor and architecture.

    Static power is a property of the die and its process, so a sibling's measured idle
    power, as a fraction of its TDP, is a better guess than one fraction fitted across
    generations. Returns ``spec`` unchanged when it has an idle figure or no sibling has one.

    Args:
        spec: The GPU to complete.
        known: Candidate siblings (the shipped catalog).
    """
    if spec.idle_power_w is not None or spec.architecture == "unknown":
        return spec
    for other in known:
        if (
            other.idle_power_w is not None
            and other.vendor == spec.vendor
            and other.architecture == spec.architecture
        ):
            idle = other.idle_power_w / other.tdp_w * spec.tdp_w
            return replace(spec, idle_power_w=round(idle, 1))
    return spec


def catalog_names() -> list[str]:
    """Names of the GPUs in the shipped catalog."""
    return list(_catalog()[0])


def _from_mapping(data: dict[str, Any], source: str) -> GpuSpec:
    missing = [k for k in REQUIRED_FIELDS if data.get(k) in (None, "")]
    if missing:
        raise UserError(
            f"GPU spec {source} is missing required field '{missing[0]}'",
            "Give memory_gb, memory_bandwidth_tb_s, tdp_w and bf16_tflops",
        )
    known = set(GpuSpec.__dataclass_fields__)
    unknown = sorted(set(data) - known)
    if unknown:
        raise UserError(
            f"GPU spec {source} has unknown field '{unknown[0]}'",
            f"Use only: {', '.join(sorted(known))}",
        )
    kw = dict(data)
    kw.setdefault("name", Path(source).stem)
    for key in ("name", "vendor", "architecture", "memory_type", "notes"):
        if key in kw and kw[key] is not None and not isinstance(kw[key], str):
            raise UserError(f"GPU spec {source} field '{key}' must be text, got {kw[key]!r}")
    for key in ("memory_type", "notes"):
        if kw.get(key) is None:
            kw.pop(key, None)  # optional: the dataclass default
    for key in NUMERIC_FIELDS:
        if kw.get(key) is None:
            if key not in REQUIRED_FIELDS:
                kw.pop(key, None)  # optional: the dataclass default
            continue
        raw = kw[key]
        try:
            if isinstance(raw, bool):
                raise TypeError
            value = float(raw)
        except (TypeError, ValueError):
            raise UserError(
                f"GPU spec {source} field '{key}' must be a number, got {raw!r}"
            ) from None
        if not math.isfinite(value) or value <= 0:
            raise UserError(
                f"GPU spec {source} field '{key}' must be a positive number, got {raw!r}"
            )
        kw[key] = int(value) if key == "sm_count" else value
    if kw.get("max_sm_clock_mhz") is None:
        if kw.get("spec_clock_mhz") is None:
            raise UserError(
                f"GPU spec {source} gives no SM clock (field 'max_sm_clock_mhz')",
                "Add max_sm_clock_mhz (the datasheet's boost clock in MHz) and, if the TFLOP/s "
                "figures hold at another clock, spec_clock_mhz",
            )
        kw["max_sm_clock_mhz"] = kw["spec_clock_mhz"]  # the rated clock is the highest known
    lo, hi = kw.get("min_sm_clock_mhz"), kw["max_sm_clock_mhz"]
    if lo is not None and lo > hi:
        raise UserError(
            f"GPU spec {source} field 'min_sm_clock_mhz' ({lo:g}) exceeds max_sm_clock_mhz ({hi:g})"
        )
    aliases = kw.get("aliases") or ()
    if isinstance(aliases, str):
        aliases = (aliases,)
    if not isinstance(aliases, list | tuple):
        raise UserError(f"GPU spec {source} field 'aliases' must be a list of names")
    kw["aliases"] = tuple(str(a) for a in aliases)
    return GpuSpec(**kw)


def load_gpu_spec_file(path: str | Path) -> GpuSpec:
    """Read a hypothetical GPU from a YAML or JSON file with :class:`GpuSpec` keys."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"GPU spec file '{p}' does not exist", "Check the --gpu path")
    text = p.read_text()
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(
                f"GPU spec file '{p}' is not valid JSON ({exc.msg} at line {exc.lineno})",
                "Fix the file's syntax",
            ) from None
    else:
        # lazy: PyYAML (~25 ms at start-up) only for a maintainer file in YAML
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise UserError(
                f"GPU spec file '{p}' is not valid YAML{where}", "Fix the file's syntax"
            ) from None
    if not isinstance(data, dict):
        raise UserError(f"GPU spec file '{p}' must hold a mapping of fields")
    return with_sibling_idle(_from_mapping(data, source=str(p)), list(_catalog()[0].values()))


_VENDOR_WORDS = re.compile(r"nvidia|amd|geforce|instinct|tesla|hbm\d?e?|sxm\d?")
"""Words that do not tell catalog GPUs apart (vendor, brand, memory type, SXM generation)."""
_OTHER_FORM = re.compile(r"pcie|nvl|\bgh|\bgb\d")
"""Form factors and superchips absent from the catalog (another TDP, clocks or memory)."""


def _core(name: str) -> str:
    """A GPU name without memory size, vendor, brand, memory-type and SXM-generation words."""
    return _norm(_VENDOR_WORDS.sub("", re.sub(r"\d+\s*gb", "", name.lower())))


def _match_spelling(text: str, by_name: dict[str, GpuSpec]) -> str | None:
    """The catalog GPU a differently spelt name means, if exactly one (else ``None``).

    Compares names without vendor, brand, memory-type and SXM-generation words
    (``NVIDIA H200-SXM5-141GB`` means ``H200-SXM-141GB``). A memory size in GB, when given,
    must be within 10% of the entry's (datasheets quote 180 or 192 GB for a B200); without one
    a family name means its catalog default (the entry whose alias it is, ``A100`` -> 80 GB).
    Names of another form factor (PCIe, NVL) or a superchip (GH200, GB200) never match.
    """
    low = text.lower()
    core = _core(text)
    if not core or _OTHER_FORM.search(low):
        return None
    hits = {
        spec.name
        for spec in by_name.values()
        if any(_core(n) == core for n in (spec.name, *spec.aliases))
    }
    mem = re.search(r"(\d+)\s*gb", low)
    if mem:
        size = float(mem.group(1))
        hits = {h for h in hits if abs(by_name[h].memory_gb - size) <= 0.1 * size}
    elif len(hits) > 1:
        hits = {
            spec.name
            for spec in by_name.values()
            if spec.name in hits and any(_norm(a) == core for a in spec.aliases)
        }
    return hits.pop() if len(hits) == 1 else None


def find_gpu(name: str | None) -> GpuSpec | None:
    """The catalog GPU a name means, or ``None``: the one matcher of GPU names.

    Names match case- and punctuation-blind on the name and its aliases, then without vendor,
    brand, memory-type or SXM-generation words (see :func:`_match_spelling`). Never reads a
    file: names in records and submitted files are not trusted as paths.

    Args:
        name: Accelerator name as a tool or a record wrote it (``"NVIDIA H100 80GB HBM3"``).
    """
    text = (name or "").strip()
    if not text:
        return None
    by_name, alias = _catalog()
    key = alias.get(_norm(text)) or _match_spelling(text, by_name)
    return by_name[key] if key else None


def catalog_name(name: str) -> str:
    """The catalog's name of a GPU name (``H100`` -> ``H100-SXM5-80GB``), else the name given.

    The name is the given one when it matches no catalog GPU (:func:`find_gpu`).
    """
    spec = find_gpu(name)
    return spec.name if spec is not None else name


def resolve_gpu(name_or_path: str | GpuSpec) -> GpuSpec:
    """Return the spec for a catalog name, an alias or a YAML/JSON spec file path.

    Names go through :func:`find_gpu`; a text ending in ``.yaml``, ``.yml`` or ``.json``, or
    naming an existing file, is read as a spec file (unless it is a catalog name).

    Raises:
        UserError: Unknown name (lists the catalog) or a bad spec file.
    """
    if isinstance(name_or_path, GpuSpec):
        return name_or_path
    text = str(name_or_path).strip()
    by_name, alias = _catalog()
    spec_file = text.lower().endswith((".yaml", ".yml", ".json"))
    key = alias.get(_norm(text))
    if key:
        return by_name[key]
    found = None if spec_file else find_gpu(text)
    if found is not None:
        return found
    if spec_file or Path(text).is_file():
        return load_gpu_spec_file(text)
    raise UserError(
        f"unknown gpu '{text}'",
        f"Use one of {', '.join(by_name)} or a YAML spec file",
    )
