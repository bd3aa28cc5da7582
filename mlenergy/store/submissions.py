"""The submission queue: validated bundles wait under ``data/submissions`` until a decision.

Layout::

    <data_dir>/submissions/
        pending/<id>.json    a QueuedSubmission waiting for approval
        approved/<id>.json   approved (its runs are in the results, with SubmissionInfo)
        rejected/<id>.json   rejected, with the reason
        .lock                held while the queue changes

Every file is written atomically (temp file + rename). An approval first appends the runs to
the store (idempotent: content hashes deduplicate) and then moves the entry, so a crash in
between is finished by approving again. A rejected bundle writes nothing at all.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import re
import uuid
from collections.abc import Collection, Iterator
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from mlenergy.errors import StoreError, UserError, ValidationFailed, first_line
from mlenergy.store import segments as seg
from mlenergy.store.checks import tag
from mlenergy.store.gpus import gpu_lookup
from mlenergy.store.locking import locked_folders
from mlenergy.store.names import submitter_problems
from mlenergy.store.queue_entry import ID_PATTERN, QueuedSubmission, Status
from mlenergy.store.queue_facts import (
    id_reuse_problems,
    known_measurements,
    known_runs,
    known_tasks,
    max_pending_setting,
    pending_problem,
    taken_ids,
)
from mlenergy.store.rules import check_run
from mlenergy.store.store import AppendResult, RunStore
from mlenergy.store.validation import (
    MAX_BUNDLE_BYTES,
    TdpLookup,
    ValidationReport,
    validate_bundle,
)

_STATES: tuple[Status, ...] = ("pending", "approved", "rejected")
_ID_RE = re.compile(ID_PATTERN)
QUARANTINE = "quarantine"
"""Folder under ``submissions/`` where unreadable queue files are set aside."""


def _cause(exc: BaseException) -> str:
    """Why a queue file could not be read, in one line (the first schema error's field)."""
    if isinstance(exc, ValidationError) and exc.error_count():
        err = exc.errors(include_url=False, include_input=False, include_context=False)[0]
        loc = ".".join(str(part) for part in err["loc"])
        return f"{loc}: {err['msg']}" if loc else str(err["msg"])
    return first_line(exc, 200)


class SubmissionQueue:
    """Intake of community result bundles into the store at ``data_dir``.

    Args:
        data_dir: The data folder (``data_dir/submissions`` and ``data_dir/results``).
        tdp_lookup: Accelerator name -> catalog facts (or TDP in watts) for the physics
            checks; ``None`` (the default): the GPU catalog plus the GPUs a maintainer admits
            in ``submissions/gpus.json`` (:func:`mlenergy.store.gpus.gpu_lookup`). A record's
            own ``accelerator_tdp_w`` never sets a limit.
        lock_timeout_s: How long to wait for another process changing the queue, in seconds.
        max_pending: Bundles one submitter may have pending at once; ``None``: the setting
            (:func:`max_pending_setting`, 20 by default).
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        tdp_lookup: TdpLookup | None = None,
        lock_timeout_s: float = 60.0,
        max_pending: int | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.root = self.data_dir / "submissions"
        self.store = RunStore(self.data_dir)
        self.tdp_lookup = tdp_lookup
        self.lock_timeout_s = lock_timeout_s
        self.max_pending = max_pending_setting() if max_pending is None else max_pending
        self.notices: list[str] = []
        """Warnings for the user (a queue file moved to quarantine), one line each."""

    # ------------------------------------------------------------------ reading

    def _dir(self, status: Status) -> Path:
        return self.root / status

    def _load(self, path: Path) -> QueuedSubmission:
        try:
            return QueuedSubmission.model_validate_json(path.read_bytes())
        except (OSError, ValidationError, ValueError) as exc:
            raise StoreError(
                f"submission file {path} is corrupted or unreadable",
                f"move it out of {path.parent} (or restore it from a backup), then retry",
            ) from exc

    def _load_or_quarantine(self, path: Path) -> QueuedSubmission | None:
        """Load a queue file; an unreadable one is moved to ``quarantine/`` (``None``).

        One damaged upload must not block the queue: it is set aside with the reason, and a
        notice (:attr:`notices`) says where it went.
        """
        try:
            return self._load(path)
        except StoreError as exc:
            cause = _cause(exc.__cause__) if exc.__cause__ else exc.problem
            self._quarantine(path, cause)
            return None

    def _quarantine(self, path: Path, cause: str) -> None:
        folder = self.root / QUARANTINE
        dest = folder / f"{path.parent.name}-{path.name}"
        where = f"{path.parent.name}/{path.name}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            seg.write_bytes_atomic(dest.with_suffix(".reason.txt"), f"{where}: {cause}\n".encode())
            os.replace(path, dest)
        except FileNotFoundError:
            return  # another process set it aside first
        except OSError as exc:
            self.notices.append(
                f"submission file {where} is unreadable ({cause[:200]}) and could not be moved "
                f"to {QUARANTINE}/ ({exc.strerror or exc}); it is skipped"
            )
            return
        self.notices.append(
            f"submission file {where} is unreadable ({cause[:200]}); moved to "
            f"{QUARANTINE}/{dest.name}, the rest of the queue goes on"
        )

    def list(self, status: Status | None = "pending") -> list[QueuedSubmission]:
        """Return queued submissions (``status=None``: all), oldest first."""
        out: builtins.list[QueuedSubmission] = []
        decided = self._decided_ids()
        for state in _STATES if status is None else (status,):
            folder = self._dir(state)
            if not folder.is_dir():
                continue
            for path in sorted(folder.glob("*.json")):
                if state == "pending" and path.stem in decided:
                    continue  # a decision was recorded; only the cleanup was interrupted
                entry = self._load_or_quarantine(path)
                if entry is not None:
                    out.append(entry)
        return sorted(out, key=lambda q: (q.submitted_at, q.submission_id))

    def _decided_ids(self) -> set[str]:
        ids: set[str] = set()
        for state in ("approved", "rejected"):
            folder = self._dir(state)
            if folder.is_dir():
                ids.update(p.stem for p in folder.glob("*.json"))
        return ids

    def get(self, submission_id: str) -> QueuedSubmission:
        """Return one submission, whatever its status.

        Raises:
            UserError: Unknown id.
        """
        if not _ID_RE.match(submission_id or ""):
            raise UserError(f"invalid submission id {submission_id!r}", "copy it from the list")
        for state in ("approved", "rejected", "pending"):
            path = self._dir(state) / f"{submission_id}.json"
            if path.is_file():
                return self._load(path)
        raise UserError(
            f"no submission {submission_id!r} in {self.root}",
            "list them with `mlenergy submissions list`",
        )

    def pending_hashes(self, pending: builtins.list[QueuedSubmission] | None = None) -> set[str]:
        """Content hashes of the records waiting in the queue.

        Args:
            pending: The pending entries when already listed.
        """
        pending = self.list("pending") if pending is None else pending
        return {h for q in pending for h in q.content_hashes}

    # ------------------------------------------------------------------ validating

    def validate(
        self,
        data: bytes | str | Path,
        *,
        submitter: str | None = None,
        new_tasks: Collection[str] = (),
    ) -> ValidationReport:
        """Validate a bundle against every rule, including duplicates in store and queue.

        Writes nothing. See :func:`mlenergy.store.validation.validate_bundle`; a submitter
        at the cap of pending bundles (:attr:`max_pending`) is refused before the bundle is
        read.

        Args:
            data: Bundle bytes or a path to the bundle.
            submitter: Submitter name (required for a bundle of bare records).
            new_tasks: Task labels the submitter declares new.
        """
        pending = self.list("pending")
        capped = pending_problem(submitter, pending, self.max_pending)
        if capped:
            return ValidationReport(False, [capped])
        run_ids, quality_ids = taken_ids(self.store, pending)
        known = self.store.content_hashes() | self.pending_hashes(pending)
        runs = self.store.runs_frame()
        report = validate_bundle(
            data,
            submitter=submitter,
            tdp_lookup=self.tdp_lookup or gpu_lookup(self.root),
            known_hashes=known,
            known_run_ids=run_ids,
            known_quality_ids=quality_ids,
            max_bytes=MAX_BUNDLE_BYTES,
            known_tasks=known_tasks(runs),
            new_tasks=new_tasks,
            known_measurements=known_measurements(runs, pending),
            known_runs=known_runs(runs, pending),
        )
        if report.ok and report.submission is not None and not submitter:
            capped = pending_problem(report.submission.submitter, pending, self.max_pending)
            if capped:
                return ValidationReport(False, [capped], report.submission)
        return report

    # ------------------------------------------------------------------ changing

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with locked_folders(
            self.root / ".lock",
            [self._dir(state) for state in _STATES],
            self.data_dir,
            self.lock_timeout_s,
            "the submission queue",
        ):
            for state in _STATES:  # leftovers of interrupted atomic writes
                for tmp in self._dir(state).glob(f"{seg.TMP_PREFIX}*"):
                    with contextlib.suppress(OSError):
                        tmp.unlink()
            for sid in self._decided_ids():  # a decision whose pending twin was not removed
                with contextlib.suppress(FileNotFoundError):
                    (self._dir("pending") / f"{sid}.json").unlink()
            yield

    def _write(self, entry: QueuedSubmission) -> Path:
        path = self._dir(entry.status) / f"{entry.submission_id}.json"
        seg.write_bytes_atomic(path, entry.model_dump_json(indent=2).encode("utf-8"))
        return path

    def submit(
        self,
        data: bytes | str | Path,
        *,
        submitter: str | None = None,
        source: str | None = None,
        new_tasks: Collection[str] = (),
    ) -> QueuedSubmission:
        """Validate a bundle and queue it in ``pending/``.

        Args:
            data: Bundle bytes or a path to the bundle.
            submitter: Submitter name (required for a bundle of bare records).
            source: Where it came from (file name), kept for provenance.
            new_tasks: Task labels the submitter declares new (kept on the submission).

        Returns:
            The queued entry.

        Raises:
            ValidationFailed: With every problem; nothing is written.
        """
        report = self.validate(data, submitter=submitter, new_tasks=new_tasks)
        if not report.ok or report.submission is None:
            raise ValidationFailed(report.problems or ["bundle could not be read"])
        if source is None and not isinstance(data, bytes):
            source = Path(data).name
        now = datetime.now(UTC)
        entry = QueuedSubmission(
            submission_id=f"{now:%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}",
            status="pending",
            submitted_at=now,
            source=source,
            content_hashes=report.content_hashes,
            submission=report.submission,
        )
        with self._locked():  # what another process queued since we validated
            pending = self.list("pending")
            problems = self._queued_meanwhile(entry, pending)
            capped = pending_problem(entry.submission.submitter, pending, self.max_pending)
            if problems or capped:
                raise ValidationFailed([*problems, *([capped] if capped else [])])
            self._write(entry)
        return entry

    def _queued_meanwhile(
        self, entry: QueuedSubmission, pending: builtins.list[QueuedSubmission]
    ) -> builtins.list[str]:
        """Records of ``entry`` that a bundle queued since validation duplicates or clashes with."""
        problems = []
        clash = self.pending_hashes(pending) & set(entry.content_hashes)
        if clash:
            problems.append(
                tag(
                    "no-duplicate",
                    f"{len(clash)} record(s) duplicate a submission queued meanwhile",
                )
            )
        run_ids, quality_ids = taken_ids(self.store, pending)
        fix = "it was queued meanwhile with other content (give this record a fresh id)"
        problems += id_reuse_problems(entry.submission, run_ids, quality_ids, fix)
        return problems

    def approve(self, submission_id: str, *, approved_at: datetime | None = None) -> AppendResult:
        """Move a pending submission's records into the results with their SubmissionInfo.

        Runs and quality results both carry the submitter and the approval time.

        Returns:
            The store's append result (records already present count as duplicates).

        The submission's runs are checked again against today's rules (a bundle queued
        before a rule existed must not slip through): a run that now fails one is not
        approved, and the problems say why (reject it with them).

        Raises:
            UserError: Unknown id, or the submission is not pending.
            ValidationFailed: A run fails today's rules (nothing is stored).
        """
        with self._locked():
            entry = self._pending(submission_id, "approved")
            problems = self._recheck(entry)
            if problems:
                raise ValidationFailed(problems)
            when = approved_at or datetime.now(UTC)
            result = self.store.append(entry.approved_records(when))
            self._decide(entry, "approved", when, None)
        return result

    def _recheck(self, entry: QueuedSubmission) -> builtins.list[str]:
        """Problems of a queued submission under today's rules, and ids the store now holds.

        An id stored meanwhile with other content (by an import, another approval) is a
        problem here, so the approval is refused with a reason to reject it by, rather than
        failing in the store and leaving the entry stuck in the queue.
        """
        lookup = self.tdp_lookup or gpu_lookup(self.root)
        problems = submitter_problems("bundle.submitter", entry.submission.submitter)
        for i, run in enumerate(entry.submission.runs):
            problems.extend(check_run(run, f"runs[{i}]", lookup))
        fix = "reject this submission (--why) and ask for fresh ids"
        stored = (self.store.run_hashes(), self.store.quality_hashes())
        problems += id_reuse_problems(entry.submission, *stored, fix)
        return problems

    def reject(self, submission_id: str, why: str) -> QueuedSubmission:
        """Move a pending submission to ``rejected/`` with the reason.

        Raises:
            UserError: Unknown id, not pending, or an empty reason.
        """
        if not why or not why.strip():
            raise UserError("a rejection needs a reason", 'pass --why "what is wrong"')
        with self._locked():
            entry = self._pending(submission_id, "rejected")
            return self._decide(entry, "rejected", datetime.now(UTC), why.strip())

    def _pending(self, submission_id: str, verb: str) -> QueuedSubmission:
        """The pending submission ``submission_id`` (call with the lock held).

        Raises:
            UserError: Unknown id, or the submission is not pending (``verb``: what was asked).
        """
        entry = self.get(submission_id)
        if entry.status != "pending":
            raise UserError(
                f"submission {submission_id} is already {entry.status}",
                f"only pending submissions can be {verb}",
            )
        return entry

    def _decide(
        self, entry: QueuedSubmission, status: Status, when: datetime, reason: str | None
    ) -> QueuedSubmission:
        decided = entry.model_copy(update={"status": status, "decided_at": when, "reason": reason})
        with seg.deferred_interrupts():
            self._write(decided)  # the decision is recorded: a pending twin is now ignored
            with contextlib.suppress(FileNotFoundError):
                (self._dir("pending") / f"{entry.submission_id}.json").unlink()
            seg.fsync_dir(self._dir("pending"))
        return decided
