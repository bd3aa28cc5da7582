"""Checks of executed notebooks shared by the notebook tests: every plot renders as an image."""

from __future__ import annotations

import re

PLOTTING = re.compile(
    r"(\bplot\w*\(|\bplt\.|\.plot\(|\bImage\(|\bdisplay\(fig|^fig\s*$)", re.MULTILINE
)
"""A code cell that draws: a plot function, pyplot, an image shown, or a figure as its last line."""


def assert_plots_render(nb, name: str) -> int:
    """Every plotting cell shows an image; no figure anywhere shows only its text repr.

    Returns:
        How many plotting cells there are (each checked).
    """
    plotting = 0
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        outputs = cell.get("outputs", [])
        for o in outputs:
            data = o.get("data", {})
            text = str(data.get("text/plain", ""))
            assert not (text.startswith("<Figure size") and "image/png" not in data), (
                f"{name} cell {i}: a figure shows as text ({text!r}), not as an image"
            )
        if PLOTTING.search(cell.source):
            plotting += 1
            images = [o for o in outputs if "image/png" in o.get("data", {})]
            assert images, f"{name} cell {i} plots but shows no image:\n{cell.source[:200]}"
    return plotting
