"""The app's API through gradio_client and the JSON API against a served leaderboard."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request

import numpy as np
import pandas as pd
import pytest

from mlenergy.store import RunStore
from mlenergy.testing.server import LeaderboardStartError, serve_leaderboard
from mlenergy.testing.synthetic import synthetic_model, synthetic_quality, synthetic_run

gradio_client = pytest.importorskip("gradio_client")

pytestmark = pytest.mark.slow  # starts a server (~20 s on 2 busy cores)

DENSE = synthetic_model("org/dense-8b", 8.0, False)
MOE = synthetic_model("org/moe-a3b", 3.0, True)
PUBLIC = {
    "/leaderboard_table",
    "/filter_choices",
    "/plot",
    "/model_detail",
    "/provenance",
    "/compare",
    "/power_budget",
    "/models",
    "/reference",
    "/reload",
}
PUBLISHED = """model_id,benchmark,score,unit,setting,source,source_date
org/moe-a3b,GPQA-Diamond,55.0,% accuracy,0-shot,Model card of org/moe-a3b,2025-05
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("api-store")
    runs = [
        synthetic_run(model, gpu=gpu, tdp_w=tdp, batch_size=bs, task=task, index=i, timeline=True)
        for i, (model, (gpu, tdp), bs, task) in enumerate(
            (m, g, b, t)
            for m in (DENSE, MOE)
            for g in (("H100-SXM5-80GB", 700.0), ("B200", 1000.0))
            for b in (16, 128)
            for t in ("lm-arena-chat", "gpqa")
        )
    ]
    runs.append(synthetic_run(synthetic_model("org/coder-7b", 7.0, False), task="gpqa", index=99))
    RunStore(data_dir).append([*runs, synthetic_quality(DENSE, 0.6)])
    published = tmp_path_factory.mktemp("api-published") / "published-quality.csv"
    published.write_text(PUBLISHED, encoding="utf-8")
    log = tmp_path_factory.mktemp("api-log") / "server.log"
    args = ("--published-quality", str(published), "--no-reference")
    try:
        with serve_leaderboard(data_dir, log_path=log, extra_args=args) as url:
            yield gradio_client.Client(url, verbose=False), data_dir, url, log
    except LeaderboardStartError as exc:
        pytest.fail(str(exc))


def test_endpoints_are_named_with_named_parameters(served):
    client, _, _, _ = served
    info = client.view_api(print_info=False, return_format="dict")
    names = set(info["named_endpoints"])
    expected = PUBLIC | {"/estimate"}
    assert names == expected
    assert info["unnamed_endpoints"] == {}
    params = [
        p["parameter_name"] for p in info["named_endpoints"]["/leaderboard_table"]["parameters"]
    ]
    assert params[:3] == ["task", "quality", "hardware"]
    assert all(
        p["parameter_has_default"]
        for p in info["named_endpoints"]["/leaderboard_table"]["parameters"]
    )


def test_table_default_view_and_filters(served):
    client, _, _, _ = served
    opening = client.predict(api_name="/leaderboard_table")  # the page's: measured GPU rows
    assert opening["sources"] == ["measured-gpu"] and opening["total"] == 0
    default = client.predict(sources=["emulated"], api_name="/leaderboard_table")
    assert default["task"] == "lm-arena-chat"
    assert default["total"] == 4  # 2 models x 2 GPUs, best configuration each
    assert {r["task"] for r in default["rows"]} == {"lm-arena-chat"}
    assert all(isinstance(r["energy_per_token_j"], float) for r in default["rows"])
    energies = [r["energy_per_token_j"] for r in default["rows"]]
    assert energies == sorted(energies)
    b200 = client.predict(
        task="all", sources=["all"], hardware=["B200"], best=False, sort_by="itl_ms",
        descending=True, api_name="/leaderboard_table",
    )  # fmt: skip
    assert b200["total"] == 8 and {r["hardware"] for r in b200["rows"]} == {"B200"}
    itl = [r["itl_ms"] for r in b200["rows"]]
    assert itl == sorted(itl, reverse=True)
    paged = client.predict(
        task="all", sources=["all"], best=False, page_size=5, page=2,
        api_name="/leaderboard_table",
    )  # fmt: skip
    assert paged["pages"] == 4 and paged["page"] == 2 and len(paged["rows"]) == 5


def test_bad_argument_names_it(served):
    client, _, _, _ = served
    with pytest.raises(gradio_client.exceptions.AppError, match="sort_by 'nope'"):
        client.predict(sort_by="nope", api_name="/leaderboard_table")
    with pytest.raises(gradio_client.exceptions.AppError, match="task 'nope'"):
        client.predict(task="nope", api_name="/leaderboard_table")
    with pytest.raises(gradio_client.exceptions.AppError, match="run_id 'zzz'"):
        client.predict(run_id="zzz", api_name="/provenance")


def test_detail_provenance_compare_plot(served):
    client, _, _, _ = served
    detail = client.predict(model_id="org/dense-8b", api_name="/model_detail")
    assert len(detail["rows"]) == 8
    run_id = detail["rows"][0]["run_id"]
    prov = client.predict(run_id=run_id, api_name="/provenance")
    assert prov["run_id"] == run_id and prov["energy_source"] == "emulated:synthetic"
    assert len(prov["power_timeline"]["power_w"]) > 0
    cmp = client.predict(
        models=["org/dense-8b", "org/coder-7b"], sources=["all"], api_name="/compare"
    )
    assert "org/coder-7b has no runs for task 'lm-arena-chat'" in cmp["note"]
    assert "gpqa" in cmp["note"]
    fig = client.predict(kind="latency", sources=["emulated"], api_name="/plot")
    assert fig["data"] and "4 rows" in fig["layout"]["title"]["text"]
    choices = client.predict(api_name="/filter_choices")
    assert "org/coder-7b" in choices["model_id"] and choices["quality"]


def test_reload_sees_new_runs(served):
    client, data_dir, _, _ = served
    assert client.predict(api_name="/reload") == {"changed": False, "runs": 17}
    RunStore(data_dir).append([synthetic_run(DENSE, gpu="L40S", tdp_w=350.0, index=500)])
    assert client.predict(api_name="/reload") == {"changed": True, "runs": 18}
    rows = client.predict(hardware=["L40S"], sources=["all"], api_name="/leaderboard_table")["rows"]
    assert [r["model_id"] for r in rows] == ["org/dense-8b"]


def test_estimate(served):
    client, _, _, _ = served
    est = client.predict(
        model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM5-80GB", batch_size=64,
        input_tokens=512, output_tokens=256, precision="bfloat16", api_name="/estimate",
    )  # fmt: skip
    assert est["energy_per_token_j"] > 0 and est["energy_source"].startswith("estimated:")
    assert est["energy_per_token_j_lo"] <= est["energy_per_token_j"] <= est["energy_per_token_j_hi"]
    with pytest.raises(gradio_client.exceptions.AppError, match="not a model id"):
        client.predict(model="/etc/passwd", api_name="/estimate")


def test_published_quality_in_table_and_plot(served):
    client, _, _, _ = served
    key = "published:GPQA-Diamond"
    assert key in client.predict(api_name="/filter_choices")["quality"]
    table = client.predict(task="gpqa", quality=key, sources=["all"], api_name="/leaderboard_table")
    moe = [r for r in table["rows"] if r["model_id"] == "org/moe-a3b"]
    assert moe and all(r["quality"] == 55.0 for r in moe)
    assert all(r["quality_source"] == key for r in moe)
    assert all("Model card of org/moe-a3b" in r["quality_link"] for r in moe)
    for r in moe:
        assert r["energy_per_correct_j"] > 0
    others = [r for r in table["rows"] if r["model_id"] != "org/moe-a3b"]
    assert others and all(r["quality"] is None and r["quality_source"] == "" for r in others)
    fig = client.predict(
        kind="quality", task="gpqa", quality=key, sources=["all"], api_name="/plot"
    )
    points = [t for t in fig["data"] if t["name"] != "Pareto frontier"]
    assert sum(_points(t["x"]) for t in points) == len(moe)


def _points(values) -> int:
    """Number of values of a Plotly JSON array (a list, or typed ``{dtype, bdata}``)."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).size
    return len(values)


def test_power_budget_endpoint(served):
    client, _, _, _ = served
    answer = client.predict(budget_w=50_000, itl_limit_ms=40, api_name="/power_budget")
    assert answer["task"] == "lm-arena-chat" and answer["budget_w"] == 50_000
    assert answer["rows"] == [] and answer["left_out"] == []  # emulated runs are no candidates
    with pytest.raises(gradio_client.exceptions.AppError, match=r"pue is 0\.5"):
        client.predict(pue=0.5, api_name="/power_budget")
    with pytest.raises(gradio_client.exceptions.AppError, match="task is not set"):
        client.predict(task="all", api_name="/power_budget")


def test_a_string_for_a_list_and_a_page_out_of_range_are_errors(served):
    client, _, _, _ = served
    with pytest.raises(gradio_client.exceptions.AppError, match="hardware must be a list"):
        client.predict(hardware="B200", api_name="/leaderboard_table")
    with pytest.raises(gradio_client.exceptions.AppError, match="page 99 is out of range"):
        client.predict(page=99, api_name="/leaderboard_table")
    with pytest.raises(gradio_client.exceptions.AppError, match="models must be a list"):
        client.predict(models="org/dense-8b", api_name="/compare")


def test_estimate_refuses_file_names_without_showing_paths(served):
    client, _, _, _ = served
    with pytest.raises(gradio_client.exceptions.AppError) as err:
        client.predict(model="some_file.json ", api_name="/estimate")
    text = str(err.value)
    assert "not a model id of the reference catalog" in text
    assert "Traceback" not in text and "site-packages" not in text


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_json_api_answers_what_the_gradio_endpoints_answer(served):
    client, _, url, _ = served
    pairs = [
        ("api/v1/leaderboard", {}, "/leaderboard_table"),
        (
            "api/v1/leaderboard?sources=all&task=all&hardware=B200&sort_by=itl_ms&descending=true",
            {"sources": ["all"], "task": "all", "hardware": ["B200"], "sort_by": "itl_ms",
             "descending": True},
            "/leaderboard_table",
        ),
        ("api/v1/models/org/dense-8b", {"model_id": "org/dense-8b"}, "/model_detail"),
        ("api/v1/models", {}, "/models"),
        ("api/v1/filters", {}, "/filter_choices"),
    ]  # fmt: skip
    for path, kwargs, name in pairs:
        status, answer = _get(url + path)
        assert status == 200 and answer == client.predict(**kwargs, api_name=name), path
    run_id = client.predict(model_id="org/dense-8b", api_name="/model_detail")["rows"][0]["run_id"]
    status, answer = _get(f"{url}api/v1/runs/{run_id}")
    assert answer == client.predict(run_id=run_id, api_name="/provenance")
    status, answer = _get(url + "api/v1/leaderboard?sort_by=nope")
    assert status == 400 and answer == {
        "error": "sort_by 'nope' is not a column; columns: "
        + ", ".join(client.predict(api_name="/filter_choices")["sort_by"])
    }


@pytest.mark.parametrize(
    ("route", "body", "status"),
    [
        ("call/leaderboard_table", {"data": ["x" * 1_000_000, 1]}, 400),
        ("call/leaderboard_table", {"data": ["x" * 5_000_000, 1]}, 413),
        ("call/v2/leaderboard_table", {"nope": "x" * 1_000_000}, 400),
    ],
)
def test_malformed_gradio_calls_are_refused_in_one_short_log_line(served, route, body, status):
    _, _, url, log = served
    before = log.stat().st_size
    request = urllib.request.Request(
        url + "gradio_api/" + route,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=60)
    assert err.value.code == status
    assert len(json.loads(err.value.read())["detail"]) < 300
    time.sleep(0.5)  # the server's log line lands
    assert 0 < log.stat().st_size - before < 400


def test_a_notebook_reads_the_table_with_pandas(served):
    client, _, url, _ = served
    table = pd.read_json(f"{url}api/v1/leaderboard/rows?task=all&sources=all&page_size=1000")
    rows = client.predict(
        task="all", sources=["all"], page_size=1000, api_name="/leaderboard_table"
    )
    assert table["model_id"].tolist() == [r["model_id"] for r in rows["rows"]]
    energy = [r["energy_per_token_j"] for r in rows["rows"]]
    assert table["energy_per_token_j"].tolist() == pytest.approx(energy, rel=1e-12)
