"""The modelled serving scope samples power, so a short run still gets its per-request split."""

import os
import time

from mlenergy.measure.emulated import install_no_devices
from mlenergy.workloads.serving.power import ServingPower


def test_modelled_scope_samples_a_run_shorter_than_its_period():
    with install_no_devices():
        power = ServingPower(cpu_tdp_w=20.0, server_pid=os.getpid(), period_s=30.0)
        try:
            start = time.time()
            end = time.process_time() + 0.05
            while time.process_time() < end:  # this process stands in for the server
                pass
            samples = power.samples(start)
        finally:
            power.close()
    assert samples, "no power sample: the per-request split would be missing"
    assert all(0.0 <= w <= 20.0 for _, w in samples) and max(w for _, w in samples) > 0
