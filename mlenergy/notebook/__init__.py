"""IPython extension: ``%load_ext mlenergy.notebook``.

Loading it adds the ``%%energy`` cell magic (:mod:`mlenergy.notebook.magic`) and HTML
formatters for lists of run records, estimates, plans and window results
(:mod:`mlenergy.notebook.display`); run records display themselves
(``RunRecord._repr_html_``). :func:`plot` draws any of them in one call and
:func:`measured_window` measures a ``with`` block whose result exists only after it ends.
"""

from __future__ import annotations

from typing import Any

from mlenergy.measure.window import MeasuredWindow, measured_window
from mlenergy.notebook.display import register_formatters
from mlenergy.notebook.plots import plot

__all__ = ["MeasuredWindow", "load_ipython_extension", "measured_window", "plot"]

_MAGICS: dict[int, Any] = {}


def load_ipython_extension(ipython: Any) -> None:
    """Register the ``%%energy`` magic and the HTML formatters on ``ipython``."""
    # lazy: the magic needs IPython, present only inside a kernel
    from mlenergy.notebook.magic import EnergyMagics

    magics = EnergyMagics(ipython)
    ipython.register_magics(magics)
    _MAGICS[id(ipython)] = magics
    register_formatters(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Close the session's meter."""
    magics = _MAGICS.pop(id(ipython), None)
    if magics is not None:
        magics.close()
