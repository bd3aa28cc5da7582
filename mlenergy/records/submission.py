"""A community submission: a bundle of run and quality records from one submitter."""

from __future__ import annotations

import unicodedata
from typing import Literal

from pydantic import Field, field_validator

from mlenergy.records.base import SCHEMA_VERSION, FrozenModel
from mlenergy.records.quality import QualityResult
from mlenergy.records.run import RunRecord


def normalise_name(name: str) -> str:
    """``name`` NFKC-normalised and without surrounding whitespace: how names are kept.

    Compatibility forms become their plain letters (``ＭＬ`` fullwidth, ``𝐌𝐋`` bold: ``ML``);
    characters NFKC keeps (controls, zero-width and direction marks) are left for the intake
    to refuse (:mod:`mlenergy.store.names`).
    """
    return unicodedata.normalize("NFKC", name).strip()


class Submission(FrozenModel):
    """What a submitter uploads (``mlenergy submit results.json``).

    Attributes:
        schema_version: Version of this record schema.
        record_type: Always ``submission``.
        submitter: Name or handle of the person or lab submitting (shown on the leaderboard),
            kept NFKC-normalised.
        contact: Optional e-mail or URL.
        description: Optional free text about how the runs were made.
        runs: The run records (``mlenergy bench --json`` output).
        quality: Quality results linked to those runs, if any.
        new_tasks: Task labels this submission introduces (not yet known to the
            leaderboard); a run's task must be a known task or one of these.
    """

    schema_version: Literal["1.0"] = SCHEMA_VERSION
    record_type: Literal["submission"] = "submission"
    submitter: str = Field(min_length=1, max_length=200)
    contact: str | None = Field(default=None, max_length=200)
    description: str | None = Field(default=None, max_length=5000)
    runs: tuple[RunRecord, ...] = Field(min_length=1)
    quality: tuple[QualityResult, ...] = ()
    new_tasks: tuple[str, ...] = Field(default=(), max_length=20)

    @field_validator("submitter", mode="before")
    @classmethod
    def _normalised(cls, value: object) -> object:
        return normalise_name(value) if isinstance(value, str) else value
