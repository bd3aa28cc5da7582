"""Bad estimator inputs give one-line ``error:`` messages (exit 2) or a batch row's error."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mlenergy.cli import main
from mlenergy.commands.estimate_sweep import parse_sweep_axis
from mlenergy.errors import UserError
from mlenergy.estimate.api import estimate
from mlenergy.estimate.batch import estimate_frame
from mlenergy.estimate.coefficients import default_coefficients
from mlenergy.estimate.physics import predict
from mlenergy.reference.gpus import load_gpu_spec_file, resolve_gpu

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
BASE = [
    "estimate",
    "--model",
    LLAMA,
    "--gpu",
    "H100",
    "--batch-size",
    "64",
    "--input-tokens",
    "512",
    "--output-tokens",
    "256",
]


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: ")
    return err[0]


def _cli_error(capsys, argv: list[str], *fragments: str) -> str:
    assert main(argv) == 2
    line = _error_line(capsys)
    for frag in fragments:
        assert frag in line, line
    return line


def _row(**kw: object) -> dict[str, object]:
    row = dict(model=LLAMA, gpu="H100", batch_size="64", input_tokens="512", output_tokens="256")
    row.update({k: str(v) for k, v in kw.items()})
    return row


def _batch_errors(configs_dir, rows: list[dict[str, object]]) -> list[str]:
    return estimate_frame(pd.DataFrame(rows, dtype=str), configs_dir)["error"].tolist()


# 1. power limit, SM clock --------------------------------------------------------------


def test_power_limit_below_lowest_clock_draw_is_an_error(capsys, configs_dir):
    base = dict(model=LLAMA, gpu="H100", batch_size=64, input_tokens=512, output_tokens=256)
    low = estimate(**base, sm_clock_mhz=345, configs_dir=configs_dir)
    _cli_error(
        capsys,
        [*BASE, "--power-limit", "10"],
        "power_limit 10 W is below the",
        "lowest SM clock 345 MHz",
    )
    # A feasible limit never gives less energy per token than the lowest clock allows.
    capped = estimate(**base, power_limit_w=300, configs_dir=configs_dir)
    assert capped.avg_power_w <= 300 * 1.001
    assert capped.energy_per_token_j >= low.energy_per_token_j * 0.9


def test_power_cap_physics_flags_infeasible_rows(tiny_config_dict):
    from mlenergy.estimate.features import feature_row, stack
    from mlenergy.estimate.profile import build_profile
    from mlenergy.estimate.serving import ServingSetup
    from mlenergy.models.architecture import ArchitectureSpec

    spec = ArchitectureSpec.from_config(tiny_config_dict)
    prof = build_profile(spec, "bfloat16")
    gpu = resolve_gpu("H100")
    rows = [
        feature_row(prof, gpu, ServingSetup(64, 512, 256, power_limit_w=limit))
        for limit in (1, 700)
    ]
    out = predict(stack(rows), default_coefficients())
    assert out.power_limit_infeasible.tolist() == [True, False]
    # The infeasible row keeps its real draw at the lowest clock: never cut below it.
    assert out.avg_power_w[0] == pytest.approx(out.min_clock_power_w[0])
    assert out.avg_power_w[0] > 1


def test_power_limit_above_tdp_is_an_error(capsys, configs_dir):
    _cli_error(capsys, [*BASE, "--power-limit", "5000"], "power_limit 5000 W", "<= 700 W")
    _cli_error(capsys, [*BASE, "--power-limit", "0"], "power_limit 0 W", "0 < power_limit")


def test_sm_clock_outside_gpu_range_is_an_error(capsys, configs_dir):
    _cli_error(capsys, [*BASE, "--sm-clock", "100"], "sm_clock 100 MHz", "345-1980 MHz")
    _cli_error(capsys, [*BASE, "--sm-clock", "5000"], "sm_clock 5000 MHz")


def test_batch_power_limit_and_clock_columns(configs_dir):
    errs = _batch_errors(
        configs_dir,
        [
            _row(power_limit_w=10),
            _row(power_limit_w=5000),
            _row(sm_clock_mhz=100),
            _row(sm_clock_mhz=1000, power_limit_w=300),
            _row(power_limit_w=300),
            _row(power_limit_w="abc"),
        ],
    )
    assert "power_limit 10 W is below the" in errs[0]
    assert "power_limit 5000 W" in errs[1]
    assert "sm_clock 100 MHz" in errs[2]
    assert "alternatives" in errs[3]
    assert errs[4] == ""
    assert "power_limit_w is not a number" in errs[5]


# 2. malformed inputs -----------------------------------------------------------------


GOOD_SPEC = {
    "memory_gb": 80,
    "memory_bandwidth_tb_s": 3.35,
    "tdp_w": 700,
    "bf16_tflops": 989,
    "max_sm_clock_mhz": 1980,
}


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        ("bad.yaml", "memory_gb: [1\n", "not valid YAML"),
        ("bad.json", '{"memory_gb": 80,', "not valid JSON"),
        (
            "clock.yaml",
            "memory_gb: 80\nmemory_bandwidth_tb_s: 3\ntdp_w: 700\nbf16_tflops: 900\n"
            "max_sm_clock_mhz: abc\n",
            "'max_sm_clock_mhz' must be a number",
        ),
        ("neg.json", json.dumps({**GOOD_SPEC, "idle_power_w": -5}), "'idle_power_w' must be a"),
        ("list.json", json.dumps({**GOOD_SPEC, "fp8_tflops": [1]}), "'fp8_tflops' must be a"),
        ("sm.json", json.dumps({**GOOD_SPEC, "sm_count": "many"}), "'sm_count' must be a"),
        (
            "noclock.json",
            json.dumps({k: v for k, v in GOOD_SPEC.items() if k != "max_sm_clock_mhz"}),
            "gives no SM clock (field 'max_sm_clock_mhz')",
        ),
    ],
)
def test_malformed_gpu_spec_files(tmp_path, capsys, configs_dir, name, text, fragment):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UserError, match="GPU spec"):
        load_gpu_spec_file(path)
    argv = [*BASE]
    argv[argv.index("H100")] = str(path)
    _cli_error(capsys, argv, fragment)


def test_valid_gpu_spec_file_with_optional_fields(tmp_path):
    path = tmp_path / "chip.json"
    path.write_text(json.dumps({**GOOD_SPEC, "max_sm_clock_mhz": "1800", "fp8_tflops": None}))
    spec = load_gpu_spec_file(path)
    assert spec.max_sm_clock_mhz == 1800.0 and spec.fp8_tflops is None


def test_empty_batch_csv(tmp_path, capsys):
    src = tmp_path / "in.csv"
    src.write_text("")
    argv = ["estimate", "--batch", str(src), "--out", str(tmp_path / "o.csv")]
    _cli_error(capsys, argv, "is empty")
    src.write_text("model,gpu,batch_size,output_tokens\n")
    _cli_error(capsys, argv, "has a header but no rows")
    assert not (tmp_path / "o.csv").exists()


def test_batch_csv_missing_columns(tmp_path, capsys):
    src = tmp_path / "in.csv"
    src.write_text("model,gpu\nx,H100\n")
    argv = ["estimate", "--batch", str(src), "--out", str(tmp_path / "o.csv")]
    _cli_error(capsys, argv, "'batch_size'", "'output_tokens'")


@pytest.mark.parametrize("folds", ["0", "1"])
def test_validate_needs_two_folds(capsys, folds):
    _cli_error(capsys, ["estimate", "validate", "--folds", folds], "--folds must be >= 2")


def test_calibrate_rejects_one_fold(tmp_path, capsys):
    argv = ["estimate", "calibrate", "--out", str(tmp_path / "c.json"), "--folds", "1"]
    _cli_error(capsys, argv, "--folds must be >= 2")


# 3. GPU count vs parallel layout -------------------------------------------------------


def test_num_gpus_must_match_layout(capsys, configs_dir):
    _cli_error(capsys, [*BASE, "--num-gpus", "3"], "num_gpus (3)", "= 1")
    _cli_error(capsys, [*BASE, "--tensor-parallel", "8", "--num-gpus", "4"], "num_gpus (4)", "= 8")
    e = estimate(
        LLAMA, "H100", 64, 256, input_tokens=512, tensor_parallel=2, configs_dir=configs_dir
    )
    assert e.num_gpus == 2  # derived when omitted


def test_expert_parallel_layouts(configs_dir):
    moe = "Qwen/Qwen3-30B-A3B-Instruct-2507"
    ok = [
        dict(model=moe, num_gpus=4, expert_parallel=4),  # tp = dp = 1, ep spans the GPUs
        dict(model=moe, num_gpus=4, expert_parallel=4, data_parallel=4),  # ep = tp x dp
        dict(model=moe, expert_parallel=2),  # num_gpus derived: 2
    ]
    bad = [
        dict(model=moe, num_gpus=4, expert_parallel=2, tensor_parallel=4),  # ep < num_gpus
        dict(model=moe, num_gpus=2, expert_parallel=4),
        dict(model=LLAMA, num_gpus=4, tensor_parallel=2),
    ]
    errs = _batch_errors(configs_dir, [_row(**r) for r in ok + bad])
    assert errs[:3] == ["", "", ""]
    assert "expert_parallel (2) must equal num_gpus (4)" in errs[3]
    assert "num_gpus (2) does not match" in errs[4]
    assert "num_gpus (4) does not match" in errs[5]


# 4. --batch --save ---------------------------------------------------------------------


def test_batch_save_stores_good_rows(tmp_path, capsys, configs_dir):
    pytest.importorskip("mlenergy.store")
    from mlenergy.store import RunStore

    src = tmp_path / "in.csv"
    pd.DataFrame([_row(), _row(batch_size=8), _row(num_gpus=3)]).to_csv(src, index=False)
    data = tmp_path / "data"
    argv = ["estimate", "--batch", str(src), "--out", str(tmp_path / "o.csv")]
    assert main([*argv, "--save", "--data-dir", str(data)]) == 0
    assert "saved 2 estimate record(s)" in capsys.readouterr().err
    runs = RunStore(data).runs()
    assert len(runs) == 2
    assert all(r.energy_source.startswith("estimated:mlenergy-") for r in runs)
    out = pd.read_csv(tmp_path / "o.csv")
    saved = sorted(r.phases[-1].energy_per_token_j for r in runs)
    assert np.allclose(saved, sorted(out["energy_per_token_j"].dropna()), rtol=1e-6)


# 5. inconsistent options ---------------------------------------------------------------


def test_fp8_model_with_other_precision(capsys, configs_dir):
    argv = [*BASE, "--precision", "bfloat16"]
    argv[argv.index(LLAMA)] = "meta-llama/Llama-3.1-8B-Instruct-FP8"
    _cli_error(capsys, argv, "precision 'bfloat16' conflicts", "-FP8")
    fp8 = estimate(
        "meta-llama/Llama-3.1-8B-Instruct-FP8",
        "H100",
        64,
        256,
        input_tokens=512,
        precision="fp8",
        configs_dir=configs_dir,
    )
    assert fp8.precision == "fp8"
    errs = _batch_errors(
        configs_dir, [_row(model="meta-llama/Llama-3.1-8B-Instruct-FP8", precision="mxfp4")]
    )
    assert "precision 'mxfp4' conflicts" in errs[0]


def test_sm_clock_and_power_limit_are_alternatives(capsys, configs_dir):
    argv = [*BASE, "--sm-clock", "1000", "--power-limit", "300"]
    _cli_error(capsys, argv, "sm_clock and power_limit are alternatives")


def test_descending_sweep_range(capsys, configs_dir):
    key, vals = parse_sweep_axis("sm-clock=1980:900:90")
    assert key == "sm_clock_mhz"
    assert vals[0] == 1980 and vals[-1] == 900 and len(vals) == 13
    argv = [a for a in BASE if a not in ("--batch-size", "64")]
    assert main([*argv, "--batch-size", "64", "--sweep", "sm-clock=1980:900:540", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["sm_clock_mhz"] for r in rows] == [1980, 1440, 900]
    _cli_error(capsys, [*BASE, "--sweep", "sm-clock=900:1980:0"], "sweep axis 'sm-clock'")


# reference loader: one resolution rule --------------------------------------------------


def test_config_id_for_uses_the_one_resolution_rule(tmp_path, configs_dir):
    from mlenergy.reference.measurements import config_id_for

    thinking = "Qwen/Qwen3-30B-A3B-Thinking-2507"
    assert config_id_for(thinking, configs_dir) == "Qwen/Qwen3-30B-A3B-Instruct-2507"
    assert config_id_for(f"{thinking}-FP8", configs_dir) == "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8"
    assert config_id_for("org/unknown-model", tmp_path) == "org/unknown-model"


def test_zero_input_tokens_is_refused_as_bench_refuses_it(capsys, configs_dir):
    argv = [*BASE]
    argv[argv.index("512")] = "0"
    _cli_error(capsys, argv, "input_tokens must be > 0, got 0")
    errors = _batch_errors(configs_dir, [_row(input_tokens=0), _row()])
    assert "input_tokens must be > 0" in errors[0] and errors[1] == ""


def test_validate_names_a_bad_hold_out(capsys):
    argv = ["estimate", "validate", "--hold-out", "model"]
    _cli_error(capsys, argv, "unknown --hold-out 'model'", "architecture, family, gpu")
