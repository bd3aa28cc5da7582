"""Shared by the notebook tests: cells run in a real kernel, every plot renders as an image."""

from __future__ import annotations

import re
from pathlib import Path

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


def execute_cells(sources: list[str], cwd: str | Path, timeout_s: int = 180) -> list:
    """Run ``sources`` as the code cells of one notebook in a fresh ``python3`` kernel.

    Errors do not stop the run: each cell keeps its outputs (an ``error`` output where it
    raised), for the caller to read.

    Args:
        sources: The cells' code, in order.
        cwd: The kernel's working folder.
        timeout_s: Longest a cell may run (s).

    Returns:
        The executed cells.
    """
    # lazy: nbformat and nbclient come with the dev and notebook extras only
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    NotebookClient(
        nb,
        timeout=timeout_s,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(cwd)}},
    ).execute()
    return nb.cells
