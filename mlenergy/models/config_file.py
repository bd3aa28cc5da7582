"""Read a ``config.json`` into a ``transformers`` config, strictly, and name the model it builds.

Every value is checked before ``transformers`` sees it (the same strict check the estimator
applies, :func:`~mlenergy.models.architecture.check_config_values`), so a bad field is one
:class:`~mlenergy.errors.UserError` naming it, never a traceback from deep in a library.
A model built from a config file is recorded under a name and its fingerprint
(``config:<name>@<first 8 hex digits of the config fingerprint>``), never under the path it
was given by: the same config read from two folders is one model, and two different configs
that share a file name are two.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlenergy.errors import UserError, first_line
from mlenergy.models.architecture import check_config_values
from mlenergy.models.config_fields import check_config_fields
from mlenergy.models.info import config_fingerprint

if TYPE_CHECKING:
    from transformers import PretrainedConfig

CONFIG_ID_PREFIX = "config:"
"""Prefix of the model id recorded for a model built from a config file."""
_FINGERPRINT_DIGITS = 8
_ANNOTATION_KEYS = ("model_id", "_name_or_path")
"""Keys of a config.json that may name the model it describes (reference configs use model_id)."""


def read_json_object(path: str | Path) -> dict[str, Any]:
    """Read a JSON file holding one object.

    Raises:
        UserError: If the file is unreadable, not JSON or not an object.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"cannot read config file {str(file)!r} ({first_line(exc, 300)})", "Check the path"
        ) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"malformed config file {str(file)!r}: {exc.msg} "
            f"at line {exc.lineno} column {exc.colno}",
            "Fix the JSON (a Hugging Face config.json object)",
        ) from exc
    if not isinstance(data, dict):
        raise UserError(
            f"config file {str(file)!r} holds a JSON {type(data).__name__}, not an object",
            "Give a Hugging Face config.json (a JSON object with model_type)",
        )
    return data


def config_from_json(data: dict[str, Any], origin: str) -> PretrainedConfig:
    """Check a parsed ``config.json`` strictly and build its ``transformers`` config.

    Raises:
        UserError: A count field is not a whole number, a size is missing, the
            ``model_type`` is unknown, or ``transformers`` refuses a value (field named).
    """
    try:
        check_config_values(data)
    except UserError as exc:
        raise UserError(f"config {origin!r}: {exc.problem}", exc.fix) from exc
    config = config_from_dict(data, origin=origin)
    check_config_fields(data, config, origin=origin)
    return config


def read_config_file(path: str | Path) -> PretrainedConfig:
    """Read a ``config.json`` into a ``transformers`` config.

    Keys starting with ``_`` and ``model_id`` (annotations, as in the reference configs) and
    ``quantization_config`` (random weights are never quantized) are ignored.

    Raises:
        UserError: If the file is unreadable, not JSON, not an object, has an unknown
            ``model_type``, lacks a size, or has a value of the wrong type (named).
    """
    return config_from_json(read_json_object(path), str(path))


def config_file_model_id(path: str | Path, data: dict[str, Any], config: PretrainedConfig) -> str:
    """The model id recorded for a model built from the config file at ``path``.

    The name is the model the config annotates (``model_id`` or ``_name_or_path``), else the
    file's stem (the folder's name for a file called ``config.json``).

    Returns:
        ``config:<name>@<first 8 hex digits of the config fingerprint>``.
    """
    name = next(
        (str(data[k]).strip() for k in _ANNOTATION_KEYS if str(data.get(k) or "").strip()), ""
    )
    if not name:
        file = Path(path).resolve()
        name = file.parent.name if file.stem == "config" and file.parent.name else file.stem
    return f"{CONFIG_ID_PREFIX}{name}@{config_fingerprint(config)[:_FINGERPRINT_DIGITS]}"


def config_from_dict(data: dict[str, Any], origin: str = "config") -> PretrainedConfig:
    """Build a ``transformers`` config from a ``config.json`` dict.

    Args:
        data: The parsed JSON object (must hold ``model_type``).
        origin: Where it came from, for error messages.

    Raises:
        UserError: If ``model_type`` is missing or unknown, or the values are invalid.
    """
    from huggingface_hub.errors import StrictDataclassError
    from transformers import AutoConfig

    clean = {
        k: v
        for k, v in data.items()
        if not k.startswith("_") and k not in ("model_id", "quantization_config")
    }
    model_type = clean.pop("model_type", None)
    if not isinstance(model_type, str) or not model_type:
        raise UserError(
            f"config {origin!r} has no model_type",
            'add "model_type" (e.g. "llama", "mixtral", "qwen3_moe", "deepseek_v3")',
        )
    try:
        return AutoConfig.for_model(model_type, **clean)
    except StrictDataclassError as exc:
        raise field_error(origin, exc) from exc
    except ValueError as exc:
        if "Unrecognized" in str(exc) or "model_type" in str(exc):
            raise UserError(
                f"config {origin!r} has unknown model_type {model_type!r}",
                "Use a model_type known to the installed transformers (e.g. llama, mixtral)",
            ) from exc
        raise UserError(
            f"invalid config {origin!r}: {first_line(exc, 300)}", "Fix the listed value"
        ) from exc
    except (TypeError, KeyError) as exc:
        raise UserError(
            f"invalid config {origin!r}: {first_line(exc, 300)}", "Fix the listed value"
        ) from exc


def field_error(origin: str, exc: BaseException) -> UserError:
    """One line for a config value ``transformers`` refused: the field and what was wrong."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    cause = lines[-1] if lines else type(exc).__name__
    field = getattr(exc, "field", None)
    if field is None and lines and "'" in lines[0]:
        field = lines[0].split("'")[1]
    named = f" field '{field}'" if field else ""
    return UserError(
        f"config {origin!r}{named} has an invalid value ({cause[:200]})",
        "Fix that field of the config.json",
    )
