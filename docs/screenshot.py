"""Take ``docs/leaderboard.png``: the real app on ML.ENERGY's reference measurements.

Serves an empty temporary store with ``mlenergy leaderboard`` (the app shows the shipped
ML.ENERGY measurements beside it: no test data) on 127.0.0.1 and photographs the opening
view in Debian's headless Chromium through Playwright
(never ``playwright install``)::

    .venv/bin/python docs/screenshot.py [--reference DIR] [--out docs/leaderboard.png]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from mlenergy.testing.server import CHROMIUM, CHROMIUM_ARGS, STATUS_JS, serve_leaderboard

ROOT = Path(__file__).resolve().parents[1]


def seed(reference: Path | None, data_dir: Path) -> None:
    """An empty store: the app shows the reference layer beside it (no import step).

    ``reference`` (a folder laid out like the shipped one) is passed to the server as
    ``$MLENERGY_REFERENCE_DIR``; ``None`` keeps the reference shipped with mlenergy.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    if reference is not None:
        os.environ["MLENERGY_REFERENCE_DIR"] = str(reference)


def photograph(url: str, out: Path, width: int, height: int) -> str:
    """Save the opening view of ``url`` to ``out``; return the table's status line."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
        page = browser.new_context(viewport={"width": width, "height": height}).new_page()
        page.goto(url)
        page.wait_for_selector("#lb-table tbody tr", timeout=120_000)
        page.wait_for_function(f"() => ({STATUS_JS})() !== ''")
        status = page.evaluate(STATUS_JS)
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out), full_page=False)
        browser.close()
    return status


def main() -> None:
    """Parse the options, seed, serve, photograph."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--reference", type=Path, default=None, help="another reference folder (default: shipped)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "leaderboard.png")
    parser.add_argument("--width", type=int, default=1400, help="viewport width (px)")
    parser.add_argument("--height", type=int, default=1000, help="viewport height (px)")
    args = parser.parse_args()
    if args.reference is not None and not (args.reference / "mlenergy-leaderboard").is_dir():
        sys.exit(
            f"error: no mlenergy-leaderboard/ folder in {args.reference}. Pass --reference DIR"
        )
    if not CHROMIUM.exists():
        sys.exit(f"error: {CHROMIUM} is missing. Install Debian's chromium package")
    with tempfile.TemporaryDirectory(prefix="mlenergy-shot-") as tmp:
        data_dir = Path(tmp) / "data"
        seed(args.reference, data_dir)
        with serve_leaderboard(data_dir, log_path=Path(tmp) / "server.log") as url:
            status = photograph(url, args.out, args.width, args.height)
    print(f"wrote {args.out} ({args.width}x{args.height}; table: {status})")


if __name__ == "__main__":
    main()
