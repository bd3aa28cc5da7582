"""An estimate request is one typed object: the API, the CSV, the table and the CLI share it."""

from __future__ import annotations

from dataclasses import fields

import pytest

from mlenergy.cli import load_command
from mlenergy.estimate import (
    EstimateRequest,
    GpuSettings,
    GpuSpec,
    ParallelLayout,
    estimate,
    sweep,
)
from mlenergy.estimate.batch import CONTROL_COLUMNS, INPUT_COLUMNS, REQUIRED
from mlenergy.estimate.request_types import FIELDS, NUMBER_FIELDS, REQUIRED_FIELDS, TEXT_FIELDS
from mlenergy.estimate.requests import EstimateRequests
from mlenergy.records.parallel import DEGREES

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def test_a_request_is_made_of_its_concerns():
    req = EstimateRequest.of(LLAMA, "H100", 8, 128, tensor_parallel=2, sm_clock_mhz=1410)
    assert req == EstimateRequest(
        model=LLAMA,
        gpu="H100",
        batch_size=8,
        output_tokens=128,
        layout=ParallelLayout(tensor_parallel=2),
        settings=GpuSettings(sm_clock_mhz=1410),
    )
    assert list(req.flat()) == list(FIELDS)
    assert EstimateRequest.of(req, batch_size=64).flat() == {**req.flat(), "batch_size": 64}
    assert REQUIRED_FIELDS == ("model", "gpu", "batch_size", "output_tokens") == REQUIRED


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((LLAMA, "H100", 8, 128, 512), {}, "at most 4 positional"),
        ((LLAMA, "H100", 8), {"batch_size": 8, "output_tokens": 1}, "given twice: batch_size"),
        ((LLAMA, "H100", 8, 128), {"tensor_paralel": 2}, "unknown request fields: tensor_paralel"),
        ((LLAMA, "H100", 8), {}, "output_tokens"),
    ],
)
def test_a_bad_request_is_refused(args, kwargs, message):
    with pytest.raises(TypeError, match=message):
        EstimateRequest.of(*args, **kwargs)


def test_the_table_the_csv_and_the_cli_take_the_request_fields():
    table = [f.name for f in fields(EstimateRequests)]
    assert sorted(table) == sorted([*FIELDS, "bad_cells"])
    assert set(TEXT_FIELDS) | set(NUMBER_FIELDS) == set(FIELDS)
    assert set(DEGREES) < set(NUMBER_FIELDS)
    assert set(INPUT_COLUMNS) | set(CONTROL_COLUMNS) <= set(FIELDS)
    options = {p.name for p in load_command("estimate").params}
    assert set(FIELDS) <= options


def test_a_typed_request_and_its_keywords_estimate_alike(configs_dir):
    req = EstimateRequest.of(LLAMA, "H100", 8, 128, input_tokens=256, tensor_parallel=2)
    typed = estimate(req, configs_dir=configs_dir)
    assert typed.to_dict() == estimate(**req.flat(), configs_dir=configs_dir).to_dict()
    assert typed.num_gpus == 2
    flat = {k: v for k, v in req.flat().items() if k != "batch_size"}
    swept = sweep(flat, {"batch_size": [8]}, configs_dir=configs_dir)
    assert [s.to_dict() for s in swept] == [typed.to_dict()]  # type: ignore[union-attr]
    assert sweep(req, {"sm_clock_mhz": [99.0]}, configs_dir=configs_dir)[0] == (
        "sm_clock 99 MHz is outside H100-SXM5-80GB's range 345-1980 MHz."
    )


def test_a_gpu_spec_stays_whole_through_the_flat_fields():
    """A hypothetical GPU given as a GpuSpec is the ``gpu`` field, not fields of the request."""
    chip = GpuSpec(
        name="H100-2xBW", memory_gb=160, memory_bandwidth_tb_s=6.7, tdp_w=700, bf16_tflops=989.4
    )
    req = EstimateRequest.of(LLAMA, chip, 8, 256)
    assert req.flat()["gpu"] is chip
    assert EstimateRequest.of(req) == req
    e = estimate(LLAMA, chip, batch_size=8, output_tokens=256)
    assert e.energy_per_token_j > 0
