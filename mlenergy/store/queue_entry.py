"""One entry of the submission queue: a validated bundle, how it arrived, what was decided.

:class:`QueuedSubmission` is what a queue file under ``data/submissions/<status>/`` holds
(:mod:`mlenergy.store.submissions` keeps the queue; :mod:`mlenergy.store.queue_facts` answers
what a new bundle is compared with).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from mlenergy.records import FrozenModel, QualityResult, RunRecord, Submission, SubmissionInfo
from mlenergy.store.facts import facts_from_record
from mlenergy.store.rules import unverified_reasons

Status = Literal["pending", "approved", "rejected"]
"""Where an entry is: waiting for review, approved (its runs stored) or rejected."""
ID_PATTERN = r"^[0-9A-Za-z][0-9A-Za-z_\-]{5,63}$"
"""Queue ids: 6-64 letters, digits, ``_`` or ``-`` (``YYYYmmdd-HHMMSS-<hex>`` when made here)."""


class QueuedSubmission(FrozenModel):
    """A submission in the queue, with how and when it arrived and what was decided.

    Attributes:
        submission_id: Queue id (``YYYYmmdd-HHMMSS-<hex>``).
        status: ``pending``, ``approved`` or ``rejected``.
        submitted_at: When it was queued (UTC).
        source: File name it came from, if any.
        content_hashes: Content hashes of its records (runs, then quality).
        submission: The validated bundle.
        decided_at: When it was approved or rejected.
        reason: Why it was rejected.
    """

    submission_id: str = Field(pattern=ID_PATTERN)
    status: Status
    submitted_at: datetime
    source: str | None = None
    content_hashes: tuple[str, ...]
    submission: Submission
    decided_at: datetime | None = None
    reason: str | None = None

    def approved_records(self, approved_at: datetime) -> list[RunRecord | QualityResult]:
        """The runs and quality results with :class:`SubmissionInfo` filled in, for the store.

        A measured run lacking the provenance a real run records carries the reasons in
        ``SubmissionInfo.unverified`` (the leaderboard shows it as unverified).
        """
        info = SubmissionInfo(
            submission_id=self.submission_id,
            submitter=self.submission.submitter,
            submitted_at=self.submitted_at,
            approved_at=approved_at,
        )
        out: list[RunRecord | QualityResult] = []
        records: list[RunRecord | QualityResult] = [*self.submission.runs, *self.submission.quality]
        for rec in records:
            reasons = (
                tuple(unverified_reasons(facts_from_record(rec)))
                if isinstance(rec, RunRecord)
                else ()
            )
            out.append(
                rec.model_copy(
                    update={"submission": info.model_copy(update={"unverified": reasons})}
                )
            )
        return out

    def unverified_runs(self) -> dict[str, list[str]]:
        """``run_id -> reasons`` of the runs that will be shown as unverified."""
        out = {}
        for run in self.submission.runs:
            reasons = unverified_reasons(facts_from_record(run))
            if reasons:
                out[run.run_id] = reasons
        return out
