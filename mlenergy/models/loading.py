"""Load a model for a benchmark: a preset, a hub id, a local folder, a config.json or a config.

Real weights come from the Hugging Face Hub or a local folder with a checkpoint; everything else
(a preset, a ``config.json``, a folder with only a config, a ``PretrainedConfig`` object) is
built with random weights from a fixed seed. Bad sources raise :class:`~mlenergy.errors.UserError`
with a one-line fix; an unreachable hub fails within seconds rather than after long retries.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from mlenergy.errors import UserError, first_line
from mlenergy.models.config_file import (
    config_file_model_id,
    config_from_json,
    field_error,
    read_json_object,
)
from mlenergy.models.info import model_info_from_config, parameter_counts
from mlenergy.models.presets import PRESET_PREFIX, PRESETS, preset_config
from mlenergy.records import ModelInfo
from mlenergy.reference.precisions import precision

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedModel

SourceKind = Literal["preset", "hub", "local_dir", "config_file", "config"]

_WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth")
_SOURCE_FIX = "Use preset:<name> (" + ", ".join(PRESETS) + "), a local path, or a config.json"


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from, parsed from a user string.

    Attributes:
        kind: ``preset``, ``hub``, ``local_dir``, ``config_file`` or ``config`` (an object).
        value: Preset name, hub id or path (empty for a config object).
    """

    kind: SourceKind
    value: str

    @classmethod
    def parse(cls, source: str | os.PathLike[str]) -> ModelSource:
        """Classify a model source string.

        Args:
            source: ``preset:<name>``, a hub id (``org/name``), a folder, or a ``.json`` path.

        Raises:
            UserError: If the string is empty, names a missing file, or an unknown preset.
        """
        text = str(source).strip()
        if not text:
            raise UserError("empty model source", _SOURCE_FIX)
        if text.startswith(PRESET_PREFIX):
            name = text.removeprefix(PRESET_PREFIX)
            preset_config(name)  # validates the name
            return cls("preset", name)
        path = Path(text).expanduser()
        if path.is_dir():
            return cls("local_dir", str(path))
        if path.is_file():
            return cls("config_file", str(path))
        looks_like_path = (
            text.endswith(".json") or text.startswith((".", "/", "~")) or text.count("/") > 1
        )
        if looks_like_path:
            raise UserError(
                f"model path {text!r} does not exist",
                "Check the path, or u" + _SOURCE_FIX[1:],
            )
        return cls("hub", text)


@dataclass
class LoadedModel:
    """A model ready to run.

    Attributes:
        model: The ``torch.nn.Module`` (causal LM), in eval mode, on ``device``.
        config: Its ``transformers`` config.
        tokenizer: Its tokenizer, or ``None`` (presets and config-only models have none).
        info: The record description (fingerprint, parameter counts, dtype, weights).
        model_id: The id recorded for the model (``preset:<name>``, hub id,
            ``config:<name>@<fingerprint>`` or a checkpoint folder's path).
        source: The parsed source.
        dtype: Canonical dtype name (``float32``, ``float16``, ``bfloat16``).
        device: Torch device string the model lives on.
    """

    model: torch.nn.Module
    config: PretrainedConfig
    tokenizer: Any
    info: ModelInfo
    model_id: str
    source: ModelSource
    dtype: str
    device: str

    @property
    def vocab_size(self) -> int:
        """Number of token ids the model accepts."""
        return int(self.config.get_text_config().vocab_size)


def canonical_dtype(dtype: str) -> str:
    """Return the canonical dtype name for a user spelling that torch loads a model in.

    Spellings are the precision vocabulary's (:mod:`mlenergy.reference.precisions`):
    ``bf16``, ``torch.float16``, ``half``, ``fp32``...

    Raises:
        UserError: If the dtype is not supported.
    """
    found = precision(str(dtype))  # the precision vocabulary reads the spelling
    if found is None or not found.torch:
        raise UserError(f"unsupported dtype {dtype!r}", "Use one of float32, float16, bfloat16")
    return found.name


def check_device(device: str) -> str:
    """Validate a torch device string and that the device exists here.

    Raises:
        UserError: If the string is malformed or the device is absent.
    """
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise UserError(
            f"invalid device {device!r} ({first_line(exc, 300)})", "Use cpu, cuda or cuda:<index>"
        ) from exc
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise UserError(
                f"device {device!r} requested but no CUDA GPU is available", "Use --device cpu"
            )
        if dev.index is not None and dev.index >= count:
            raise UserError(
                f"device {device!r} requested but only {count} CUDA GPU(s) exist",
                f"Use cuda:0 to cuda:{count - 1}",
            )
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise UserError(f"device {device!r} requested but MPS is unavailable", "Use --device cpu")
    return str(dev)


def _check_fits_in_memory(config: PretrainedConfig, dtype: str, origin: str) -> None:
    """Refuse to build random weights that cannot fit in host memory."""
    # lazy: psutil (~60 ms at start-up) only when random weights are built
    import psutil

    try:
        total, _ = parameter_counts(config)
    except Exception:  # not buildable as a causal LM: build_random reports it
        return
    bytes_per = 4 if dtype == "float32" else 2
    need = total * bytes_per
    have = psutil.virtual_memory().available
    if need > 0.8 * have:
        raise UserError(
            f"model {origin!r} has {total / 1e9:.2f}B parameters ({need / 2**30:.1f} GiB in "
            f"{dtype}) but only {have / 2**30:.1f} GiB of memory is free",
            "Use a smaller config (fewer layers, smaller hidden size) or a preset",
        )


def _to_torch_dtype(dtype: str) -> torch.dtype:
    import torch

    return getattr(torch, dtype)


def check_buildable(config: PretrainedConfig, dtype: str, origin: str) -> None:
    """Check, without allocating weights, that ``config`` builds a causal LM that fits in memory.

    Raises:
        UserError: If the architecture has no causal-LM class or is too large for free memory.
    """
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING

    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING:
        raise UserError(
            f"cannot build a causal language model from {origin!r} "
            f"(model_type {config.model_type!r} has no causal-LM class)",
            "Use a decoder-only architecture config (llama, mixtral, qwen3_moe, deepseek_v3...)",
        )
    _check_fits_in_memory(config, canonical_dtype(dtype), origin)


def build_random(
    config: PretrainedConfig, dtype: str, device: str, seed: int, origin: str
) -> torch.nn.Module:
    """Build a causal LM with random weights from ``config`` with a fixed seed.

    Raises:
        UserError: If the architecture has no causal-LM class or the model does not fit.
    """
    import torch
    from transformers import AutoModelForCausalLM

    check_buildable(config, dtype, origin)
    torch.manual_seed(seed)
    try:
        model = AutoModelForCausalLM.from_config(config)
    except TypeError as exc:  # e.g. a string where the config needs a number
        raise UserError(
            f"cannot build a model from {origin!r}: a config value has the wrong type "
            f"({first_line(exc, 300)})",
            "Check the config.json's values (numbers where numbers are expected)",
        ) from exc
    except ValueError as exc:
        raise UserError(
            f"cannot build a causal language model from {origin!r} ({first_line(exc, 300)})",
            "Use a decoder-only architecture config (llama, mixtral, qwen3_moe, deepseek_v3...)",
        ) from exc
    return model.to(device=device, dtype=_to_torch_dtype(dtype)).eval()


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether the Hugging Face Hub endpoint answers a TCP connection within ``timeout_s``.

    Honours ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` (then always ``False``).
    """
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return False
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    parsed = urlparse(endpoint)
    host = parsed.hostname or "huggingface.co"
    port = parsed.port or (443 if parsed.scheme != "http" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _pretrained_error(name: str, exc: BaseException, action: str, folder_fix: str) -> UserError:
    """The error for a failed ``from_pretrained(name)``: a local folder's fault, else the Hub's.

    Args:
        name: Local folder or Hub id passed to ``from_pretrained``.
        exc: What ``from_pretrained`` raised.
        action: What failed, for a local folder (e.g. ``"read the model config"``).
        folder_fix: How to fix a local folder.
    """
    if Path(name).exists():
        return UserError(f"could not {action} in {name!r} ({first_line(exc, 300)})", folder_fix)
    return UserError(
        f"could not load {name!r} from the Hugging Face Hub (no network or unknown id)",
        _SOURCE_FIX,
    )


def _pretrained_config(name: str, local_files_only: bool) -> PretrainedConfig:
    from huggingface_hub.errors import StrictDataclassError
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(name, local_files_only=local_files_only)
    except StrictDataclassError as exc:
        raise field_error(name, exc) from exc
    except (OSError, ValueError) as exc:
        raise _pretrained_error(
            name, exc, "read the model config", "Check that the folder holds a valid config.json"
        ) from exc


def _load_pretrained(
    name: str, dtype: str, device: str, local_files_only: bool
) -> tuple[PreTrainedModel, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(
            name, local_files_only=local_files_only, dtype=_to_torch_dtype(dtype)
        )
    except (OSError, ValueError) as exc:
        raise _pretrained_error(
            name,
            exc,
            "load the model weights",
            "Check that the folder holds a config.json and its weights",
        ) from exc
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=local_files_only)
    except Exception:  # a checkpoint without a tokenizer still benchmarks on synthetic ids
        tokenizer = None
    # transformers wraps Module.to with functools.wraps, which mypy reads as an unbound method
    return model.to(device).eval(), tokenizer  # type: ignore[arg-type]


@dataclass(frozen=True)
class ResolvedSource:
    """A model source whose config has been read (no weights loaded yet).

    Attributes:
        source: The parsed source.
        config: The model config.
        model_id: The id to record.
        pretrained: Whether real weights will be loaded (hub or a folder with a checkpoint).
        local_files_only: For pretrained sources: read only the local cache (hub unreachable).
    """

    source: ModelSource
    config: PretrainedConfig
    model_id: str
    pretrained: bool
    local_files_only: bool = True


def _config_file_source(src: ModelSource, path: Path) -> ResolvedSource:
    """A config.json to build with random weights, recorded under its name and fingerprint."""
    data = read_json_object(path)
    config = config_from_json(data, str(path))
    return ResolvedSource(src, config, config_file_model_id(path, data, config), False)


def resolve_source(source: str | os.PathLike[str] | PretrainedConfig) -> ResolvedSource:
    """Parse a model source and read its config, without loading weights.

    Cheap enough to validate every ``--model`` of a command before anything runs.

    Raises:
        UserError: For an unknown preset, a missing or malformed path or config, or a hub id
            that cannot be resolved (no network or unknown id).
    """
    from transformers import PretrainedConfig

    if isinstance(source, PretrainedConfig):
        return ResolvedSource(
            ModelSource("config", ""), source, f"config:{source.model_type or 'unknown'}", False
        )
    src = ModelSource.parse(source)
    if src.kind == "preset":
        return ResolvedSource(src, preset_config(src.value), PRESETS[src.value].model_id, False)
    if src.kind == "config_file":
        return _config_file_source(src, Path(src.value))
    if src.kind == "local_dir":
        folder = Path(src.value)
        if not (folder / "config.json").is_file():
            raise UserError(
                f"folder {src.value!r} has no config.json",
                "Point --model at a Hugging Face model folder or a config.json file",
            )
        if any(any(folder.glob(p)) for p in _WEIGHT_PATTERNS):
            return ResolvedSource(src, _pretrained_config(src.value, True), src.value, True, True)
        return _config_file_source(src, folder / "config.json")
    offline = not hub_reachable()
    config = _pretrained_config(src.value, offline)
    return ResolvedSource(src, config, src.value, True, offline)


def load_model(
    source: str | os.PathLike[str] | PretrainedConfig | ResolvedSource,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
    *,
    model_id: str | None = None,
) -> LoadedModel:
    """Load or build a causal language model.

    Args:
        source: ``preset:<name>``; a hub id (real weights, cached or downloaded); a local
            folder (real weights if it holds a checkpoint, else random from its config.json);
            a path to a ``config.json`` (random weights); a ``PretrainedConfig`` object
            (random weights); or a :class:`ResolvedSource` from :func:`resolve_source`.
        dtype: ``float32``, ``float16`` or ``bfloat16``.
        device: Torch device string (``cpu``, ``cuda``, ``cuda:1``).
        seed: Seed of the random weights.
        model_id: Id to record instead of the default (``preset:<name>``, the hub id, the
            checkpoint folder's path, ``config:<name>@<fingerprint>`` for a config file, or
            ``config:<model_type>`` for a config object).

    Returns:
        The loaded model with its config, tokenizer (or ``None``) and record description.

    Raises:
        UserError: For an unknown preset, a missing or malformed path, a hub id that cannot be
            loaded (no network or unknown id), a bad dtype or device, or a model too large.
    """
    dtype = canonical_dtype(dtype)
    device = check_device(device)
    resolved = source if isinstance(source, ResolvedSource) else resolve_source(source)
    config = resolved.config
    tokenizer = None
    model: torch.nn.Module
    if resolved.pretrained:
        pretrained, tokenizer = _load_pretrained(
            resolved.source.value, dtype, device, resolved.local_files_only
        )
        model, config = pretrained, pretrained.config
        weights: Literal["pretrained", "random"] = "pretrained"
    else:
        model = build_random(config, dtype, device, seed, resolved.model_id)
        weights = "random"
    recorded_id = model_id or resolved.model_id
    info = model_info_from_config(config, recorded_id, dtype, weights, model=model)
    return LoadedModel(
        model=model,
        config=config,
        tokenizer=tokenizer,
        info=info,
        model_id=recorded_id,
        source=resolved.source,
        dtype=dtype,
        device=device,
    )
