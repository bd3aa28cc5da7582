"""The default view in a browser: measured GPU rows only, toy rows apart on request, the filter
panel only where it applies, detail and compare opening on the top rows, carbon and cost."""

from __future__ import annotations

import pytest

# The pages load from the folder's one server (tests/browser/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("leaderboard_server")]


TOY_CPU = "AMD EPYC 7B13"  # as seeded by conftest.toy_runs
TOY_TASKS = ("(none)", "dense-vs-moe", "notebook-cell")


def _cells(page, column: str, table: str = "#lb-table") -> list[str]:
    return page.locator(f'{table} tbody td[data-col="{column}"]').all_inner_texts()


def _options(page, elem_id: str) -> list[str]:
    """The choices of the Gradio dropdown ``#elem_id`` (opened, read, closed)."""
    page.locator(f"#{elem_id} input").click()
    page.get_by_role("option").first.wait_for()
    texts = [t.replace("✓", "").strip() for t in page.get_by_role("option").all_inner_texts()]
    page.keyboard.press("Escape")
    return texts


def _pick(page, elem_id: str, value: str) -> None:
    page.locator(f"#{elem_id} input").click()
    page.locator(f"#{elem_id} input").fill(value)
    page.get_by_role("option", name=value, exact=True).first.click()


def test_default_view_shows_measured_gpu_rows_only(page):
    hardware = page.locator("#f-hardware label").all_inner_texts()
    assert hardware and not any("EPYC" in h for h in hardware)
    tasks = _options(page, "f-task")
    assert "lm-arena-chat" in tasks and not set(TOY_TASKS) & set(tasks)
    assert set(_cells(page, "source_kind")) == {"measured"}
    assert page.locator("#lb-table tr.lb-apart").count() == 0
    assert page.locator("#f-quality input").input_value() == "published:LMArena text score"
    status = page.locator("#lb-status").inner_text()
    assert "ML.ENERGY reference runs" in status and "runs from the store" in status


def test_modelled_rows_join_only_when_asked_and_stay_apart(page):
    page.locator("#f-source label", has_text="Modelled").first.click()
    page.locator("#f-hardware label", has_text=TOY_CPU).first.wait_for()
    _pick(page, "f-task", "dense-vs-moe")
    page.wait_for_selector("#lb-table tr.lb-apart-head")
    page.wait_for_function(  # the task filter's answer replaces the rows drawn before it
        """() => {
            const sel = '#lb-table tbody td[data-col="source_kind"]';
            const cells = [...document.querySelectorAll(sel)];
            return cells.length > 0 && cells.every(c => c.innerText.trim() === 'modelled');
        }"""
    )
    assert "not comparable" in page.locator("#lb-table tr.lb-apart-head").inner_text()
    assert page.locator("#lb-table tr.lb-apart").count() == len(_cells(page, "source_kind"))


def test_filter_panel_shows_only_where_it_applies(page):
    panel = page.locator("#filter-panel")
    assert panel.is_visible()
    for tab in ("Submit", "About", "Estimator"):
        if page.get_by_role("tab", name=tab).count() == 0:
            continue
        page.get_by_role("tab", name=tab).click()
        panel.wait_for(state="hidden")
    page.get_by_role("tab", name="Plots").click()
    panel.wait_for(state="visible")


def test_detail_and_compare_open_on_the_top_rows(page):
    top = _cells(page, "model_id")[0]
    page.get_by_role("tab", name="Model detail").click()
    page.wait_for_selector("#lb-detail tbody tr td")  # drawn without picking anything
    assert page.locator("#detail-model input").input_value() == top
    page.get_by_role("tab", name="Compare").click()
    page.wait_for_function("() => document.querySelectorAll('#lb-compare thead th').length >= 3")
    heads = page.locator("#lb-compare thead th").all_inner_texts()
    assert heads[0] == "Metric" and heads[1] == top


def test_carbon_and_cost_columns_follow_the_selector(page):
    assert page.locator('#lb-table th[data-col="carbon_g_per_1k_tokens"]').count() == 0
    page.locator("#fp-box").get_by_text("Carbon and cost").first.click()
    box = page.locator("#fp-intensity input")
    box.fill("400")
    box.press("Enter")
    page.wait_for_selector('#lb-table th[data-col="carbon_g_per_1k_tokens"]')
    assert "400 gCO2e/kWh" in page.locator("#fp-line").inner_text()
    price = page.locator("#fp-price input")
    price.fill("0.2")
    price.press("Enter")
    page.wait_for_selector('#lb-table th[data-col="cost_per_m_tokens"]')
    energy = float(_cells(page, "energy_per_token_j")[0].replace(",", ""))
    carbon = float(_cells(page, "carbon_g_per_1k_tokens")[0].replace(",", ""))
    assert carbon == pytest.approx(energy * 1000 * 400 / 3.6e6, rel=2e-3)
