"""The estimator's catalogs are data read by one registry; a new GPU is one catalog entry.

The GPU catalog is reference data (:mod:`mlenergy.reference.gpus`); one override folder
(``$MLENERGY_CATALOG_DIR``) replaces it and the estimator's own catalogs alike.
"""

from __future__ import annotations

import fnmatch
import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from mlenergy.errors import UserError
from mlenergy.estimate import estimate
from mlenergy.estimate.registry import CATALOG_FILES, SHIPPED_DIR, read_catalog, read_catalog_file
from mlenergy.reference import CATALOG_DIR_ENV, PACKAGE_DIR
from mlenergy.reference.gpus import CATALOG_FILE, catalog_names, resolve_gpu
from mlenergy.reference.gpus import read_catalog_file as read_gpu_catalog

ROOT = Path(__file__).resolve().parents[2]
LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"
SHIPPED_GPUS = [g["name"] for g in read_gpu_catalog(PACKAGE_DIR / CATALOG_FILE)["gpus"]]


@pytest.mark.parametrize("name", SHIPPED_GPUS)
def test_every_catalog_gpu_resolves_and_estimates(name):
    """Each entry of gpu_catalog.json is a usable GPU: its names resolve, an estimate runs."""
    spec = resolve_gpu(name)
    assert spec.name == name
    for alias in spec.aliases:
        assert resolve_gpu(alias).name == name
    assert spec.memory_gb > 0 and spec.memory_bandwidth_tb_s > 0 and spec.tdp_w > 0
    assert spec.bf16_tflops > 0
    assert (spec.min_sm_clock_mhz or 0.0) <= spec.clock_at_spec_mhz <= spec.max_sm_clock_mhz
    e = estimate(LLAMA8, name, batch_size=8, output_tokens=128, input_tokens=256)
    assert math.isfinite(e.energy_per_token_j) and e.energy_per_token_j > 0
    assert 0 < e.avg_power_w <= spec.tdp_w * e.num_gpus + 1e-9


def test_catalog_names_are_the_catalog_file():
    assert sorted(catalog_names()) == sorted(SHIPPED_GPUS)


def _with_new_gpu(folder: Path) -> str:
    data = json.loads((PACKAGE_DIR / CATALOG_FILE).read_text())
    h100 = next(g for g in data["gpus"] if g["name"] == "H100-SXM5-80GB")
    new = {**h100, "name": "Test-GPU-96GB", "aliases": ["testgpu"], "memory_gb": 96.0}
    new["memory_bandwidth_tb_s"] = 4.0
    data["gpus"].append(new)
    (folder / CATALOG_FILE).write_text(json.dumps(data))
    return new["name"]


def test_a_new_entry_in_a_catalog_folder_is_picked_up(tmp_path, monkeypatch):
    name = _with_new_gpu(tmp_path)
    with pytest.raises(UserError):
        resolve_gpu(name)
    monkeypatch.setenv(CATALOG_DIR_ENV, str(tmp_path))
    assert resolve_gpu("testgpu").name == name
    assert name in catalog_names()
    new = estimate(LLAMA8, name, batch_size=8, output_tokens=128, input_tokens=256)
    h100 = estimate(LLAMA8, "H100-SXM5-80GB", batch_size=8, output_tokens=128, input_tokens=256)
    assert new.throughput_tokens_per_s > h100.throughput_tokens_per_s  # more bandwidth
    # Catalogs the folder does not hold stay the shipped ones.
    assert read_catalog("engines") == read_catalog_file(SHIPPED_DIR / "engines.json", "engines")
    monkeypatch.delenv(CATALOG_DIR_ENV)
    with pytest.raises(UserError):
        resolve_gpu(name)


def test_a_broken_catalog_file_is_one_clear_error(tmp_path):
    bad = tmp_path / CATALOG_FILE
    bad.write_text(json.dumps({"devices": []}))
    with pytest.raises(UserError, match="lacks gpus"):
        read_gpu_catalog(bad)
    bad = tmp_path / "broken" / CATALOG_FILE
    bad.parent.mkdir()
    bad.write_text("{not json")
    with pytest.raises(UserError, match="cannot read the gpus catalog"):
        read_gpu_catalog(bad)
    engines = tmp_path / CATALOG_FILES["engines"]
    engines.write_text(json.dumps({"devices": []}))
    with pytest.raises(UserError, match="lacks profiles"):
        read_catalog_file(engines, "engines")


def test_catalog_and_calibration_files_ship_as_package_data():
    """Every data file the estimator reads matches pyproject's package-data patterns."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]
    files = [*CATALOG_FILES.values(), "coefficients.json", "coefficients.report.json"]
    shipped = [(SHIPPED_DIR, "mlenergy.estimate", n) for n in files]
    shipped += [(PACKAGE_DIR, "mlenergy.reference", n) for n in (CATALOG_FILE, "precisions.json")]
    for folder, package, name in shipped:
        globs = patterns.get("*", []) + patterns.get(package, [])
        assert (folder / name).is_file(), name
        assert any(fnmatch.fnmatch(name, g) for g in globs), name


def test_task_defaults_and_family_rules_come_from_their_files():
    from mlenergy.estimate import configs, task_defaults

    tasks = read_catalog("tasks")
    assert tasks["input_tokens"] == task_defaults.TASK_INPUT_TOKENS
    assert task_defaults.task_input_tokens("no-such-task") == tasks["default_input_tokens"]
    assert task_defaults.is_multimodal("Video-Chat")
    fp8 = read_catalog("families")["fp8"]
    assert fp8["suffix"] == configs.FP8_SUFFIX
    assert set(fp8["bf16_attention_orgs"]) == configs.BF16_ATTENTION_FP8_ORGS
    assert set(fp8["block_scaled_orgs"]) == configs.BLOCK_SCALED_FP8_ORGS


def test_engine_profiles_carry_their_own_overheads():
    from mlenergy.estimate.coefficients import default_coefficients, row_overheads
    from mlenergy.estimate.engines import (
        ENGINE_INDEX,
        FITTED,
        NEUTRAL_OVERHEADS,
        PROFILES,
        fitted_overheads,
    )

    v3, v2 = PROFILES
    assert v3.overheads == NEUTRAL_OVERHEADS  # the current engine adds nothing
    assert v3.fitted_terms() == ()
    assert v2.fitted_terms() == ("host_slowdown", "worker_s", "moe_layer_s")
    assert v2.overheads["untuned_moe_tiles"] == 0.0
    assert fitted_overheads() == [(v2.name, t) for t in v2.fitted_terms()]
    c = default_coefficients()
    rows = row_overheads(np.array([ENGINE_INDEX[v2.name], 0.0, ENGINE_INDEX[v2.name]]), c)
    for term, values in rows.items():
        fitted = c.engine_overheads[v2.name].get(term)
        want_v2 = fitted if v2.overheads[term] == FITTED else v2.overheads[term]
        assert values.tolist() == [want_v2, NEUTRAL_OVERHEADS[term], want_v2]
    assert rows["host_slowdown"][0] > 5  # the 2024 server's fitted host-cost factor


def test_an_unknown_overhead_term_is_refused():
    from mlenergy.estimate.engines import _profile

    entry = {"name": "x", "software": "s", "setup": "s", "includes": "s"}
    with pytest.raises(UserError, match="overhead bogus_s"):
        _profile({**entry, "overheads": {"bogus_s": 1.0}})
    with pytest.raises(UserError, match="host_slowdown='fast'"):
        _profile({**entry, "overheads": {"host_slowdown": "fast"}})


def test_a_new_engine_profile_is_one_catalog_entry(tmp_path):
    """A profile added to engines.json is estimated with its own overhead terms."""
    import os
    import subprocess
    import sys

    data = json.loads((SHIPPED_DIR / CATALOG_FILES["engines"]).read_text())
    v3 = data["profiles"][0]
    slower = {**v3, "name": "test-server", "aliases": ["ts"], "tasks": []}
    slower["overheads"] = {**v3["overheads"], "host_slowdown": 3.0, "worker_s": 0.002}
    data["profiles"].append(slower)
    (tmp_path / CATALOG_FILES["engines"]).write_text(json.dumps(data))
    script = (
        "from mlenergy.estimate import estimate\n"
        "kw = dict(batch_size=8, input_tokens=256, output_tokens=128, tensor_parallel=2)\n"
        f"a = estimate({LLAMA8!r}, 'H100', engine='ts', **kw)\n"
        f"b = estimate({LLAMA8!r}, 'H100', engine='leaderboard-v3-server', **kw)\n"
        "print(a.engine, a.itl_s / b.itl_s)\n"
    )
    env = {**os.environ, CATALOG_DIR_ENV: str(tmp_path), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "test-server"
    assert float(out[1]) > 1.2  # three times the host costs and 2 ms per extra worker
