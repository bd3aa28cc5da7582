"""The Submit tab: upload a result bundle, see every problem at once, or queue it for review.

Validation and the pending queue belong to the store (:mod:`mlenergy.store.submissions`);
this module only turns their answers into escaped HTML for the app.
"""

from __future__ import annotations

import contextlib
import html
from pathlib import Path

import gradio as gr

from mlenergy.errors import UserError, ValidationFailed
from mlenergy.leaderboard.html import render_problems
from mlenergy.store.submissions import SubmissionQueue

SUBMIT_CONCURRENCY = 2
"""Bundles validated at once; further clicks wait in Gradio's queue (bounded memory and CPU)."""


def submit_bundle(
    path: str | Path | None,
    data_dir: str | Path,
    submitter: str | None = None,
    new_tasks: str | None = None,
) -> tuple[str, bool]:
    """Validate an uploaded bundle and queue it in ``data_dir/submissions/pending/``.

    Args:
        path: The uploaded file (``None`` when nothing was uploaded).
        data_dir: The store folder.
        submitter: Submitter name, needed when the bundle holds bare records.
        new_tasks: Task labels declared new, comma-separated (see ``--new-task``).

    Returns:
        ``(html, accepted)``: an escaped list of every problem, or the pending id.
    """
    if not path:
        return render_problems(["no file was uploaded"], "Nothing to validate"), False

    queue = SubmissionQueue(data_dir)  # limits from the GPU catalog, never the record
    try:
        declared = [t.strip() for t in (new_tasks or "").split(",") if t.strip()]
        entry = queue.submit(
            Path(path), submitter=(submitter or "").strip() or None, new_tasks=declared
        )
    except ValidationFailed as exc:
        return render_problems(
            exc.problems, f"{len(exc.problems)} problem(s): nothing was queued"
        ), False
    except UserError as exc:
        return render_problems([exc.message], "Rejected: nothing was queued"), False
    sid = html.escape(entry.submission_id)
    notes = "".join(
        f"<li>run <code>{html.escape(rid)}</code> will be shown as unverified: "
        f"{html.escape('; '.join(reasons))}</li>"
        for rid, reasons in entry.unverified_runs().items()
    )
    return (
        f'<div class="lb-ok"><strong>Queued for review.</strong> Submission <code>{sid}</code> '
        f"({len(entry.submission.runs)} run(s) from {html.escape(entry.submission.submitter)}) "
        f"waits in <code>submissions/pending/</code>; a maintainer approves it with "
        f"<code>mlenergy submissions approve {sid}</code>."
        f"{f'<ul class=lb-unverified>{notes}</ul>' if notes else ''}</div>",
        True,
    )


def build_submit_tab(data_dir: Path) -> None:
    """Lay out the Submit tab; bundles are queued in ``data_dir/submissions/pending/``."""
    with gr.Tab("Submit", id="tab-submit"):
        gr.Markdown(
            "Upload `mlenergy bench --json` output (JSON lines; give your name below) "
            "or a `Submission` JSON. Every problem is listed at once; valid bundles "
            "wait for approval."
        )
        upload = gr.File(
            label="Result bundle (.json / .jsonl)",
            file_types=[".json", ".jsonl"],
            elem_id="submit-file",
        )
        with gr.Row():
            submitter = gr.Textbox(
                label="Submitter (only for bundles of bare records)", elem_id="submit-submitter"
            )
            new_tasks = gr.Textbox(
                label="New tasks (comma-separated; only tasks the leaderboard does not list yet)",
                elem_id="submit-new-tasks",
            )
        button = gr.Button("Validate and queue", variant="primary", elem_id="submit-run")
        result = gr.HTML(elem_id="submit-result")
    button.click(
        lambda path, who, tasks: handle_upload(path, data_dir, who, tasks),
        [upload, submitter, new_tasks],
        [result, upload],
        api_visibility="private",
        concurrency_limit=SUBMIT_CONCURRENCY,
        concurrency_id="submit",
    )


def handle_upload(
    path: str | Path | None, data_dir: str | Path, submitter: str | None, new_tasks: str | None
) -> tuple[str, None]:
    """The Submit button: validate and queue, then delete the uploaded copy.

    The upload is Gradio's temporary copy of the user's file: once handled (queued, or
    refused with its problems) it is deleted, so uploads do not pile up on the server.

    Returns:
        ``(html, None)``: the answer, and ``None`` to clear the file box.
    """
    try:
        return submit_bundle(path, data_dir, submitter, new_tasks)[0], None
    finally:
        if path:
            with contextlib.suppress(OSError):
                Path(path).unlink(missing_ok=True)
