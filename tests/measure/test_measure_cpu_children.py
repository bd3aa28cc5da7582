"""The CPU power model charges the CPU time of the process's children (a server it launched)."""

import subprocess
import sys
import time

from mlenergy.measure import cpu_model as cm

SPIN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def test_a_child_reaped_inside_the_window_is_charged():
    before = cm.process_cpu_seconds()
    subprocess.run([sys.executable, "-c", SPIN.format(s=0.3)], check=True, timeout=60)
    charged = cm.process_cpu_seconds() - before
    assert charged >= 0.3  # the child's 0.3 s of CPU (and its start-up) count


def test_a_running_child_is_charged_before_it_ends():
    child = subprocess.Popen([sys.executable, "-c", SPIN.format(s=30)])
    try:
        time.sleep(0.5)  # let it start and spin
        before = cm.running_children_cpu_s()
        deadline = time.monotonic() + 30  # on a busy machine the child gets a slice of a core
        while (grown := cm.running_children_cpu_s() - before) <= 0.1:
            assert time.monotonic() < deadline, grown
            time.sleep(0.1)
        assert child.poll() is None  # its CPU time is read while it runs (clock ticks of 10 ms)
    finally:
        child.kill()
        child.wait(timeout=10)
