"""The project's install must leave Zeus and Ray importable side by side (see the Makefile)."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does


def test_zeus_and_ray_import_together():
    pytest.importorskip("ray", reason="the `ray` extra is not installed")
    code = "import zeus.device, zeus.monitor, ray; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


def test_mlenergy_is_a_namespace_package():
    import mlenergy

    assert getattr(mlenergy, "__file__", None) is None  # PEP 420: no mlenergy/__init__.py
