"""The accelerators a submission may name: the GPU catalog, plus entries a maintainer adds.

The submission rules take every physical limit from here, never from the record: a record's
own ``accelerator_tdp_w`` is a claim, the catalog is the reference. The catalog is the one GPU
catalog of :mod:`mlenergy.reference.gpus` (its override ``$MLENERGY_CATALOG_DIR`` included),
whose one matcher resolves a record's name; a maintainer admits a GPU that is not in it by
adding an entry of the same shape to ``<data_dir>/submissions/gpus.json``::

    {"gpus": [{"name": "MI325X", "tdp_w": 1000, "bf16_tflops": 1307.4,
               "fp8_tflops": 2614.9, "aliases": ["AMD Instinct MI325X"]}]}

Maintainer entries match case- and punctuation-blind, on the name and its aliases. Names are
never read as paths.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlenergy.errors import StoreError
from mlenergy.reference.gpus import GpuSpec, find_gpu
from mlenergy.reference.precisions import TENSOR_CORES, tensor_cores

MAINTAINER_FILE = "gpus.json"
"""File name, under ``<data_dir>/submissions/``, of the GPUs a maintainer admits."""


@dataclass(frozen=True)
class GpuFacts:
    """Datasheet figures the rules need for one accelerator.

    Attributes:
        name: Catalog name.
        tdp_w: Board power (TDP) of one device in watts.
        peak_tflops: Dense tensor peak in TFLOP/s per precision family (``bf16``, ``fp8``,
            ``fp4``), only those the device has.
        source: Where the entry came from (``catalog`` or the maintainer file's path).
    """

    name: str
    tdp_w: float
    peak_tflops: Mapping[str, float]
    source: str = "catalog"

    def peak_for(self, dtype: str | None) -> float | None:
        """Highest dense TFLOP/s a model in weight ``dtype`` could reach (``None``: unknown).

        A precision may use its own format's tensor cores and any wider one (FP8 weights FP8
        or BF16 ones; :data:`~mlenergy.reference.precisions.TENSOR_CORES`); an unknown dtype
        is granted the device's highest peak, so the floor built on it stays a floor.
        """
        cores = tensor_cores(dtype)  # the precision vocabulary's reading of the spelling
        order = TENSOR_CORES[: TENSOR_CORES.index(cores) + 1] if cores else TENSOR_CORES
        found = [self.peak_tflops[k] for k in order if k in self.peak_tflops]
        return max(found) if found else None


GpuLookup = Callable[[str], "GpuFacts | float | None"]
"""Maps an accelerator name to its :class:`GpuFacts` (or only its TDP in watts, or ``None``)."""


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number > 0 else None


def _entries(data: Any, source: str) -> Iterable[tuple[GpuFacts, tuple[str, ...]]]:
    gpus = data.get("gpus") if isinstance(data, Mapping) else None
    for entry in gpus if isinstance(gpus, list) else ():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            continue
        tdp = _positive(entry.get("tdp_w"))
        if tdp is None:
            continue
        peaks = {
            key: value
            for key in ("bf16", "fp8", "fp4")
            if (value := _positive(entry.get(f"{key}_tflops"))) is not None
        }
        aliases = tuple(a for a in entry.get("aliases") or () if isinstance(a, str))
        yield GpuFacts(entry["name"], tdp, peaks, source), aliases


def catalog_facts(spec: GpuSpec) -> GpuFacts:
    """The rules' figures of a catalog GPU."""
    figures = {"bf16": spec.bf16_tflops, "fp8": spec.fp8_tflops, "fp4": spec.fp4_tflops}
    peaks = {key: v for key, value in figures.items() if (v := _positive(value)) is not None}
    return GpuFacts(spec.name, spec.tdp_w, peaks, "catalog")


def _index(entries: Iterable[tuple[GpuFacts, tuple[str, ...]]]) -> dict[str, GpuFacts]:
    out: dict[str, GpuFacts] = {}
    for facts, aliases in entries:
        for name in (facts.name, *aliases):
            out.setdefault(_norm(name), facts)
    return out


def _maintainer_index(path: Path) -> dict[str, GpuFacts]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreError(
            f"the maintainer's GPU list {path} is unreadable ({exc})",
            'fix it: {"gpus": [{"name": ..., "tdp_w": ..., "bf16_tflops": ...}]}',
        ) from exc
    return _index(_entries(data, str(path)))


def gpu_lookup(submissions_dir: Path | None = None) -> Callable[[str], GpuFacts | None]:
    """The lookup the rules use: the catalog (its one matcher), then the maintainer's additions.

    Args:
        submissions_dir: The queue folder whose ``gpus.json`` lists admitted GPUs (``None``:
            the catalog alone).
    """
    extra = _maintainer_index(submissions_dir / MAINTAINER_FILE) if submissions_dir else {}

    def lookup(name: str) -> GpuFacts | None:
        spec = find_gpu(name)
        if spec is not None:
            return catalog_facts(spec)
        key = _norm(name or "")
        return extra.get(key) if key else None

    return lookup


def as_facts(name: str, found: GpuFacts | float | None) -> GpuFacts | None:
    """Normalise what a lookup returned: a bare TDP becomes facts without peak figures."""
    if found is None or isinstance(found, GpuFacts):
        return found
    tdp = _positive(found)
    return GpuFacts(name, tdp, {}, "lookup") if tdp is not None else None
