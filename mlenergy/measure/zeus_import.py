"""Zeus's monitors, imported without scikit-learn.

``zeus.monitor`` (Zeus 0.16) runs ``from sklearn.metrics import auc`` when it is imported, for
``PowerMonitor.get_energy`` alone. Importing scikit-learn (and the SciPy it pulls in) costs about
2 s of CPU, as much as torch, and every process that measures paid it before any work: each
``mlenergy bench``, each fresh process of ``--processes N``, each Ray worker of a sweep.
:func:`zeus_monitor` imports ``zeus.monitor`` with ``auc`` bound to :func:`_auc`, which imports
the real ``sklearn.metrics.auc`` on its first call and returns what it returns.

Nothing else sees the difference: the stand-in for ``sklearn.metrics`` is in ``sys.modules``
only while ``zeus.monitor`` is imported, only when neither module has been imported yet, and
only when this is the process's one Python thread (no other thread can import meanwhile and be
handed the stand-in); otherwise ``zeus.monitor`` is imported as it is.
"""

from __future__ import annotations

import sys
import threading
import types
from typing import Any


def _auc(x: Any, y: Any) -> float:
    """``sklearn.metrics.auc(x, y)``: the area under a curve (trapezoids), imported on call."""
    # lazy: scikit-learn and SciPy take ~2 s of CPU to import, for this one integral
    from sklearn.metrics import auc

    return auc(x, y)


def zeus_monitor() -> types.ModuleType:
    """The ``zeus.monitor`` module (``ZeusMonitor``, ``PowerMonitor``), imported once.

    Returns:
        The module, the same object ``import zeus.monitor`` gives.
    """
    stand_in = None
    loaded = {"zeus.monitor.power", "sklearn.metrics"} & sys.modules.keys()
    if not loaded and threading.active_count() == 1:
        stand_in = types.ModuleType("sklearn.metrics", "Stand-in while zeus.monitor loads.")
        stand_in.auc = _auc  # type: ignore[attr-defined]
        sys.modules["sklearn.metrics"] = stand_in
    try:
        import zeus.monitor
    finally:
        if stand_in is not None and sys.modules.get("sklearn.metrics") is stand_in:
            del sys.modules["sklearn.metrics"]
    return zeus.monitor
