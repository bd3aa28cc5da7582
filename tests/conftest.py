"""How ``make test`` spreads the suite over worker processes (pytest-xdist, ``--dist loadfile``).

Each test runs on one worker with the rest of its file, so a module-scoped fixture (a
leaderboard server with its browser, a Ray cluster, a trained toy study) is built once. The
files whose tests use one session fixture of ``SHARED_SESSION_FIXTURES`` (a running
``transformers serve``, the study of the shipped reference, the browser tests' leaderboard
server) share one worker, so that fixture is
built once too (``tests/test_suite_layout.py`` fails when a file that uses one is not listed).
Files that hold a test marked ``slow`` are handed out first, so that the workers
finish together rather than one of them running the longest tests alone at the end.

(``--dist loadgroup`` with ``xdist_group`` marks would say the same, but pytest-xdist 3.8 loses
the marks under pytest 9.2: pytest-dev/pytest-xdist#1386.) A run without ``-n`` is one process,
tests in file order.
"""

from __future__ import annotations

import pytest

SHARED_SESSION_FIXTURES: dict[str, tuple[str, ...]] = {
    "leaderboard_server": (  # package-scoped: stopped after the last browser test
        "tests/browser/test_leaderboard_browser.py",
        "tests/browser/test_leaderboard_views_browser.py",
    ),
    "dense_server": (
        "tests/workloads/serving/test_serving_live.py",
        "tests/workloads/serving/test_serving_runs.py",
        "tests/workloads/serving/test_serving_sweep.py",
    ),
    "reference_study": (
        "tests/studies/test_measured_findings.py",
        "tests/studies/test_measured_study.py",
    ),
}
"""Session (or package) fixture -> the test files that use it (one worker runs them all)."""

_GROUP_OF_FILE = {path: name for name, files in SHARED_SESSION_FIXTURES.items() for path in files}


def _group(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or the group of its shared fixture."""
    path = nodeid.split("::")[0]
    return _GROUP_OF_FILE.get(path, path)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile``, with the files of one shared session fixture as one unit."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid)

    return FileGroupScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a pytest-xdist worker: the units that hold a slow test first."""
    if not hasattr(config, "workerinput"):
        return
    slow = {_group(i.nodeid) for i in items if i.get_closest_marker("slow")}
    items.sort(key=lambda i: _group(i.nodeid) not in slow)  # stable: file order otherwise
