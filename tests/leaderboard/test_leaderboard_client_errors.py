"""Refused requests: one log line, a client message without server paths or tracebacks."""

from __future__ import annotations

import logging
import sys

import pytest

from mlenergy.leaderboard.call_guard import CappedLines
from mlenergy.leaderboard.client_errors import MAX_MESSAGE, log_line, public_message, refuse

gr = pytest.importorskip("gradio")


@pytest.mark.parametrize(
    "text,hidden,kept",
    [
        ("config file /srv/app/data/x.json not found", "/srv/app", "…/x.json"),
        ("cannot read C:\\Users\\me\\cfg.json", "Users", "…/cfg.json"),
        ("store file ~/lab/data/results/runs-1.parquet is corrupted", "lab/data", "runs-1"),
    ],
)
def test_public_message_hides_server_paths(text, hidden, kept):
    out = public_message(text)
    assert hidden not in out and kept in out


def test_public_message_keeps_model_ids_and_urls_and_is_one_short_line():
    text = "unknown model meta-llama/Llama-3.1-8B-Instruct; see https://ml.energy/leaderboard"
    assert public_message(text) == text
    long = public_message("x\n" * 1000)
    assert "\n" not in long and len(long) <= MAX_MESSAGE


def test_refuse_logs_one_line_and_prints_no_traceback(caplog):
    with caplog.at_level(logging.WARNING, logger="mlenergy.leaderboard"):
        err = refuse("/estimate", "no config at /srv/app/x.json", model="a" * 10_000)
    assert isinstance(err, gr.Error) and err.print_exception is False
    assert "/srv/app" not in err.message
    (record,) = caplog.records
    assert "\n" not in record.getMessage() and len(record.getMessage()) < 500
    assert log_line("/plot", "bad kind", {"kind": "x"}) == "refused /plot(kind='x'): bad kind"


def test_the_app_never_sends_an_unexpected_errors_text(monkeypatch):
    from mlenergy.leaderboard import app as module

    seen = {}

    class FakeBlocks:
        def queue(self, **kw):
            return self

        def launch(self, **kw):
            seen.update(kw)

    monkeypatch.setattr(sys, "stderr", sys.stderr)  # launch caps its lines: undone after
    module.launch(FakeBlocks(), block=False)
    assert seen["show_error"] is False
    assert isinstance(sys.stderr, CappedLines)
