"""Resolve a model (a ``config.json`` path or a model id) to its architecture.

The one resolution rule of every estimator path: an id is looked up under a configs folder
as ``<org>__<name>.json``, else as a variant with the same text architecture; a trailing
``-FP8`` selects the base model's config with FP8 weights.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from mlenergy.errors import UserError
from mlenergy.estimate.registry import read_catalog
from mlenergy.models.architecture import ArchitectureSpec
from mlenergy.reference import default_configs_dir


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
_FP8 = read_catalog("families")["fp8"]
FP8_SUFFIX = str(_FP8["suffix"])
"""The end of a model id that asks for fp8 weights (``model_families.json``)."""
BF16_ATTENTION_FP8_ORGS = frozenset(o.lower() for o in _FP8["bf16_attention_orgs"])
"""Organisations whose ``-FP8`` checkpoints quantise only the feed-forward layers (self-attention
in BF16; ``model_families.json`` says why). A config that carries its own
``quantization_config`` says so itself
(:attr:`~mlenergy.models.architecture.ArchitectureSpec.bf16_attention`)."""
EPILOGUE_SCALED_FP8_ORGS = frozenset(o.lower() for o in _FP8["epilogue_scaled_orgs"])
"""Organisations whose ``-FP8`` checkpoints scale weights per tensor or per output channel
(applied once, in the matmul's epilogue); any other organisation's are taken as block-scaled
(128 x 128, applied in the main loop)."""
BLOCK_SCALED_FP8_ORGS = frozenset(o.lower() for o in _FP8["block_scaled_orgs"])
"""Organisations whose ``-FP8`` checkpoints are known to be 128 x 128 block-scaled fp8 with
every linear layer quantised; an ``-FP8`` id of an organisation in none of these lists is
estimated the same way, with a warning."""


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


def close_model_ids(model_id: str, folder: Path, limit: int = 3) -> list[str]:
    """Model ids of the configs in ``folder`` that look like ``model_id``, closest first.

    An id that a shipped id extends (``deepseek-ai/DeepSeek-R1`` for
    ``deepseek-ai/DeepSeek-R1-0528``) comes first, then :func:`difflib.get_close_matches`
    over the ids (letter case ignored); an id without an organisation is compared with the
    names alone.

    Args:
        model_id: The id that resolved to no config (``-FP8`` already removed).
        folder: Folder of ``<org>__<name>.json`` configs.
        limit: Most ids returned.
    """
    ids = [f[: -len(".json")].replace("__", "/") for f in _config_files(str(folder))]
    keyed = {(i if "/" in model_id else i.rpartition("/")[2]).lower(): i for i in ids}
    want = model_id.strip().lower()
    longer = sorted(k for k in keyed if k.startswith(want + "-") or k.startswith(want + "."))
    similar = difflib.get_close_matches(want, list(keyed), n=limit, cutoff=0.75)
    ordered = list(dict.fromkeys([*longer, *similar]))[:limit]
    return [keyed[k] for k in ordered]


def resolve_model_config(model: str, configs_dir: str | Path | None = None) -> ResolvedModel:
    """Resolve ``model`` to its config: the one resolution rule of every estimator path.

    Args:
        model: A path to a ``config.json`` (or a folder holding one), or a model id resolved
            under ``configs_dir`` by :func:`config_candidates`: ``<org>__<name>.json``, else a
            variant with the same text architecture. A trailing ``-FP8`` selects the base
            model's config with FP8 weights (self-attention in BF16 for the organisations of
            :data:`BF16_ATTENTION_FP8_ORGS`, scales per channel for those of
            :data:`EPILOGUE_SCALED_FP8_ORGS`).
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
    exact = base.replace("/", "__") + ".json"
    found = config_candidates(base, folder) if folder.is_dir() else []
    if not found:
        close = close_model_ids(base, folder) if folder.is_dir() else []
        hint = f"Did you mean {' or '.join(close)}? Else put" if close else "Put"
        raise UserError(
            f"model '{text}': no config '{exact}' in {folder}, nor one of a variant with the "
            "same architecture" + ("" if "/" in base else " under exactly one organisation"),
            f"{hint} the model's config.json there as <org>__<name>.json or pass its path"
            + ("" if "/" in base else " (or give the id as <org>/<name>)"),
        )
    path = found[0]
    note = ""
    same_name = path.stem.rpartition("__")[2].lower() == base.rpartition("/")[2].lower()
    if path.name.lower() != exact.lower():
        why = "the id has no organisation" if same_name else "variant with the same architecture"
        note = f"config {path.name} used for {base} ({why})"
    spec = _load_config(str(path.resolve()))
    org = base.partition("/")[0].lower() if "/" in base else ""
    if fp8:
        spec = replace(
            spec,
            bf16_attention=spec.bf16_attention or org in BF16_ATTENTION_FP8_ORGS,
            epilogue_scaled=spec.epilogue_scaled or org in EPILOGUE_SCALED_FP8_ORGS,
        )
    known = EPILOGUE_SCALED_FP8_ORGS | BLOCK_SCALED_FP8_ORGS
    if fp8 and org not in known:
        guess = (
            f"the fp8 format of {text} is not known: taken as 128 x 128 block-scaled with every "
            "linear layer in fp8 (pass the checkpoint's config.json to use its "
            "quantization_config)"
        )
        note = f"{note}; {guess}" if note else guess
    return ResolvedModel(spec, fp8, path, note)


def resolve_model(
    model: str, configs_dir: str | Path | None = None
) -> tuple[ArchitectureSpec, bool]:
    """Return the architecture of ``model`` and whether its id asks for FP8 weights.

    See :func:`resolve_model_config` (the resolution rule); this form drops the path and note.
    """
    r = resolve_model_config(model, configs_dir)
    return r.spec, r.fp8
