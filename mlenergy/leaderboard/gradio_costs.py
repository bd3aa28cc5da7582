"""Cut what Gradio spends per event on work whose result never changes.

Gradio builds a fresh session state for every call of its call API that names no session
(``POST /gradio_api/call/<name>`` without ``session_hash``: every ``curl`` call), and that
describes every component of the page: for each one it reads the signature of its class's
``__init__`` with :func:`inspect.signature`, and ``gr.Plot`` tries ``import bokeh``, which,
not installed, searches the whole module path again each time. Measured on the served
reference (4 clients, call API), these were most of the server's CPU time per call.
:func:`lighten_gradio_events` makes both answers fixed once: the import of a module that is not
installed fails at once, and each component class's ``__init__`` carries its signature
(``__signature__``, which :func:`inspect.signature` returns as is). What an event costs beyond
that is Gradio's own (its session state, queue and event stream; see ``leaderboard/README.md``).

An idle server costs too: Gradio's queue looks for new events every millisecond and for
progress to send every 10 ms while nothing is queued, which kept about 6% of a core busy with
no visitor at all. :func:`quiet_idle_queue` makes those waits :data:`IDLE_POLL_S` and
:data:`PROGRESS_POLL_S`.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys

import gradio as gr

IDLE_POLL_S = 0.01
"""Seconds the queue waits before it looks again for an event when none is queued (Gradio:
0.001 s). An event waits at most this long before it starts: small beside any answer's time."""
PROGRESS_POLL_S = 0.1
"""Seconds between two looks for progress updates to send (Gradio: 0.01 s); the app reports no
progress, so this only paces an idle loop."""

ABSENT_OPTIONAL_MODULES = ("bokeh",)
"""Optional modules Gradio imports on every event (``gr.Plot`` reads ``bokeh.__version__``)."""


def mark_absent_modules(names: tuple[str, ...] = ABSENT_OPTIONAL_MODULES) -> list[str]:
    """Mark modules that are not installed as absent, so importing them fails at once.

    ``sys.modules[name] = None`` is Python's own mark: ``import name`` then raises
    ``ImportError`` without searching the path. An installed module is left alone.

    Returns:
        The names marked.
    """
    marked = []
    for name in names:
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            sys.modules[name] = None  # type: ignore[assignment]  # None: its import fails
            marked.append(name)
    return marked


def fix_component_signatures(demo: gr.Blocks) -> int:
    """Give the ``__init__`` of each block class of ``demo`` (and its bases) its signature.

    Returns:
        How many ``__init__`` functions got one.
    """
    done = 0
    for cls in {type(block) for block in getattr(demo, "blocks", {}).values()}:
        for klass in cls.__mro__:
            init = klass.__dict__.get("__init__")
            if inspect.isfunction(init) and "__signature__" not in init.__dict__:
                init.__dict__["__signature__"] = inspect.signature(init)
                done += 1
    return done


def quiet_idle_queue(
    demo: gr.Blocks, idle_s: float = IDLE_POLL_S, progress_s: float = PROGRESS_POLL_S
) -> bool:
    """Pace the idle loops of ``demo``'s queue: ``idle_s`` and ``progress_s`` seconds.

    Call after ``demo.queue()`` and before the server starts (the loops read the values on
    every turn, so a later call works too).

    Returns:
        Whether ``demo`` has a queue whose loops were paced (``False``: none, nothing changed).
    """
    queue = getattr(demo, "_queue", None)
    if queue is None or not hasattr(queue, "sleep_when_free"):
        return False
    queue.sleep_when_free = idle_s
    queue.progress_update_sleep_when_free = progress_s
    return True


def lighten_gradio_events(demo: gr.Blocks) -> None:
    """Both cuts above, for the app ``demo`` (call before serving it)."""
    mark_absent_modules()
    fix_component_signatures(demo)
