"""``mlenergy bench`` end to end on the presets, and one-line errors for bad input."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from mlenergy.cli import main
from mlenergy.records import RunRecord

torch.set_num_threads(1)

FAST = ["--input-tokens", "8", "--output-tokens", "4", "--repeats", "2", "--idle-s", "0.05"]


def _snapshot(folder: Path) -> dict[str, str]:
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


@pytest.fixture(scope="module")
def filled_store(tmp_path_factory):
    """A store holding the records of one small bench, and the JSON lines it printed."""
    data = tmp_path_factory.mktemp("store") / "data"
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(
            [
                "bench",
                "--model",
                "preset:tiny-dense",
                "--model",
                "preset:tiny-moe",
                "--batch-sizes",
                "1,2",
                *FAST,
                "--json",
                "--data-dir",
                str(data),
            ]
        )
    assert rc == 0, err.getvalue()
    return data, out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_bench_json_prints_records_and_fills_store(filled_store):
    data, stdout, stderr = filled_store
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert len(lines) == 4
    records = [RunRecord.model_validate_json(line) for line in lines]
    assert [(r.model.model_id, r.workload.batch_size) for r in records] == [
        ("preset:tiny-dense", 1),
        ("preset:tiny-dense", 2),
        ("preset:tiny-moe", 1),
        ("preset:tiny-moe", 2),
    ]
    assert all(r.status == "ok" and r.energy_source == "modelled:cpu-tdp" for r in records)
    assert "mlenergy bench" in stderr  # the table goes to stderr with --json

    from mlenergy.store import RunStore

    store = RunStore(data)
    assert {r.run_id for r in store.runs()} == {r.run_id for r in records}
    frame = store.runs_frame()
    assert frame["decode_energy_per_token_j"].notna().all()
    assert set(frame["model_id"]) == {"preset:tiny-dense", "preset:tiny-moe"}


@pytest.mark.slow
def test_bench_table_and_env_data_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLENERGY_DATA_DIR", str(tmp_path / "envdata"))
    rc = main(["bench", "--model", "preset:tiny-moe-deepseek", "--batch-sizes", "2", *FAST])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "preset:tiny-moe-deepseek" in captured.out
    assert "store:" in captured.out and "envdata" in captured.out
    assert (tmp_path / "envdata" / "results").is_dir()


def test_no_store_writes_nothing(tmp_path, capsys):
    data = tmp_path / "data"
    rc = main(
        [
            "bench",
            "-m",
            "preset:tiny-dense",
            "-b",
            "1",
            *FAST,
            "--no-store",
            "--json",
            "--data-dir",
            str(data),
        ]
    )
    assert rc == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1
    assert not data.exists()


def _bad_config(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama", "hidden_size": ')
    return str(path)


BAD = {
    "unknown hub id offline": (["--model", "no-such-org/no-such-model-xyz"], "Hugging Face Hub"),
    "malformed config.json": (["--model", "{bad}"], "malformed config file"),
    "unknown preset": (["--model", "preset:huge"], "unknown preset 'huge'"),
    "batch size 0": (["--model", "preset:tiny-dense", "--batch-sizes", "0"], "batch size 0"),
    "negative batch size": (
        ["--model", "preset:tiny-dense", "--batch-sizes=4,-1"],
        "batch size -1",
    ),
    "output tokens 0": (["--model", "preset:tiny-dense", "--output-tokens", "0"], "output tokens"),
    "good then bad model": (
        ["--model", "preset:tiny-dense", "--model", "{bad}"],
        "malformed config file",
    ),
    "good then non-causal config": (
        ["--model", "preset:tiny-dense", "--model", "{t5}"],
        "cannot build a causal language model",
    ),
    "context too long": (
        ["--model", "preset:tiny-dense", "--input-tokens", "4000"],
        "exceed the 2048-token context",
    ),
    "prompt file without text": (
        ["--model", "preset:tiny-dense", "--prompts", "{notext}"],
        "no text column",
    ),
    "gpu index not a number": (
        ["--model", "preset:tiny-dense", "--gpu-indices", "0,x"],
        "--gpu-indices item 'x' is not an integer",
    ),
    "gpu index on a machine without that gpu": (
        ["--model", "preset:tiny-dense", "--gpu-indices", "99"],
        "asks for GPU 99",
    ),
    "missing prompt file": (
        ["--model", "preset:tiny-dense", "--prompts", "nope.jsonl"],
        "prompt file 'nope.jsonl' does not exist",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_one_line_exit_2_store_unchanged(
    case, filled_store, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = tmp_path / "data"
    shutil.copytree(filled_store[0], data)
    before = _snapshot(data)
    args, expected = BAD[case]
    t5 = tmp_path / "t5.json"
    t5.write_text('{"model_type": "t5", "d_model": 32}')
    notext = tmp_path / "numbers.jsonl"
    notext.write_text('{"a": 1}\n')
    args = [
        a.replace("{bad}", _bad_config(tmp_path))
        .replace("{notext}", str(notext))
        .replace("{t5}", str(t5))
        for a in args
    ]
    # later options win: the case's own --batch-sizes / --output-tokens override the defaults
    rc = main(["bench", "--batch-sizes", "1", *FAST, *args, "--data-dir", str(data)])
    captured = capsys.readouterr()
    assert rc == 2
    err_lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(err_lines) == 1, captured.err
    assert err_lines[0].startswith("error: ") and expected in err_lines[0]
    assert captured.out == ""
    assert _snapshot(data) == before


def test_unwritable_data_dir(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    rc = main(
        ["bench", "-m", "preset:tiny-dense", "-b", "1", *FAST, "--data-dir", str(blocker / "data")]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and "\n" not in err
    assert "data directory" in err and "--data-dir" in err
    assert blocker.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write read-only folders")
def test_read_only_data_dir(tmp_path, capsys):
    data = tmp_path / "ro"
    data.mkdir()
    data.chmod(0o555)
    try:
        rc = main(["bench", "-m", "preset:tiny-dense", "-b", "1", *FAST, "--data-dir", str(data)])
    finally:
        data.chmod(0o755)
    assert rc == 2
    assert "not writable" in capsys.readouterr().err
    assert list(data.iterdir()) == []


def test_corrupted_store_file(filled_store, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(filled_store[0], data)
    segments = sorted((data / "results").rglob("*.parquet"))
    assert segments
    segments[0].write_bytes(b"this is not parquet")
    before = _snapshot(data)
    rc = main(["bench", "-m", "preset:tiny-dense", "-b", "1", *FAST, "--data-dir", str(data)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and "\n" not in err
    assert segments[0].name in err
    assert _snapshot(data) == before


def _no_model_building(monkeypatch):
    """Make any model source resolution or build fail the test loudly."""
    import mlenergy.models.loading as loading

    def refuse(*args, **kwargs):
        raise AssertionError("a model was resolved or built before the store was checked")

    monkeypatch.setattr(loading, "resolve_source", refuse)
    monkeypatch.setattr(loading, "load_model", refuse)
    monkeypatch.setattr(loading, "build_random", refuse)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_unwritable_data_dir_fails_before_any_model(monkeypatch, capsys):
    """`--data-dir /proc/mlenergy-ro` passes os.access as root: it must fail before measuring."""
    _no_model_building(monkeypatch)
    rc = main(
        ["bench", "-m", "preset:tiny-dense", "-b", "1", *FAST, "--data-dir", "/proc/mlenergy-ro"]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and "\n" not in err
    assert "/proc/mlenergy-ro is not writable" in err and "--data-dir" in err


def test_fresh_data_dir_probe_leaves_nothing(tmp_path, monkeypatch, capsys):
    """The write probe runs before the models and leaves no folder behind on a later error."""
    import mlenergy.workloads.bench as bench_module

    def refuse(*args, **kwargs):
        from mlenergy.errors import UserError

        raise UserError("stop after the store probe")

    monkeypatch.setattr(bench_module, "resolve_source", refuse)
    data = tmp_path / "new" / "data"
    rc = main(["bench", "-m", "preset:tiny-dense", "-b", "1", *FAST, "--data-dir", str(data)])
    assert rc == 2 and "stop after the store probe" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_quality_checks_a_corrupted_store_before_computing(
    filled_store, tmp_path, monkeypatch, capsys
):
    import mlenergy.quality.evaluate as quality_evaluate

    def refuse(*args, **kwargs):
        raise AssertionError("quality computed before the store was checked")

    monkeypatch.setattr(quality_evaluate, "model_perplexity", refuse)
    data = tmp_path / "data"
    shutil.copytree(filled_store[0], data)
    segments = sorted((data / "results").rglob("*.parquet"))
    segments[0].write_bytes(b"this is not parquet")
    before = _snapshot(data)
    rc = main(["quality", "--model", "preset:tiny-dense", "--data-dir", str(data)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and "\n" not in err
    assert segments[0].name in err
    assert _snapshot(data) == before


def test_config_missing_sizes_is_refused_before_building(tmp_path, capsys):
    """{"model_type": "llama"} must not silently become a 6.74B model with default sizes."""
    cfg = tmp_path / "missing.json"
    cfg.write_text('{"model_type": "llama"}')
    data = tmp_path / "data"
    rc = main(["bench", "-m", str(cfg), "-b", "1", *FAST, "--data-dir", str(data)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and "\n" not in err
    assert "hidden_size, num_hidden_layers, num_attention_heads, vocab_size" in err
    assert "memory" not in err
    assert not data.exists()


def test_bench_interleave_flag_interleaves_the_models(capsys):
    args = ["bench", "-m", "preset:tiny-dense", "-m", "preset:tiny-moe", "--batch-sizes", "1"]
    assert main([*args, *FAST, "--interleave", "--no-store", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert [r["model"]["model_id"] for r in lines] == ["preset:tiny-dense", "preset:tiny-moe"]
    assert all(r["tags"]["repeat_order"] == "interleaved" for r in lines)


def _table_text(records) -> str:
    import io

    from rich.console import Console

    from mlenergy.commands.bench import summary_table

    out = io.StringIO()
    Console(file=out, width=400, color_system=None).print(summary_table(records))
    return out.getvalue()


def test_bench_table_headline_is_the_whole_request_and_phases_are_labelled(filled_store):
    """The printed headline is the request phase (as the report shows), first and labelled."""
    _, stdout, stderr = filled_store
    assert "headline" in stderr  # the printed table (stderr with --json) names its headline
    records = [RunRecord.model_validate_json(line) for line in stdout.splitlines() if line.strip()]
    text = _table_text(records)
    header = next(line for line in text.splitlines() if "model" in line and "batch" in line)
    columns = [c.strip() for c in header.split("┃") if c.strip()]
    assert columns[3:7] == ["headline mJ/tok", "± 95%", "interval", "headline tok/s"]
    assert columns[7:9] == ["prefill only mJ/tok", "decode only mJ/tok"]
    assert "whole request" in text and "not the headline" in text
    first = next(line for line in text.splitlines() if "preset:tiny-dense" in line)
    cells = [c.strip() for c in first.split("│") if c.strip()]
    req, dec = records[0].phase("request"), records[0].phase("decode")
    assert cells[3] == f"{req.energy_per_token_j * 1e3:.4g}"
    assert cells[8] == f"{dec.energy_per_token_j * 1e3:.4g}" != cells[3]


def test_bench_table_headline_falls_back_to_decode_and_says_so(filled_store):
    _, stdout, _ = filled_store
    record = RunRecord.model_validate_json(stdout.splitlines()[0])
    decode_only = record.model_copy(
        update={"phases": [p for p in record.phases if p.phase != "request"]}
    )
    dec = decode_only.phase("decode")
    row = next(line for line in _table_text([decode_only]).splitlines() if "preset:" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    assert cells[3] == f"{dec.energy_per_token_j * 1e3:.4g} (decode only)"
