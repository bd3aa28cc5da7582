"""The ``mlenergy estimate`` command: single, JSON, sweep, batch, errors, calibrate, validate."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mlenergy.cli import main

BASE = [
    "estimate",
    "--model",
    "meta-llama/Llama-3.1-8B-Instruct",
    "--gpu",
    "H100-SXM5-80GB",
    "--input-tokens",
    "512",
    "--output-tokens",
    "256",
]


def test_single_estimate_prints_everything(capsys, configs_dir):
    assert main([*BASE, "--batch-size", "64"]) == 0
    out = capsys.readouterr().out
    for needle in (
        "energy per output token",
        "energy per request",
        "throughput",
        "average power",
        "prefill",
        "decode",
        "compute",
        "memory",
        "static_idle",
        "90% interval",
        "estimated:mlenergy-",
    ):
        assert needle in out


def test_json_output(capsys, configs_dir):
    assert main([*BASE, "--batch-size", "64", "--precision", "fp8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["precision"] == "fp8"
    assert data["energy_per_token_j"] == pytest.approx(
        data["avg_power_w"] / data["throughput_tokens_per_s"]
    )


def test_sweep_two_axes_and_plot(capsys, tmp_path, configs_dir):
    plot = tmp_path / "sweep.png"
    rc = main(
        [
            *BASE,
            "--sweep",
            "batch-size=1,8,64",
            "sm-clock=900:1980:540",
            "--json",
            "--plot",
            str(plot),
        ]
    )
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 9 and {r["sm_clock_mhz"] for r in rows} == {900, 1440, 1980}
    assert plot.stat().st_size > 1000


def test_power_limit_option(capsys, configs_dir):
    assert main([*BASE, "--batch-size", "128", "--power-limit", "300", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["avg_power_w"] <= 300.0001


def test_batch_mode(tmp_path, configs_dir):
    src = tmp_path / "in.csv"
    pd.DataFrame(
        {
            "model": ["meta-llama/Llama-3.1-8B-Instruct", "nope/nope"],
            "gpu": ["H100", "H100"],
            "num_gpus": [1, 1],
            "tensor_parallel": [1, 1],
            "expert_parallel": [1, 1],
            "data_parallel": [1, 1],
            "precision": ["bfloat16", "bfloat16"],
            "task": ["lm-arena-chat", ""],
            "batch_size": [32, 8],
            "max_num_seqs": [32, 8],
            "input_tokens": ["", 100],
            "output_tokens": [300, 100],
        }
    ).to_csv(src, index=False)
    out = tmp_path / "out.csv"
    assert (
        main(
            ["estimate", "--batch", str(src), "--out", str(out), "--configs-dir", str(configs_dir)]
        )
        == 0
    )
    res = pd.read_csv(out, keep_default_na=False)
    assert res.loc[0, "error"] == "" and float(res.loc[0, "energy_per_token_j"]) > 0
    assert "nope__nope.json" in res.loc[1, "error"]


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ({"--gpu": "H999"}, "unknown gpu 'H999'"),
        ({"--tensor-parallel": "3"}, "tensor_parallel (3)"),
        ({"--output-tokens": "-4"}, "output_tokens"),
        ({"--batch-size": "100000"}, "does not fit"),
    ],
)
def test_bad_input_one_line_exit_2(capsys, configs_dir, override, needle):
    opts = {
        "--model": "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu": "H100",
        "--input-tokens": "512",
        "--output-tokens": "256",
        "--batch-size": "8",
    }
    opts.update(override)
    argv = ["estimate"] + [x for kv in opts.items() for x in kv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and needle in err and "\n" not in err


@pytest.mark.slow
def test_calibrate_to_user_path(tmp_path, capsys, configs_dir):
    out = tmp_path / "coef.json"
    assert main(["estimate", "calibrate", "--out", str(out), "--folds", "0", "--no-v2"]) == 0
    data = json.loads(out.read_text())
    report = json.loads((tmp_path / "coef.report.json").read_text())  # beside, not inside
    assert 0 < data["eta_mem"] <= 1 and report["calibrated_gpus"] == ["B200", "H100-SXM5-80GB"]
    assert "calibrated_gpus" not in data and "log_q05" not in data
    assert set(data["engine_overheads"]) == {"leaderboard-v2-server"}
    printed = capsys.readouterr().out
    assert "fitted on" in printed and "leaderboard-v2-server.host_slowdown" in printed


@pytest.mark.slow  # over ~20 s on 2 shared cores; left out by `make test-fast`
def test_validate_json(capsys, configs_dir):
    assert main(["estimate", "validate", "--folds", "4", "--group-by", "model", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"overall", "gpu", "kind", "model", "host-bound rule"} <= set(data)
    assert set(data["host-bound rule"]) == {"matched", "not matched"}
    assert set(data["meets_targets"]) == {
        "energy_median",
        "energy_p90",
        "throughput_median",
        "power_median",
    }
    assert {"overall", "gpu", "kind", "family"} <= set(data)
    names = {c["name"] for c in data["target_checks"]}
    assert "throughput_signed[gpu=B200]" in names and "power_signed[kind=moe]" in names
    assert not any("held-out" in n for n in names)
    for c in data["target_checks"]:
        figure = abs(c["value"]) if "signed" in c["name"] else c["value"]
        assert c["met"] == (figure <= c["limit"])
    tail = data["energy_tail"]
    assert 0 <= tail["stalled"] <= tail["over"] and tail["allowed"] > 0
    clean = {c["name"] for c in data["target_checks_without_stalled"]}
    assert clean == names


def test_save_as_record(tmp_path, capsys, configs_dir):
    pytest.importorskip("mlenergy.store")
    from mlenergy.store import RunStore

    data = tmp_path / "data"
    assert main([*BASE, "--batch-size", "16", "--save", "--data-dir", str(data)]) == 0
    runs = RunStore(data).runs()
    assert len(runs) == 1
    run = runs[0]
    assert run.energy_source.startswith("estimated:mlenergy-")
    assert {p.phase for p in run.phases} == {"prefill", "decode", "request"}
    assert run.hardware.accelerator_model == "H100-SXM5-80GB"
    assert run.software.engine == "vllm 0.11.1"  # the software the default profile models
    request = next(p for p in run.phases if p.phase == "request")
    interval = request.energy_per_token_j_interval
    assert interval.low < request.energy_per_token_j < interval.high
    assert not any(k.startswith("estimate_energy_per_token") for k in run.tags)


def test_engine_option(capsys, configs_dir):
    assert main([*BASE, "--batch-size", "16", "--engine", "vllm-0.5.4"]) == 0
    assert "engine leaderboard-v2-server" in capsys.readouterr().out
    assert main([*BASE, "--batch-size", "16", "--engine", "tgi"]) == 2
    assert "unknown engine 'tgi'" in capsys.readouterr().err


@pytest.mark.slow
def test_calibrate_with_store_without_measurements(tmp_path, configs_dir):
    pytest.importorskip("mlenergy.store")
    data = tmp_path / "data"
    assert main([*BASE, "--batch-size", "16", "--save", "--data-dir", str(data)]) == 0
    out = tmp_path / "coef.json"
    argv = ["estimate", "calibrate", "--store", str(data), "--out", str(out), "--folds", "0"]
    assert main([*argv, "--no-v2"]) == 0  # estimates in the store are not measurements
    assert out.is_file()
    assert main([*argv[:3], str(tmp_path / "nothing"), *argv[4:], "--no-v2"]) == 0


@pytest.mark.slow
def test_validate_can_hold_out_a_gpu(capsys, configs_dir):
    assert main(["estimate", "validate", "--hold-out", "gpu", "--no-v2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["gpu"]) == {"B200", "H100-SXM5-80GB"}
    assert data["overall"]["all"]["n"] == 673
