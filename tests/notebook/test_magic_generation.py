"""%%energy sets how --model's generate decodes, warms the cell up apart, and records both."""

from __future__ import annotations

import pytest
import torch
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from mlenergy.measure.emulated import install_no_devices
from mlenergy.models import load_model
from mlenergy.notebook.magic import EnergyMagics, apply_generation
from mlenergy.store import RunStore

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def moe():
    return load_model("preset:tiny-moe")


@pytest.fixture
def shell(moe):
    sh = InteractiveShell.instance()
    magics = EnergyMagics(sh)
    sh.register_magics(magics)
    sh.user_ns.update(m=moe, info=moe.info, runs=[])
    with install_no_devices():
        yield sh
    magics.close()
    InteractiveShell.clear_instance()


def test_auto_is_eager_on_the_cpu_and_the_saved_record_says_so(shell, moe, tmp_path, capsys):
    cell = "runs.append(1); import time; time.sleep(0.02)"
    shell.run_cell_magic(
        "energy", f"--quiet --model m --save --tokens 4 --data-dir {tmp_path}", cell
    )
    assert shell.user_ns["runs"] == [1]  # no warm-up run when eager
    assert moe.model.generation_config.cache_implementation is None
    (record,) = RunStore(tmp_path).runs()
    g = record.generation
    assert (g.backend, g.compile_mode, g.warmup_s) == ("eager", None, 0.0)
    assert g.torch == record.software.torch
    assert (g.experts_backend, g.experts_backend_source) == ("grouped_mm", "as-set")


def test_warmup_runs_the_cell_before_the_window_and_is_kept_apart(shell, tmp_path, capsys):
    shell.run_cell_magic(
        "energy",
        f"--quiet --model m --warmup 2 --save --tokens 4 --data-dir {tmp_path}",
        "runs.append(len(runs))",
    )
    assert shell.user_ns["runs"] == [0, 1, 2]  # two warm-up runs, then the measured one
    assert "warm-up and compilation" in capsys.readouterr().out
    (record,) = RunStore(tmp_path).runs()
    assert record.generation.warmup_s > 0


def test_compiled_sets_a_static_cache_that_generate_compiles(moe):
    config = moe.model.generation_config
    try:
        assert apply_generation(moe, "compiled-static-cache") == "compiled-static-cache"
        assert config.cache_implementation == "static" and not config.disable_compile
        assert config.compile_config.mode == "default"  # the CPU: no CUDA graphs
        assert config.compile_config._compile_all_devices  # generate compiles off CUDA too
        assert apply_generation(moe, "eager") == "eager"
        assert config.cache_implementation is None and config.disable_compile
    finally:
        apply_generation(moe, "eager")


def test_generation_without_a_loaded_model_is_refused(shell):
    with pytest.raises(UsageError, match="needs --model VAR naming a LoadedModel"):
        shell.run_cell_magic("energy", "--quiet --generation eager --model info", "x = 1")
    with pytest.raises(UsageError, match="unknown generation backend"):
        shell.run_cell_magic("energy", "--quiet --generation fast --model m", "x = 1")
    with pytest.raises(UsageError, match="--warmup must be at least 0"):
        shell.run_cell_magic("energy", "--quiet --warmup -1", "x = 1")
