"""The ``ray`` extra imports cleanly beside Zeus on a machine without AMD libraries."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does


def test_ray_imports_beside_zeus():
    pytest.importorskip("ray")
    code = "import zeus.monitor, zeus.device.gpu, ray; print(ray.__version__)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
