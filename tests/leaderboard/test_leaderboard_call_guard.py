"""Malformed Gradio calls refused in one short line before Gradio logs them; capped stderr;
Gradio's fixed per-event costs made fixed once."""

from __future__ import annotations

import importlib
import inspect
import io
import json
import logging
import sys

import gradio as gr
import pytest
from fastapi.testclient import TestClient

from mlenergy.leaderboard import gradio_costs
from mlenergy.leaderboard.call_guard import MAX_BODY_BYTES, CallGuard, CappedLines, Refused


def _demo() -> gr.Blocks:
    with gr.Blocks() as demo:
        box = gr.Textbox(elem_id="box")
        out = gr.Textbox()
        box.change(lambda text: text, box, out, api_visibility="private")

        def table(task: str = "", page: int = 1) -> dict:
            return {"task": task, "page": page}

        gr.api(table, api_name="table")
    return demo


@pytest.fixture(scope="module")
def guarded():
    demo = _demo()
    seen: list[bytes] = []

    async def app(scope, receive, send):  # stands for Gradio: records what reaches it
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    page_event = next(i for i, f in demo.fns.items() if f.api_visibility == "private")
    return TestClient(CallGuard(app, blocks=demo)), seen, page_event


@pytest.mark.parametrize(
    ("path", "body", "status", "why"),
    [
        ("/gradio_api/call/table", {"data": ["x" * 100_000]}, 400, "takes 2 values in data, not 1"),
        ("/gradio_api/call/table", {"data": ["a", 1, 2]}, 400, "not 3"),
        ("/gradio_api/run/table", {"data": []}, 400, "not 0"),
        ("/gradio_api/call/v2/table", {"nope": "x" * 100_000}, 400, "takes no argument 'nope'"),
        ("/gradio_api/call/nothing", {"data": []}, 404, "no endpoint named 'nothing'"),
        ("/gradio_api/queue/join", {"data": [], "fn_index": 999}, 400, "fn_index names no event"),
        ("/gradio_api/call/table", {"data": "x" * (MAX_BODY_BYTES + 10)}, 413, "over 1500 kB"),
        ("/gradio_api/call/table", [1, 2], 400, "must be a JSON object"),
    ],
)
def test_malformed_calls_never_reach_gradio_and_log_one_short_line(
    guarded, caplog, path, body, status, why
):
    client, seen, _ = guarded
    before = len(seen)
    with caplog.at_level(logging.INFO, logger="mlenergy.leaderboard.call_guard"):
        resp = client.post(path, content=json.dumps(body))
    assert resp.status_code == status and why in resp.json()["detail"]
    assert len(seen) == before
    (record,) = caplog.records
    assert len(record.getMessage()) < 300


def test_a_page_event_with_a_huge_text_is_refused(guarded):
    client, seen, page_event = guarded
    before = len(seen)
    resp = client.post(
        "/gradio_api/queue/join", json={"data": ["x" * 10_000], "fn_index": page_event}
    )
    assert resp.status_code == 400 and "longer than 2000 characters" in resp.json()["detail"]
    assert len(seen) == before


def test_well_formed_calls_reach_gradio_with_their_body(guarded):
    client, seen, page_event = guarded
    calls = [
        ("/gradio_api/call/table", {"data": ["gpqa", 2]}),
        ("/gradio_api/call/v2/table", {"task": "gpqa"}),
        ("/gradio_api/queue/join", {"data": ["hello"], "fn_index": page_event}),
    ]
    for path, body in calls:
        raw = json.dumps(body).encode()
        assert client.post(path, content=raw).status_code == 200
        assert seen[-1] == raw
    assert client.get("/gradio_api/info").status_code == 200  # other routes pass untouched


def test_refused_is_an_http_status_and_a_line():
    exc = Refused(400, "no")
    assert (exc.status, exc.message) == (400, "no")


def test_capped_lines_cut_long_lines_and_say_how_much():
    out = io.StringIO()
    capped = CappedLines(out, limit=10)
    capped.write("short\n")
    capped.write("x" * 5_000_000)
    capped.write("y" * 5)
    capped.write("\nnext line\n")
    assert out.getvalue().splitlines() == [
        "short",
        "xxxxxxxxxx… (4999995 characters cut)",
        "next line",
    ]


def test_an_absent_module_fails_to_import_at_once(monkeypatch):
    name = "mlenergy_no_such_module_for_tests"
    monkeypatch.delitem(sys.modules, name, raising=False)
    assert gradio_costs.mark_absent_modules((name, "json")) == [name]  # json is installed
    assert sys.modules[name] is None
    with pytest.raises(ImportError):
        importlib.import_module(name)
    monkeypatch.delitem(sys.modules, name)


def test_component_classes_carry_their_signature():
    demo = _demo()
    gradio_costs.fix_component_signatures(demo)
    init = gr.Textbox.__init__
    assert init.__signature__ == inspect.signature(init, follow_wrapped=False)
    assert "value" in inspect.signature(gr.Textbox.__init__).parameters
    assert gradio_costs.fix_component_signatures(demo) == 0  # once


def test_the_idle_queue_is_paced_and_an_app_without_queue_left_alone():
    assert gradio_costs.quiet_idle_queue(object()) is False  # type: ignore[arg-type]
    demo = _demo()
    demo.queue()
    assert demo._queue.sleep_when_free < gradio_costs.IDLE_POLL_S  # Gradio's own pace
    assert gradio_costs.quiet_idle_queue(demo, idle_s=0.02, progress_s=0.2) is True
    assert demo._queue.sleep_when_free == 0.02
    assert demo._queue.progress_update_sleep_when_free == 0.2
