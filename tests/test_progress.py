"""Progress on a terminal is a live bar; piped into a file or a log it is a dozen plain lines."""

from __future__ import annotations

import io

import pytest

from mlenergy import progress
from mlenergy.progress import progress_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_without_a_terminal_a_thousand_steps_write_a_dozen_lines():
    out = io.StringIO()
    with progress_bar(1000, "study", unit="step", file=out) as bar:
        for i in range(1000):
            bar.describe(f"model {i % 5}")  # changes every step: never a line by itself
            bar.advance()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines[0] == "study: started (1000 steps)"
    assert len(lines) == 1 + 10 + 1  # start, each tenth, the end
    assert lines[5].startswith("study: 50% (500/1000 step, ")
    assert lines[5].endswith("model 4")
    assert lines[-1].startswith("study: done, 1000/1000 step in ")


def test_a_stage_is_a_line_and_a_failure_says_stopped():
    out = io.StringIO()
    with pytest.raises(RuntimeError), progress_bar(4, "study", unit="step", file=out) as bar:
        bar.advance(4)
        bar.stage("writing the report")
        raise RuntimeError("disk full")
    lines = out.getvalue().splitlines()
    assert any(x.startswith("study: writing the report (at ") for x in lines)
    assert lines[-1].startswith("study: stopped, 4/4 step in ")


def test_a_long_silence_gets_a_line(monkeypatch):
    clock = iter([0.0, 0.0, 1.0, 2.0 + progress.LINE_EVERY_S, 70.0, 70.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    bar = progress_bar(None, "sweep", unit="run", file=out)
    bar.note(done=1)
    bar.advance()  # 1 s: no line
    bar.advance()  # after LINE_EVERY_S: a line
    assert out.getvalue().splitlines()[1].startswith("sweep: 2 run, ")
    assert "done=1" in out.getvalue()


def test_on_a_terminal_it_is_a_live_bar():
    out = Terminal()
    with progress_bar(3, "bench", unit="run", file=out) as bar:
        assert bar._bar is not None
        bar.advance(3)
        bar.stage("storing")
    assert "\r" in out.getvalue() and "3/3" in out.getvalue()


def test_a_disabled_bar_writes_nothing():
    out = io.StringIO()
    with progress_bar(3, "bench", enabled=False, file=out) as bar:
        bar.advance()
        bar.stage("x")
        bar.note("y")
    assert out.getvalue() == ""


def test_a_process_that_imported_ipykernel_is_not_a_notebook():
    """Importing ipykernel (as a notebook test does) does not turn piped output into a live bar."""
    pytest.importorskip("ipykernel")
    import ipykernel  # noqa: F401

    out = io.StringIO()
    with progress_bar(3, "bench", unit="run", file=out) as bar:
        bar.advance(3)
    assert "\r" not in out.getvalue()
    assert out.getvalue().splitlines()[0] == "bench: started (3 runs)"
