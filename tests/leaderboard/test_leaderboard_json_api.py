"""The JSON API (``GET /api/v1/...``): what the page shows, the Gradio functions' own answers,
caching headers, and one-line refusals. In process: the API app over a small store."""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import re

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from mlenergy.errors import UserError
from mlenergy.leaderboard import answers, catalog
from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.app import build_app
from mlenergy.leaderboard.columns import COLUMN_BY_NAME
from mlenergy.leaderboard.export import export_board
from mlenergy.leaderboard.filters import FILTERS, widget_query
from mlenergy.leaderboard.html import format_value
from mlenergy.leaderboard.json_api import JsonApiMount, params_of, parse_query
from mlenergy.reference import PACKAGE_DIR
from mlenergy.store import RunStore
from mlenergy.testing.synthetic import synthetic_model, synthetic_run

DENSE = synthetic_model("org/dense-8b", 8.0, False)
MOE = synthetic_model("org/moe-a3b", 3.0, True)
MEASURED = "measured:zeus-nvml"
PUBLISHED = """model_id,benchmark,score,unit,setting,source,source_date
org/moe-a3b,LMArena text score,1200,Elo,text arena,lmarena.ai,2025-05
"""


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """The built app (the page as it opens) and a client of its JSON API."""
    data_dir = tmp_path_factory.mktemp("json-api-store")
    runs = [
        synthetic_run(
            model,
            gpu=gpu,
            tdp_w=tdp,
            batch_size=bs,
            task=task,
            index=i,
            timeline=True,
            energy_source=MEASURED,
        )
        for i, (model, (gpu, tdp), bs, task) in enumerate(
            (m, g, b, t)
            for m in (DENSE, MOE)
            for g in (("H100-SXM5-80GB", 700.0), ("B200", 1000.0))
            for b in (16, 128)
            for t in ("lm-arena-chat", "gpqa")
        )
    ]
    toy = synthetic_run(synthetic_model("toy/emulated", 1.0, False), index=90)
    launched = synthetic_run(DENSE, gpu="L40S", tdp_w=350.0, index=91, energy_source=MEASURED)
    launched = launched.model_copy(
        update={"tags": {"server_log": "/srv/runs/vllm.log", "endpoint": "http://10.1.2.3:8000",
                         "study": "demo"}}
    )  # fmt: skip
    RunStore(data_dir).append([*runs, toy, launched])
    published = tmp_path_factory.mktemp("json-api-published") / "published-quality.csv"
    published.write_text(PUBLISHED, encoding="utf-8")
    demo = build_app(data_dir, published_quality=published, reference=False)

    async def not_api(scope, receive, send):  # everything outside /api/v1 would be Gradio's
        raise AssertionError(f"{scope['path']} reached the page's app")

    client = TestClient(JsonApiMount(not_api, demo.json_api))
    return demo, client, launched.run_id


def _functions(demo):
    return demo.json_api.state.answers.functions


def _widget(demo, elem_id: str):
    return next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == elem_id)


def _cells(html: str, name: str) -> list[str]:
    return re.findall(rf'<td data-col="{name}"[^>]*>(.*?)</td>', html)


def _strict(value):
    """An answer as strict JSON reads it (NaN and infinities as null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strict(v) for v in value]
    return value


def _assert_page_shows(html: str, status: str, answer: dict) -> None:
    """Every cell of the page's table is the JSON row's value, formatted as the page does."""
    assert f"{answer['total']} rows · page {answer['page']} of {answer['pages']}" in status
    shown = re.findall(r'<th [^>]*data-col="([^"]+)"', html)
    assert "model_id" in shown and "energy_per_token_j" in shown
    for name in shown:
        fmt = COLUMN_BY_NAME[name].fmt
        assert _cells(html, name) == [format_value(r.get(name), fmt) for r in answer["rows"]], name


def test_the_default_answer_is_the_page_as_it_opens(app):
    demo, client, _ = app
    answer = client.get("/api/v1/leaderboard").json()
    assert answer["task"] == "lm-arena-chat" and answer["sources"] == ["measured-gpu"]
    assert answer["quality"] == "published:LMArena text score"
    assert answer["total"] == 5  # 2 models x 2 GPUs, and the L40S run; no emulated row
    page = _widget(demo, "lb-grid").value
    _assert_page_shows(page, _widget(demo, "lb-status").value, answer)
    assert "toy/emulated" not in page and "toy/emulated" not in json.dumps(answer)


def test_a_filtered_view_is_what_the_page_shows_for_the_same_filters(app):
    demo, client, _ = app
    ctx = demo.json_api.state.answers.ctx
    values = dict.fromkeys(FILTERS)
    values.update(task="gpqa", hardware=["B200"], sources=["measured-gpu"], best=False)
    values.update(sort_by="itl_ms", desc=True, itl=1e12, budget=1e12)
    q = widget_query(tuple(values[n] for n in FILTERS), ctx)
    key = "published:LMArena text score"
    html, status, _ = answers.table_page(ctx, key, q)
    answer = client.get(
        "/api/v1/leaderboard?task=gpqa&hardware=B200&best=false&sort_by=itl_ms&descending=true"
        f"&quality={key}"
    ).json()
    assert answer["total"] == 4
    _assert_page_shows(html, status, answer)


@pytest.mark.parametrize(
    ("path", "name", "args"),
    [
        ("/api/v1/leaderboard", "leaderboard_table", {}),
        (
            "/api/v1/leaderboard?task=all&sources=all&hardware=B200,H100-SXM5-80GB&page_size=3"
            "&page=2&sort_by=itl_ms&descending=1",
            "leaderboard_table",
            {"task": "all", "sources": ["all"], "hardware": ["B200", "H100-SXM5-80GB"],
             "page_size": 3, "page": 2, "sort_by": "itl_ms", "descending": True},
        ),
        ("/api/v1/leaderboard?gpus=1&gpus=2&max_itl_ms=40", "leaderboard_table",
         {"gpus": [1, 2], "max_itl_ms": 40.0}),
        ("/api/v1/models", "models", {}),
        ("/api/v1/models/org/dense-8b", "model_detail", {"model_id": "org/dense-8b"}),
        ("/api/v1/filters", "filter_choices", {}),
        ("/api/v1/plots/latency?best=false", "plot", {"kind": "latency", "best": False}),
        ("/api/v1/compare?models=org/dense-8b,org/moe-a3b", "compare",
         {"models": ["org/dense-8b", "org/moe-a3b"]}),
        ("/api/v1/power-budget?budget_w=5000", "power_budget", {"budget_w": 5000.0}),
        ("/api/v1/reference", "reference", {}),
    ],
)  # fmt: skip
def test_each_route_answers_what_its_gradio_function_answers(app, path, name, args):
    demo, client, _ = app
    resp = client.get(path)
    assert resp.status_code == 200, resp.text
    assert resp.json() == _strict(json.loads(json.dumps(_functions(demo)[name](**args))))


def test_a_run_answers_provenance_without_server_local_tags(app):
    demo, client, run_id = app
    answer = client.get(f"/api/v1/runs/{run_id}").json()
    assert answer == _strict(json.loads(json.dumps(_functions(demo)["provenance"](run_id))))
    assert answer["run_id"] == run_id and answer["tags"] == {"study": "demo"}
    text = json.dumps(answer)
    assert "/srv/runs" not in text and "10.1.2.3" not in text
    assert answer["power_timeline"] is None or answer["power_timeline"]["power_w"]


def test_estimate_route(app):
    demo, client, _ = app
    answer = client.get("/api/v1/estimate?batch_size=64&output_tokens=256").json()
    expected = _functions(demo)["estimate"](batch_size=64, output_tokens=256)
    assert answer == _strict(json.loads(json.dumps(expected)))
    assert answer["energy_source"].startswith("estimated:")


def test_answers_carry_etag_and_cache_control_and_304(app):
    _, client, _ = app
    first = client.get("/api/v1/leaderboard")
    etag = first.headers["etag"]
    assert first.headers["cache-control"].startswith("public, max-age=")
    assert first.headers["content-type"] == "application/json"
    again = client.get("/api/v1/leaderboard", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    other = client.get("/api/v1/leaderboard?task=gpqa", headers={"If-None-Match": etag})
    assert other.status_code == 200 and other.headers["etag"] != etag
    zipped = client.get("/api/v1/leaderboard", headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip" and zipped.json() == first.json()


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/api/v1/leaderboard?page=x", "page must be a whole number, not 'x'"),
        ("/api/v1/leaderboard?page=99", "page 99 is out of range"),
        ("/api/v1/leaderboard?best=maybe", "best must be true or false"),
        ("/api/v1/leaderboard?nope=1", "'nope' is not a parameter here"),
        ("/api/v1/leaderboard?task=a&task=b", "task is given twice"),
        ("/api/v1/leaderboard?sources=solar", "sources 'solar' is not an energy source"),
        ("/api/v1/leaderboard?sort_by=../../etc", "sort_by '../../etc' is not a column"),
        ("/api/v1/leaderboard?max_itl_ms=nan", "max_itl_ms nan is out of range"),
        ("/api/v1/runs/zzz", "run_id 'zzz' is not in the store"),
        ("/api/v1/plots/pie", "kind 'pie' is not a plot"),
        ("/api/v1/compare", "models is required"),
        ("/api/v1/leaderboard?search=" + "x" * 5000, "the query is longer than 4096 bytes"),
    ],
)
def test_a_bad_parameter_is_400_with_one_line(app, path, why):
    _, client, _ = app
    resp = client.get(path)
    assert resp.status_code == 400
    assert resp.headers["cache-control"] == "no-store"
    message = resp.json()["error"]
    assert why in message and "\n" not in message and len(message) < 400
    assert "Traceback" not in resp.text and "site-packages" not in resp.text


def test_unknown_routes_and_the_openapi_page(app):
    _, client, _ = app
    missing = client.get("/api/v1/nothing")
    assert missing.status_code == 404 and "/api/v1/leaderboard" in missing.json()["error"]
    spec = client.get("/api/v1/openapi.json").json()
    assert spec["info"]["version"] == "1"
    table = spec["paths"]["/leaderboard"]["get"]
    names = [p["name"] for p in table["parameters"]]
    assert names[:3] == ["task", "quality", "hardware"] and "page_size" in names
    assert {"/runs/{run_id}", "/models", "/reference", "/models/{model_id}"} <= set(spec["paths"])
    assert client.get("/api/v1/docs").status_code == 200
    index = client.get("/api/v1/").json()
    assert "/api/v1/leaderboard" in index["routes"] and index["snapshot"]["runs"] == 18


def test_models_and_reference_name_no_server_folder(app):
    _, client, _ = app
    models = client.get("/api/v1/models").json()["models"]
    dense = next(m for m in models if m["model_id"] == "org/dense-8b")
    assert dense["runs"] == 9 and dense["hardware"] == ["B200", "H100-SXM5-80GB", "L40S"]
    assert dense["sources"] == ["measured-gpu"] and dense["layers"] == ["store"]
    reference = client.get("/api/v1/reference")
    body = reference.json()
    assert body["shown"] is False and body["runs"] == 0  # a board of the store alone
    assert any(f["path"] == "gpu_catalog.json" and f["files"] == 1 for f in body["files"])
    assert str(PACKAGE_DIR) not in reference.text


def test_query_lists_and_types_follow_the_function_signature(app):
    demo, _, _ = app
    params = params_of(_functions(demo)["leaderboard_table"])
    assert params["hardware"].kind == "list[str]" and params["gpus"].kind == "list[int]"
    assert params["best"].kind == "bool" and params["max_itl_ms"].kind == "float"
    args = parse_query(params, [("hardware", "A,B"), ("hardware", "C"), ("max_itl_ms", "")])
    assert args == {"hardware": ["A", "B", "C"], "max_itl_ms": None}
    assert params["page_size"].default == lb.PAGE_SIZE


def test_export_writes_the_api_answers_with_their_snapshot(app, tmp_path):
    demo, client, run_id = app
    ctx = demo.json_api.state.answers.ctx
    manifest = export_board(ctx, tmp_path / "board")
    index = json.loads((tmp_path / "board" / "index.json").read_text())
    assert index["snapshot"] == manifest["snapshot"] == catalog.snapshot(ctx)
    assert index["snapshot"]["runs"] == 18 and len(index["snapshot"]["digest"]) == 64
    assert index["exported_at"].startswith(str(dt.date.today().year))
    apis = {f["api"] for f in index["files"]}
    assert {"/api/v1/leaderboard", "/api/v1/models", "/api/v1/plots/latency"} <= apis
    assert f"/api/v1/runs/{run_id}" in apis  # the L40S run is on the opening page
    for entry in index["files"]:
        written = (tmp_path / "board" / entry["file"]).read_bytes()
        assert client.get(entry["api"]).content == written, entry
    served = json.loads((tmp_path / "board" / f"runs/{run_id}.json").read_text())
    assert served["tags"] == {"study": "demo"}


def test_export_refuses_a_folder_with_files_and_leaves_it(app, tmp_path):
    demo, _, _ = app
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(UserError, match="is not an empty folder"):
        export_board(demo.json_api.state.answers.ctx, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_the_rows_route_reads_as_a_pandas_frame(app):
    _, client, _ = app
    query = "task=all&sources=all&best=false&page_size=1000"
    frame = pd.read_json(io.StringIO(client.get(f"/api/v1/leaderboard/rows?{query}").text))
    whole = client.get(f"/api/v1/leaderboard?{query}").json()
    assert len(frame) == whole["total"] == 18
    assert frame["model_id"].tolist() == [r["model_id"] for r in whole["rows"]]
    energy = [r["energy_per_token_j"] for r in whole["rows"]]
    assert frame["energy_per_token_j"].tolist() == pytest.approx(energy, rel=1e-12)  # its parser
