import pytest

from mlenergy.measure.emulated import install_no_devices


@pytest.fixture
def no_devices():
    """Hide real GPUs and RAPL so the CPU power model is used on any machine."""
    with install_no_devices():
        yield


@pytest.fixture(autouse=True)
def _no_tdp_env(monkeypatch):
    monkeypatch.delenv("MLENERGY_CPU_TDP_W", raising=False)
    monkeypatch.delenv("MLENERGY_CPU_IDLE_FRACTION", raising=False)


def _spin(seconds: float) -> None:
    import time

    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


@pytest.fixture
def busy():
    """A function that spins the CPU (one thread) for ``seconds`` of wall time."""
    return _spin
