"""The leaderboard in a real browser: filter, plot, model detail, compare, submit, screenshot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlenergy.testing.server import STATUS_JS
from mlenergy.testing.synthetic import synthetic_model, synthetic_run

pytestmark = pytest.mark.browser

HOSTILE = "<script>alert(1)</script>"
ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "test-output"  # git-ignored


def _shot(page, name: str, full_page: bool = False) -> None:
    OUTPUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUTPUT / name), full_page=full_page)


def _status(page) -> str:
    """The table's status line, e.g. ``25 rows · page 1 of 1`` (without progress timers)."""
    return page.evaluate(STATUS_JS)


def _wait_status_change(page, before: str) -> str:
    page.wait_for_function(
        f"before => {{ const s = ({STATUS_JS})(); return s && s !== before; }}", arg=before
    )
    return _status(page)


def _wait_all_cells(page, column: str, expected: str, table: str = "#lb-table") -> None:
    """Wait until the table has rows and every ``column`` cell reads ``expected``."""
    page.wait_for_function(
        """([sel, want]) => {
            const cells = [...document.querySelectorAll(sel)].map(c => c.innerText.trim());
            return cells.length > 0 && cells.every(c => c === want);
        }""",
        arg=[f'{table} tbody td[data-col="{column}"]', expected],
    )


def _pick(page, elem_id: str, value: str) -> None:
    """Choose ``value`` in the Gradio dropdown ``#elem_id``."""
    page.locator(f"#{elem_id} input").click()
    page.locator(f"#{elem_id} input").fill(value)
    page.get_by_role("option", name=value, exact=True).first.click()


def _cells(page, column: str, table: str = "#lb-table") -> list[str]:
    return page.locator(f'{table} tbody td[data-col="{column}"]').all_inner_texts()


def test_filter_changes_table_and_screenshot(page, leaderboard_server):
    OUTPUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUTPUT / "leaderboard.png"), full_page=False)  # test data: never docs/
    before = _status(page)
    hardware = set(_cells(page, "hardware"))
    assert {"B200", "H100-SXM5-80GB"} <= hardware
    page.locator("#f-hardware label", has_text="B200").first.click()
    _wait_all_cells(page, "hardware", "B200")
    assert _status(page) != before
    # CSV of exactly the rows shown
    page.locator("#lb-csv").click()
    link = page.locator("#lb-csv-file a[href]").first
    link.wait_for(timeout=30_000)
    text = page.request.get(link.get_attribute("href")).text()
    lines = text.strip().splitlines()
    assert lines[0].startswith("Model,Hardware,GPUs")
    assert len(lines) - 1 == int(_status(page).split()[0])
    assert all(",B200," in line for line in lines[1:])
    # tooltips with units on the headers
    title = page.locator('#lb-table th[data-col="energy_per_token_j"]').get_attribute("title")
    assert "joules" in title


def test_architecture_filter_has_hybrid(page):
    _pick(page, "f-task", "synthetic-chat")
    page.locator("#f-arch label", has_text="hybrid").first.click()
    _wait_all_cells(page, "arch_kind", "hybrid")
    assert "synthetic/hybrid-9b" in _cells(page, "model_id")


def test_search_sort_and_hostile_name_is_text(page):
    page.locator("#f-search textarea, #f-search input").first.fill("script")
    # The task filter may hide the synthetic rows: clear it to see them.
    page.locator("#f-task input").click()
    page.locator("#f-task input").fill("synthetic-chat")
    page.get_by_role("option", name="synthetic-chat", exact=True).first.click()
    _wait_all_cells(page, "model_id", HOSTILE)
    assert page.locator("#lb-table script").count() == 0
    assert page.dialogs == []


def test_plot_draws_on_open_and_follows_filters(page):
    page.get_by_role("tab", name="Plots").click()  # no button to press
    page.wait_for_selector("#plot-figure .js-plotly-plot, #plot-figure .plotly", timeout=60_000)
    text = page.locator("#plot-figure").inner_text()
    assert "Pareto frontier" in text
    rows = int(_status(page).split()[0])
    assert f"{rows} rows: best configuration per model x hardware, as the table" in text
    _pick(page, "f-task", "synthetic-chat")
    page.wait_for_function(
        "() => (document.querySelector('#plot-figure')?.innerText || '').includes('8 rows: best')"
    )  # 4 synthetic models x 2 GPUs
    _shot(page, "leaderboard-plot.png")


def test_model_column_pinned_and_columns_chosen(page):
    box = page.locator(".lb-scroll").first
    box.evaluate("el => { el.scrollLeft = el.scrollWidth; }")
    cell = page.locator('#lb-table tbody td[data-col="model_id"]').first
    left = box.bounding_box()["x"]
    assert abs(cell.bounding_box()["x"] - left) < 2  # still at the left edge, not scrolled away
    assert page.locator('#lb-table th[data-col="run_id"]').is_visible()
    page.locator("#lb-columns-box").get_by_text("Columns").first.click()
    page.locator("#lb-columns label", has_text="Batch").first.click()
    page.wait_for_function("() => !document.querySelector('#lb-table th[data-col=\"batch_size\"]')")
    assert page.locator('#lb-table th[data-col="model_id"]').count() == 1


def test_model_detail_shows_configs_and_provenance(page):
    page.get_by_role("tab", name="Model detail").click()
    _pick(page, "detail-model", "synthetic/dense-8b")
    # The tab opens on the top rows' model: wait for the picked model's four runs to replace them.
    page.wait_for_function(
        "() => document.querySelectorAll('#lb-detail tbody tr').length === 4", timeout=30_000
    )
    page.wait_for_function(
        "() => (document.querySelector('#detail-provenance')?.innerText || '')"
        ".includes('synthetic/dense-8b')"
    )
    assert "measured:zeus-nvml" in page.locator("#detail-provenance").inner_text()
    page.wait_for_selector("#detail-timeline .js-plotly-plot, #detail-timeline .plotly")
    _shot(page, "leaderboard-detail.png", full_page=True)


def test_hostile_model_detail_is_text(page):
    page.get_by_role("tab", name="Model detail").click()
    page.locator("#detail-model input").click()
    page.locator("#detail-model input").fill("script")
    option = page.get_by_role("option", name=HOSTILE, exact=True).first
    assert option.inner_text().strip().endswith(HOSTILE)
    option.click()
    page.wait_for_function(
        "want => (document.querySelector('#detail-provenance')?.innerText || '').includes(want)",
        arg=HOSTILE,
    )
    assert page.dialogs == []


def test_compare_two_models(page):
    page.get_by_role("tab", name="Compare").click()
    page.wait_for_function("() => document.querySelectorAll('#lb-compare thead th').length >= 3")
    page.locator("#compare-models .token-remove.remove-all").first.click()  # opens on top rows
    for model in ("synthetic/dense-8b", "synthetic/moe-a3b"):
        _pick(page, "compare-models", model)
    page.wait_for_function("() => document.querySelectorAll('#lb-compare thead th').length === 3")
    heads = page.locator("#lb-compare thead th").all_inner_texts()
    assert heads == ["Metric", "synthetic/dense-8b", "synthetic/moe-a3b"]
    task = page.locator("#f-task input").input_value()
    if task and task != "synthetic-chat":  # the default task: the synthetic models lack it
        note = page.locator("#compare-note").inner_text()
        assert f"no runs for task '{task}'" in note and "synthetic-chat" in note


def _bundle(tmp_path, valid: bool):
    run = synthetic_run(
        synthetic_model("community/tiny-1b", 1.0, False),
        energy_source="measured:zeus-nvml" if valid else "emulated:test",
        index=900,
    )
    data = {"submitter": "Browser Test Lab", "runs": [json.loads(run.model_dump_json())]}
    if not valid:
        data["runs"][0]["workload"]["batch_size"] = -3
        data["runs"][0]["phases"][0]["energy_j"] = -1.0
    path = tmp_path / ("good.json" if valid else "bad.json")
    path.write_text(json.dumps(data))
    return path


def test_submit_bad_then_good(page, tmp_path, leaderboard_server):
    pytest.importorskip("mlenergy.store.submissions", reason="submission intake not written yet")
    page.get_by_role("tab", name="Submit").click()
    page.locator("#submit-file input[type=file]").set_input_files(
        str(_bundle(tmp_path, valid=False))
    )
    page.locator("#submit-run").click()
    page.wait_for_selector("#submit-result .lb-problems", timeout=60_000)
    problems = page.locator("#submit-result li").all_inner_texts()
    assert len(problems) >= 2  # every problem at once
    # The handled upload is deleted on the server and the file box cleared for the next one.
    page.wait_for_selector("#submit-file input[type=file]", state="attached", timeout=10_000)
    page.locator("#submit-file input[type=file]").set_input_files(
        str(_bundle(tmp_path, valid=True))
    )
    page.locator("#submit-run").click()
    page.wait_for_selector("#submit-result .lb-ok", timeout=60_000)
    assert "Queued" in page.locator("#submit-result").inner_text()
    pending = leaderboard_server["data_dir"] / "submissions" / "pending"
    assert pending.is_dir() and any(pending.iterdir())
    _shot(page, "leaderboard-submit.png")


def test_estimator_playground_updates_without_reload(page):
    pytest.importorskip("mlenergy.estimate.api", reason="the estimator is not installed")
    if page.get_by_role("tab", name="Estimator").count() == 0:
        pytest.skip("the estimator tab is hidden (no estimator)")
    page.get_by_role("tab", name="Estimator").click()
    page.locator("#est-run").click()
    page.wait_for_selector("#est-table", timeout=60_000)
    first = page.locator("#est-table").inner_text()
    assert "Energy per output token" in first and "estimated:mlenergy-" in first
    page.evaluate("window.__marker = 1")  # survives only if the page does not reload
    _pick(page, "est-gpu", "B200")
    page.wait_for_function(
        "before => document.querySelector('#est-table')?.innerText !== before", arg=first
    )
    assert page.evaluate("window.__marker") == 1
    page.wait_for_selector("#est-plot .js-plotly-plot, #est-plot .plotly")


def test_all_configs_paging_and_sort(page):
    before = _status(page)
    page.locator("#f-best input[type=checkbox]").uncheck()
    status = _wait_status_change(page, before)
    total = int(status.split()[0])
    assert total > 50 and "page 1 of" in status
    assert page.locator("#lb-table tbody tr").count() == 50
    first_page = _cells(page, "run_id")
    page.locator("#lb-next").click()
    page.wait_for_function(
        "() => document.querySelector('#lb-status').innerText.includes('page 2 of')"
    )
    assert set(_cells(page, "run_id")).isdisjoint(first_page)
    # descending sort on energy: first row has the largest figure of the first page
    before = _status(page)
    page.locator("#f-desc input[type=checkbox]").check()
    page.wait_for_function(
        "() => document.querySelector('#lb-status').innerText.includes('page 1 of')"
    )
    values = [float(v.replace(",", "")) for v in _cells(page, "energy_per_token_j") if v != "–"]
    assert values == sorted(values, reverse=True)


def test_reload_shows_new_runs_and_choices(page, leaderboard_server):
    from mlenergy.store import RunStore

    model = synthetic_model("late/arrival-3b", 3.0, False)
    RunStore(leaderboard_server["data_dir"]).append(
        [
            synthetic_run(
                model,
                gpu="L40S",
                tdp_w=350.0,
                task="synthetic-chat",
                energy_source="measured:zeus-nvml",
                index=5000,
            )
        ]
    )
    page.locator("#f-search textarea, #f-search input").first.fill("late/arrival")
    page.wait_for_function(f"() => ({STATUS_JS})().startsWith('0 rows')")
    page.locator("#lb-reload").click()
    page.locator("#f-hardware label", has_text="L40S").first.wait_for()
    _pick(page, "f-task", "synthetic-chat")
    _wait_all_cells(page, "model_id", "late/arrival-3b")


def test_quality_plot_shows_published_scores_on_reference_data(page, leaderboard_server):
    key = "published:GPQA-Diamond"
    _pick(page, "f-task", "gpqa")
    _pick(page, "f-quality", key)
    _wait_all_cells(page, "task", "gpqa")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#lb-table td[data-col=\"quality_source\"]')]"
        f".some(c => c.innerText.trim() === '{key}')"
    )
    cell = page.locator('#lb-table td[data-col="quality"][title]').first
    assert "not measured in this run" in cell.get_attribute("title")
    page.get_by_role("tab", name="Plots").click()
    page.locator("#plot-kind label", has_text="Energy vs quality").first.click()
    page.wait_for_function(
        "() => (document.querySelector('#plot-figure')?.innerText || '')"
        ".includes('published score, not measured')"
    )
    text = page.locator("#plot-figure").inner_text()
    assert "No configuration has both figures" not in text
    assert page.locator("#plot-figure .scatterlayer .point").count() > 0
    _shot(page, "leaderboard-quality-plot.png")


def test_power_budget_view_best_configuration_per_model(page):
    page.get_by_role("tab", name="Power budget").click()
    page.wait_for_selector("#power-table tbody tr td", timeout=60_000)
    note = page.locator("#pw-note").inner_text()
    assert "models fit 100,000 W within 50 ms" in note
    sources = page.locator('#power-table tbody td[data-col="Source"]').all_inner_texts()
    assert sources and all(s.startswith("measured:") for s in sources)
    budget = page.locator("#pw-budget input")
    budget.fill("100")
    budget.press("Enter")
    page.wait_for_function(
        "() => (document.querySelector('#pw-note')?.innerText || '').includes('models left out')"
    )
    page.locator("#pw-note summary").click()
    assert "below one replica" in page.locator("#pw-note").inner_text()
    _shot(page, "leaderboard-power-budget.png")
