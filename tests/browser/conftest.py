"""Start the leaderboard on 127.0.0.1 with a seeded store and drive it in headless Chromium.

Chromium is Debian's ``/usr/bin/chromium`` (CI installs it); Playwright only drives it (never
``playwright install``). Screenshots go to ``test-output/`` (they show test data; the README's
screenshot is taken on the reference data by ``docs/screenshot.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mlenergy.testing.server import (
    CHROMIUM,
    CHROMIUM_ARGS,
    LeaderboardStartError,
    serve_leaderboard,
)

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "test-output"
HOSTILE = "<script>alert(1)</script>"
HYBRID = "synthetic/hybrid-9b"


TOY_TASKS = ("(none)", "dense-vs-moe", "notebook-cell")
"""Tasks the demo's toy runs carry: never in the default view."""
TOY_CPU = "AMD EPYC 7B13"
"""The toy runs' CPU: never a hardware choice of the default view."""


def toy_runs() -> list:
    """What the demo leaves in a store: CPU runs with modelled energy and an emulated GPU run."""
    from mlenergy.records import Hardware
    from mlenergy.testing.synthetic import synthetic_model, synthetic_run

    toy = synthetic_model("toy/tiny-gpt", 0.01, False)
    out = []
    for i, task in enumerate(TOY_TASKS):
        run = synthetic_run(toy, task=task, energy_source="modelled:cpu-tdp", index=700 + i)
        work = run.workload.model_copy(update={"method": "static-batch", "device": "cpu"})
        hw = Hardware(cpu_model=TOY_CPU, accelerator_count=0)
        out.append(run.model_copy(update={"hardware": hw, "workload": work}))
    out.append(synthetic_run(toy, task="dense-vs-moe", index=710))  # emulated:synthetic on a GPU
    return out


def seed_store(data_dir: Path) -> None:
    """Seed a store beside the shipped reference (always shown, never imported): synthetic GPU
    rows labelled measured (test data), a hostile name, quality, and the demo's toy runs."""
    from mlenergy.store import RunStore
    from mlenergy.testing.synthetic import (
        synthetic_model,
        synthetic_quality,
        synthetic_run,
    )

    models = [
        synthetic_model("synthetic/dense-8b", 8.0, False),
        synthetic_model("synthetic/moe-a3b", 3.0, True, dtype="fp8"),
        synthetic_model(HOSTILE, 1.0, False),
        # a Mamba-Transformer hybrid (Nemotron-H family): labelled "hybrid", not "dense"
        synthetic_model(HYBRID, 9.0, False).model_copy(update={"architecture": "nemotron_h"}),
    ]
    i = 0
    runs = []
    for model in models:
        for gpu, tdp in (("H100-SXM5-80GB", 700.0), ("B200", 1000.0)):
            for bs in (16, 128):
                runs.append(
                    synthetic_run(
                        model,
                        gpu=gpu,
                        tdp_w=tdp,
                        batch_size=bs,
                        task="synthetic-chat",
                        energy_source="measured:zeus-nvml",
                        index=i,
                        timeline=True,
                    )
                )
                i += 1
    quality = [
        synthetic_quality(models[0], 0.62),
        synthetic_quality(models[1], 0.58, linked=[runs[4].run_id]),
    ]
    RunStore(data_dir).append(runs + quality + toy_runs())


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium is missing: apt-get install chromium (CI's .ci/run does)")
    pytest.importorskip("playwright.sync_api", reason="the playwright Python package is missing")
    return CHROMIUM


@pytest.fixture(scope="package")
def leaderboard_server(chromium_path, tmp_path_factory):
    """The app served by ``mlenergy leaderboard`` in a subprocess: its base URL and store.

    One server for the browser tests of this folder (both modules; ``tests/conftest.py``
    runs them on one worker): built before the first of them, stopped after the last, so
    the tests that come after (CPU-time and timing checks) do not share the machine with it.
    Tests that add to its store (a late run, a submission) add nothing the others' checks
    depend on.
    """
    data_dir = tmp_path_factory.mktemp("lb-store")
    seed_store(data_dir)
    log_path = tmp_path_factory.mktemp("lb-log") / "server.log"
    try:
        with serve_leaderboard(data_dir, log_path=log_path) as url:
            yield {"url": url, "data_dir": data_dir}
    except LeaderboardStartError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="package")
def browser(chromium_path):
    """Headless Chromium, shared like :func:`leaderboard_server`; each test has its own
    context (cookies, storage, cache) and page."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(chromium_path), args=list(CHROMIUM_ARGS))
        yield b
        b.close()


@pytest.fixture
def page(browser, leaderboard_server):
    """A fresh context and page on the app, its table drawn (a new visitor's first view)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    dialogs: list[str] = []
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pg.dialogs = dialogs  # type: ignore[attr-defined]
    pg.goto(leaderboard_server["url"])
    pg.wait_for_selector("#lb-table")
    yield pg
    context.close()
