"""Zeus's monitors, imported without scikit-learn.

``zeus.monitor`` (Zeus 0.16) runs ``from sklearn.metrics import auc`` when it is imported, for
``PowerMonitor.get_energy`` alone. Importing scikit-learn (and the SciPy it pulls in) costs about
2 s of CPU, as much as torch, and every process that measures paid it before any work: each
``mlenergy bench``, each fresh process of ``--processes N``, each Ray worker of a sweep.
:func:`zeus_monitor` imports ``zeus.monitor`` while a stand-in is the module
``sklearn.metrics``; Zeus binds the stand-in's ``auc``, which imports the real
``sklearn.metrics`` on its first call and returns what the real ``auc`` returns.

Nothing else sees the difference. The stand-in is used only when neither module has been
imported yet, and is removed as soon as ``zeus.monitor`` is. Another thread that imports
``sklearn.metrics`` in that moment gets the stand-in, whose other names are the real module's
(it imports the real one on first use).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

_NAME = "sklearn.metrics"


def _real_metrics() -> types.ModuleType:
    """The real ``sklearn.metrics``, imported now if need be (the stand-in put aside)."""
    current = sys.modules.get(_NAME)
    if isinstance(current, _StandIn):
        sys.modules.pop(_NAME, None)
    # lazy: scikit-learn and SciPy take ~2 s of CPU to import, for Zeus's one integral
    return importlib.import_module(_NAME)


class _StandIn(types.ModuleType):
    """``sklearn.metrics`` until it is used: reading a name it lacks imports the real module.

    Dunder names are not passed on: the import system asks for ``__path__``, and the stand-in
    is no package.
    """

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_real_metrics(), name)


def _auc(x: Any, y: Any) -> float:
    """``sklearn.metrics.auc(x, y)``: the area under a curve by trapezoids, imported on call."""
    return _real_metrics().auc(x, y)


def zeus_monitor() -> types.ModuleType:
    """The ``zeus.monitor`` module (``ZeusMonitor``, ``PowerMonitor``), imported once.

    Returns:
        The module, the same object ``import zeus.monitor`` gives.
    """
    stand_in = None
    if not {"zeus.monitor.power", _NAME} & sys.modules.keys():
        stand_in = _StandIn(_NAME, "Stands for sklearn.metrics while zeus.monitor is imported.")
        stand_in.auc = _auc  # type: ignore[attr-defined]
        sys.modules[_NAME] = stand_in
    try:
        import zeus.monitor
    finally:
        if stand_in is not None and sys.modules.get(_NAME) is stand_in:
            sys.modules.pop(_NAME, None)
    return zeus.monitor
