"""The model behind the name a server serves, described for the record.

``--model`` is the name the server expects. When it is a folder, a config or a hub id, it
describes itself; a served alias (vLLM's ``--served-model-name tiny``) does not, but the
server's ``/v1/models`` says what it loaded (``root``). The record's model is described from, in
order: ``--model-config`` when given; the ``root`` the server names for an alias; the name.
Only when none can be read is ``--model-config`` asked for.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mlenergy.errors import UserError
from mlenergy.records import ModelInfo
from mlenergy.workloads.serving.server_info import model_root
from mlenergy.workloads.serving.spec import ServingSpec, describe_model


def describe_served_model(spec: ServingSpec, served: list[dict[str, Any]] | None) -> ModelInfo:
    """Describe ``spec.model``, through the server's ``root`` when the name is an alias.

    Args:
        spec: The benchmark (``model``, ``model_config``).
        served: The server's ``/v1/models`` entries (``None``: not asked, as in launch mode).

    Raises:
        UserError: Nothing describes the model; the message names the ``root`` tried.
    """
    root = model_root(served or [], spec.model) if spec.model_config is None else None
    if root is None:
        return describe_model(spec)
    try:
        return describe_model(replace(spec, model_config=root))
    except UserError as from_root:
        try:
            return describe_model(spec)
        except UserError:
            raise UserError(
                f"cannot describe model {spec.model!r} for the record: the server says it "
                f"loaded {root!r}, which is not readable here ({from_root.problem})",
                "Pass --model-config with the model's config.json (or a folder, or a hub id)",
            ) from from_root
