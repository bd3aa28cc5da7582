"""%%energy measures the GPUs the scope rule picks, in-process (emulated GPUs)."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

from mlenergy.measure.emulated import install_emulated_gpus
from mlenergy.notebook.magic import EnergyMagics


@pytest.fixture
def shell():
    sh = InteractiveShell.instance()
    magics = EnergyMagics(sh)
    sh.register_magics(magics)
    yield sh, magics
    magics.close()
    InteractiveShell.clear_instance()


def test_gpu_indices_pick_one_gpu_of_eight(shell):
    sh, magics = shell
    with install_emulated_gpus(power_w=100.0, count=8, counter_period_s=0.0):
        sh.run_cell_magic(
            "energy", "--var e --quiet --gpu-indices 6", "import time; time.sleep(0.1)"
        )
        result = sh.user_ns["e"].result
        assert magics.meter.scope.gpu_indices == (6,)
        assert set(result.energy_by_device_j) == {"gpu:6"}
        # no model named and no CUDA memory held: no GPU charged
        sh.run_cell_magic("energy", "--var f --quiet", "x = 1")
        assert magics.meter.scope.gpu_indices == ()
        assert sh.user_ns["f"].result.energy_source == "modelled:cpu-tdp"


def test_short_cell_is_marked_in_its_table():
    from mlenergy.measure.window import window_html
    from mlenergy.measure.window_result import WindowResult

    r = WindowResult("c", 0.01, 3.0, {"gpu:0": 3.0}, "emulated:zeus-gpu", None)
    assert "warning" not in window_html(r)
    short = WindowResult(
        "c", 0.01, 3.0, {"gpu:0": 3.0}, "emulated:zeus-gpu", counter_period_s=0.1, resolvable=False
    )
    assert "shorter than ten counter periods" in window_html(short)
