"""The precision vocabulary: every spelling of a weight precision, parsed in one place.

``precisions.json`` (next to this module) lists the precisions mlenergy knows (``float32``,
``bfloat16``, ``float16``, ``fp8``, ``mxfp4``, ``nvfp4``), each with its bytes per weight
(block scales included), whether kernels apply block scales, which datasheet tensor peak its
matmuls can use (:data:`TENSOR_CORES`), whether torch loads a model in it, and the other
spellings tools write for it (``bf16``, ``torch.float16``, ``float8_e4m3fn``...). The estimator,
the model loader, the importers and the submission rules all read spellings through
:func:`precision_name`; each decides itself what to do with one it does not know (refuse it,
keep it as written, or grant it every tensor peak).

This module imports nothing of mlenergy but its errors and the reference folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

from mlenergy.errors import UserError
from mlenergy.reference import PACKAGE_DIR

PRECISIONS_FILE = "precisions.json"
"""The vocabulary's file, shipped in the reference folder (not replaced by an override)."""

TENSOR_CORES: tuple[str, ...] = ("bf16", "fp8", "fp4")
"""Datasheet tensor peaks from the widest format to the narrowest (``GpuSpec.bf16_tflops``...).
A model in a precision may use its own format's tensor cores and any wider one."""

__all__ = [
    "TENSOR_CORES",
    "Precision",
    "precision",
    "precision_name",
    "precisions",
    "spelling",
    "tensor_cores",
]


@dataclass(frozen=True)
class Precision:
    """One weight precision of the vocabulary.

    Attributes:
        name: Canonical name (``bfloat16``, ``fp8``...), the spelling records carry.
        bytes_per_weight: Bytes per weight, block scales included.
        block_scaled: Stored with scales that kernels apply when reading weights.
        tensor_cores: The datasheet peak its matmuls can use natively (:data:`TENSOR_CORES`).
        torch: Whether torch loads a model with weights in this dtype.
        aliases: Other spellings (lower case).
    """

    name: str
    bytes_per_weight: float
    block_scaled: bool
    tensor_cores: str
    torch: bool
    aliases: tuple[str, ...] = ()


@cache
def precisions() -> dict[str, Precision]:
    """The vocabulary by canonical name, in the file's order.

    Raises:
        UserError: The shipped file is unreadable or an entry is malformed.
    """
    path = PACKAGE_DIR / PRECISIONS_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))["precisions"]
        out = {
            e["name"]: Precision(
                name=str(e["name"]),
                bytes_per_weight=float(e["bytes_per_weight"]),
                block_scaled=bool(e["block_scaled"]),
                tensor_cores=str(e["tensor_cores"]),
                torch=bool(e["torch"]),
                aliases=tuple(str(a).lower() for a in e.get("aliases", ())),
            )
            for e in raw
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"the precision vocabulary {path} is unreadable ({exc})") from exc
    bad = [p.name for p in out.values() if p.tensor_cores not in TENSOR_CORES]
    if bad:
        raise UserError(f"the precision vocabulary {path}: unknown tensor_cores for {bad[0]}")
    return out


@cache
def _by_spelling() -> dict[str, str]:
    out: dict[str, str] = {}
    for p in precisions().values():
        for key in (p.name, *p.aliases):
            out.setdefault(key, p.name)
    return out


def spelling(raw: object) -> str | None:
    """A spelling as the vocabulary compares it: stripped, lower case, no ``torch.`` prefix.

    ``None`` for a value that names no precision: not text, empty, or ``auto`` (the precision
    must come from elsewhere).
    """
    if not isinstance(raw, str):
        return None
    key = raw.strip().lower().removeprefix("torch.")
    return key if key and key != "auto" else None


def precision_name(raw: object) -> str | None:
    """The canonical name of a known spelling (``bf16`` -> ``bfloat16``), else ``None``."""
    key = spelling(raw)
    return _by_spelling().get(key) if key is not None else None


def precision(raw: object) -> Precision | None:
    """The vocabulary's entry for a spelling, or ``None`` when it names no known precision."""
    name = precision_name(raw)
    return precisions()[name] if name is not None else None


def tensor_cores(raw: object) -> str | None:
    """The tensor peak (:data:`TENSOR_CORES`) a known precision uses, else ``None``."""
    found = precision(raw)
    return found.tensor_cores if found is not None else None
