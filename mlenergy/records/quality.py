"""Quality results (perplexity, benchmark accuracy) linked to the energy runs of a model."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal

from pydantic import Field

from mlenergy.records.base import SCHEMA_VERSION, FrozenModel, NonNegInt, canonical_json, sha256_hex
from mlenergy.records.provenance import ModelInfo, Software
from mlenergy.records.run import SubmissionInfo, new_run_id, utc_now


class ModelRef(FrozenModel):
    """A model known by its id only: a quality figure needs no parameter count.

    Sizes (architecture, parameters) are attached later, from the model's energy records or a
    config, when they become known; they read ``None`` here. The fingerprint is derived from the
    model id (:func:`model_ref`), the same way the importers derive one for a model with no
    config, so the quality and energy records of one model join.

    Attributes:
        model_id: Hub id (or any id the results file names).
        config_fingerprint: First 16 hex digits of SHA-256 of ``{"model_id": model_id}``.
        dtype: Weight dtype evaluated, or ``unknown``.
        weights: ``pretrained`` (a real checkpoint was evaluated).
        sizes: Always ``unknown``.
    """

    model_id: str = Field(min_length=1)
    config_fingerprint: str = Field(pattern=r"^[0-9a-f]{16}$")
    dtype: str = "unknown"
    weights: Literal["pretrained", "random", "trained"] = "pretrained"
    sizes: Literal["unknown"] = "unknown"

    architecture: ClassVar[None] = None
    is_moe: ClassVar[None] = None
    num_experts: ClassVar[None] = None
    experts_per_token: ClassVar[None] = None
    num_shared_experts: ClassVar[None] = None
    total_params: ClassVar[None] = None
    active_params: ClassVar[None] = None
    kind: ClassVar[None] = None


def model_ref(model_id: str, dtype: str = "unknown") -> ModelRef:
    """A :class:`ModelRef` whose fingerprint is derived from ``model_id``."""
    fingerprint = sha256_hex(canonical_json({"model_id": model_id}))[:16]
    return ModelRef(model_id=model_id, config_fingerprint=fingerprint, dtype=dtype)


class QualityResult(FrozenModel):
    """One quality figure of one model on one task.

    Attributes:
        schema_version: Version of this record schema.
        record_type: Always ``quality``.
        quality_id: Unique id of this result.
        model: The model evaluated (its ``config_fingerprint`` links it to energy runs); a
            :class:`ModelRef` when only its id is known.
        task: ``perplexity:<corpus>`` or ``lm-eval:<task>``.
        metric: Metric name (``perplexity``, ``acc``, ``acc_norm``...).
        value: Metric value (perplexity: dimensionless; accuracy: fraction in [0, 1]).
        stderr: Standard error of ``value``, when known.
        higher_is_better: Direction of the metric.
        num_tokens: Evaluation tokens (perplexity), when relevant.
        num_samples: Evaluation samples (benchmarks), when relevant.
        dataset: Data source and split, e.g. ``pydoc_data.topics[val]``.
        linked_run_ids: Energy runs of the same model instance.
        submission: How the result entered the store through community submission, if so.
        created_at: When the record was made (UTC).
        software: The versions that computed the figure.
        tags: Free-form labels.
    """

    schema_version: Literal["1.0"] = SCHEMA_VERSION
    record_type: Literal["quality"] = "quality"
    quality_id: str = Field(default_factory=new_run_id, pattern=r"^[A-Za-z0-9_\-]{8,64}$")
    created_at: datetime = Field(default_factory=utc_now)
    model: ModelInfo | ModelRef
    software: Software
    task: str = Field(min_length=1)
    metric: str = Field(min_length=1)
    value: float = Field(allow_inf_nan=False)
    stderr: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    higher_is_better: bool
    num_tokens: NonNegInt | None = None
    num_samples: NonNegInt | None = None
    dataset: str | None = None
    linked_run_ids: tuple[str, ...] = ()
    tags: dict[str, str] = Field(default_factory=dict)
    submission: SubmissionInfo | None = None

    def content_hash(self) -> str:
        """SHA-256 of the result's content, excluding how it was submitted (de-duplication)."""
        return sha256_hex(canonical_json(self.model_dump(mode="json", exclude={"submission"})))
