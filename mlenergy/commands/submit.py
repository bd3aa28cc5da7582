"""``mlenergy submit`` and ``mlenergy submissions``: community result bundles."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlenergy.commands.options import DataDirOption, resolve_data_dir
from mlenergy.errors import UserError, terminal_text
from mlenergy.store.checks import explain as explain_checks
from mlenergy.store.submissions import SubmissionQueue

submissions_app = typer.Typer(
    name="submissions", help="Review queued result bundles.", no_args_is_help=True
)


def _say_notices(queue: SubmissionQueue) -> None:
    """Print the queue's warnings (quarantined files) to stderr, one line each."""
    for notice in queue.notices:
        typer.echo(f"warning: {terminal_text(notice, 400)}", err=True)


def _queue(data_dir: Path | None) -> SubmissionQueue:
    # Physical limits come from the GPU catalog (plus the GPUs a maintainer admits), never
    # from the record: the queue's default lookup.
    return SubmissionQueue(resolve_data_dir(data_dir))


def submit(
    bundle: Annotated[
        Path | None, typer.Argument(help="Result bundle: Submission JSON or JSONL records.")
    ] = None,
    submitter: Annotated[
        str | None,
        typer.Option(
            help="Your name or lab (required when the bundle holds bare records; for a "
            "Submission file it must match the submitter named in the file)."
        ),
    ] = None,
    new_task: Annotated[
        list[str] | None,
        typer.Option(
            "--new-task",
            help="Declare a task label the leaderboard does not know yet (repeatable); a "
            "Submission file may list them in its new_tasks field instead.",
        ),
    ] = None,
    data_dir: DataDirOption = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="List the named checks a bundle must pass.")
    ] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="With --explain: as a Markdown table.")
    ] = False,
) -> None:
    """Validate a result bundle and queue it for approval (every problem is listed)."""
    if explain:
        typer.echo(explain_checks(markdown=markdown))
        return
    if bundle is None:
        raise UserError("no bundle given", "pass the path of a results file (or --explain)")
    if not bundle.is_file():
        raise UserError(f"bundle {bundle} does not exist", "pass the path of a results file")
    queue = _queue(data_dir)
    try:  # the CLI lists the problems of a ValidationFailed, one per line
        entry = queue.submit(bundle, submitter=submitter, new_tasks=new_task or ())
    finally:
        _say_notices(queue)
    sub = entry.submission
    typer.echo(
        f"queued {entry.submission_id}: {len(sub.runs)} run(s), {len(sub.quality)} quality "
        f"result(s) from {terminal_text(sub.submitter)}; awaiting approval"
    )
    for run_id, reasons in entry.unverified_runs().items():
        typer.echo(
            f"note: run {run_id} will be shown as unverified ({'; '.join(reasons)}) "
            "[measured-provenance]"
        )


@submissions_app.command("list")
def list_submissions(
    status: Annotated[str, typer.Option(help="pending, approved, rejected or all.")] = "pending",
    data_dir: DataDirOption = None,
) -> None:
    """List queued submissions (submitter names are printed literally, never interpreted)."""
    if status not in ("pending", "approved", "rejected", "all"):
        raise UserError(f"unknown status {status!r}", "use pending, approved, rejected or all")
    queue = _queue(data_dir)
    entries = queue.list(None if status == "all" else status)  # type: ignore[arg-type]
    _say_notices(queue)
    if not entries:
        typer.echo(f"no {status if status != 'all' else ''} submissions".replace("  ", " "))
        return
    for q in entries:
        models = sorted({r.model.model_id for r in q.submission.runs})
        line = (
            f"{q.submission_id}  {q.status:<8}  {q.submitted_at:%Y-%m-%d %H:%M}  "
            f"runs={len(q.submission.runs)} quality={len(q.submission.quality)}  "
            f"submitter={terminal_text(q.submission.submitter, 60)}  "
            f"models={terminal_text(', '.join(models), 120)}"
        )
        if q.reason:
            line += f"  why={terminal_text(q.reason, 200)}"
        typer.echo(line)


@submissions_app.command("approve")
def approve(
    submission_id: Annotated[str, typer.Argument(help="Id from `mlenergy submissions list`.")],
    data_dir: DataDirOption = None,
) -> None:
    """Add a pending submission's runs to the results (with submitter and provenance)."""
    queue = _queue(data_dir)
    try:
        res = queue.approve(submission_id)
    finally:
        _say_notices(queue)
    typer.echo(
        f"approved {submission_id}: {res.added} record(s) added, {res.duplicates} duplicate(s)"
    )


@submissions_app.command("reject")
def reject(
    submission_id: Annotated[str, typer.Argument(help="Id from `mlenergy submissions list`.")],
    why: Annotated[str, typer.Option("--why", help="Reason shown to the submitter.")],
    data_dir: DataDirOption = None,
) -> None:
    """Move a pending submission to rejected/, with the reason."""
    queue = _queue(data_dir)
    try:
        queue.reject(submission_id, why)
    finally:
        _say_notices(queue)
    typer.echo(f"rejected {submission_id}")


def register(app: typer.Typer) -> None:
    """Add ``submit`` and the ``submissions`` group to the root app."""
    app.command("submit")(submit)
    app.add_typer(submissions_app, name="submissions")
