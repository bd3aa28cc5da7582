"""Quality results (perplexity, benchmark accuracy) linked to the energy runs of a model."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from mlenergy.records.base import SCHEMA_VERSION, FrozenModel, NonNegInt, canonical_json, sha256_hex
from mlenergy.records.provenance import ModelInfo, Software
from mlenergy.records.run import SubmissionInfo, new_run_id, utc_now


class QualityResult(FrozenModel):
    """One quality figure of one model on one task.

    Attributes:
        schema_version: Version of this record schema.
        record_type: Always ``quality``.
        quality_id: Unique id of this result.
        model: The model evaluated (its ``config_fingerprint`` links it to energy runs).
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
    model: ModelInfo
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
