"""The serving client against a server that lies: one error line, nothing stored, bounded.

Every mode of :mod:`mlenergy.testing.hostile_openai` runs through ``mlenergy bench --endpoint``
in this process, against one fake server on 127.0.0.1 (a thread). No GPU, no real engine.
"""

from __future__ import annotations

import asyncio
import json
import warnings

import pytest

from mlenergy.cli import main
from mlenergy.errors import UserError
from mlenergy.models import preset_config
from mlenergy.store import RunStore
from mlenergy.testing.hostile_openai import running_server
from mlenergy.workloads.serving import client as client_module
from mlenergy.workloads.serving import loadgen
from mlenergy.workloads.serving.chunks import ChunkError, parse_chunk
from mlenergy.workloads.serving.client import RequestOptions, http_session, stream_request
from mlenergy.workloads.serving.loadgen import LoadFailed, generate_load
from mlenergy.workloads.serving.served_model import describe_served_model
from mlenergy.workloads.serving.server_info import detect_engine, scrape_metrics, served_models
from mlenergy.workloads.serving.spec import ServingSpec
from mlenergy.workloads.serving.steady_state import SteadyStateTracker
from mlenergy.workloads.serving.timing import RequestTiming
from mlenergy.workloads.serving.untrusted import clean_text

pytestmark = pytest.mark.timeout(120)

ARGS = [
    "--model", "m", "--model-config", "preset:tiny-dense", "--concurrency", "2",
    "--num-requests", "4", "--max-output-tokens", "16", "--idle-s", "0",
    "--request-timeout", "1", "--engine", "fake 1.0",
]  # fmt: skip


@pytest.fixture(scope="module")
def alias_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("aliased-model")
    preset_config("tiny-dense").save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def hostile(alias_folder):
    with running_server(alias_root=str(alias_folder)) as base:
        yield base


def _bench(base, mode, tmp_path, *extra):
    return main(["bench", "--endpoint", f"{base}/{mode}/v1", *ARGS, *extra,
                 "--data-dir", str(tmp_path / "data")])  # fmt: skip


def _lines(err: str) -> list[str]:
    return [x for x in err.splitlines() if x.strip() and "torch_dtype" not in x]


REFUSED = {
    "not-json": "chunk 3 of the stream ({not json) is not JSON",
    "shape-number": "chunk 3 of the stream (5) is a number, not an object",
    "shape-list": "chunk 3 of the stream ([1, 2]) is a list, not an object",
    "shape-choice": "choices[0] is a number, not an object",
    "shape-delta": "choices[0].delta is a string, not an object",
    "shape-usage": "usage is a list, not an object",
    "usage-string": "usage.completion_tokens is a string, not an integer",
    "usage-negative": "usage.completion_tokens -50 is outside [0, 2]",
    "prompt-negative": "usage.prompt_tokens -1000 is outside [0, ",
    "usage-lie": "usage.completion_tokens 1000000 is outside [0, 2]",
    "usage-huge": "usage.completion_tokens 100000000000 is outside [0, 2]",
    "endless": "the stream sent more than 2 text chunks",
    "drip": "no further output within --request-timeout 1 s after 1 text chunk(s)",
    "long-line": "an SSE line longer than 1 MiB",
    "error-body": "HTTP 500: eeee",
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(REFUSED))
def test_a_lying_stream_is_one_error_line_and_nothing_is_stored(hostile, mode, tmp_path, capsys):
    rc = _bench(hostile, mode, tmp_path)
    err = capsys.readouterr().err
    lines = _lines(err)
    assert rc == 2, err[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error:"), err[-2000:]
    assert REFUSED[mode] in lines[0]
    assert len(lines[0]) < 800 and "\x1b" not in lines[0]
    assert not (tmp_path / "data").exists() or not list((tmp_path / "data").rglob("*.parquet"))


def test_more_tokens_than_the_chunks_can_hold_fail_the_level(hostile, tmp_path, capsys):
    # 4 text chunks counted as 65 tokens (max_tokens 128): beyond 16 tokens a chunk
    rc = _bench(hostile, "usage-inflated", tmp_path, "--max-output-tokens", "128")
    lines = _lines(capsys.readouterr().err)
    assert rc == 2 and len(lines) == 1
    assert "the server counted 65 output tokens for 4 text chunk(s)" in lines[0]
    assert "no level had finished" in lines[0]


@pytest.mark.parametrize("mode", ["metrics-inf", "metrics-negative"])
def test_out_of_range_metrics_are_dropped_with_one_warning(hostile, mode, tmp_path, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc = _bench(hostile, mode, tmp_path, "--num-requests", "8", "--max-output-tokens", "64")
    assert rc == 0, capsys.readouterr().err[-2000:]
    dropped = [w for w in caught if "not finite or out of range" in str(w.message)]
    assert len(dropped) == 1 and "vllm:kv_cache_usage_perc" in str(dropped[0].message)
    (record,) = RunStore(tmp_path / "data").runs()
    metrics = record.serving.engine_metrics
    if metrics is not None:  # a scrape fell inside the window
        assert metrics.kv_cache_usage_mean is None and metrics.running_mean == 1.0


def test_engine_names_are_cut_and_cleaned_and_objects_are_not_versions(hostile):
    models = served_models(f"{hostile}/version-long/v1")
    long = detect_engine(f"{hostile}/version-long/v1", models)
    assert long.name is not None and long.name.startswith("vllm 1.0.aaa")
    assert len(long.name) <= 80 and "\x1b" not in long.name and "\n" not in long.name
    assert "Approved" not in long.name
    as_dict = detect_engine(f"{hostile}/version-dict/v1", models)
    assert as_dict.name is None  # not "vllm {'version': ...}"
    given = detect_engine(f"{hostile}/version-dict/v1", models, "mine\x1b[31m 1.0\nok")
    assert given.name == "mine 1.0 ok"
    assert clean_text({"a": 1}) is None and clean_text(float("nan")) is None
    assert clean_text("a\u202eb\u200bc") == "abc"


def test_a_cleaned_version_is_what_the_record_stores(hostile, tmp_path, capsys):
    rc = main(["bench", "--endpoint", f"{hostile}/version-long/v1", *ARGS[:-2],
               "--num-requests", "4", "--data-dir", str(tmp_path / "data")])  # fmt: skip
    assert rc == 0, capsys.readouterr().err[-2000:]
    (record,) = RunStore(tmp_path / "data").runs()
    for name in (record.serving.engine, record.software.engine):
        assert name is not None and len(name) <= 80 and "\x1b" not in name
    assert len(record.model_dump_json()) < 100_000


def test_metric_values_that_are_not_finite_or_in_range_are_dropped():
    dropped: list[str] = []
    text = (
        'vllm:num_requests_running{model_name="m"} NaN\n'
        'vllm:num_requests_waiting{model_name="m"} -3\n'
        'vllm:kv_cache_usage_perc{model_name="m"} 1.5\n'
        'sglang:num_running_reqs{a="}"} 4 1700000000000\n'  # a timestamp after the value
    )
    assert scrape_metrics(text, dropped) == {"running": 4.0}
    assert len(dropped) == 3
    many = "\n".join(f'vllm:num_requests_running{{i="{i}"}} 900000' for i in range(3))
    assert scrape_metrics(many) == {}  # the sum leaves the range


@pytest.mark.parametrize(
    "option",
    [
        ("--request-timeout", "nan"),
        ("--request-timeout", "0"),
        ("--request-timeout", "-5"),
        ("--request-timeout", "inf"),
        ("--startup-timeout", "nan"),
        ("--idle-s", "nan"),
        ("--burstiness", "inf"),
        ("--cpu-tdp-w", "nan"),
        ("--seed", "-1"),
        ("--client-procs", "0"),
        ("--client-procs", "many"),
    ],
)
def test_every_numeric_option_is_checked_before_anything_runs(option, tmp_path, capsys):
    # the endpoint does not exist: an option checked late would blame the server instead
    argv = ["bench", "--endpoint", "http://127.0.0.1:9/v1", *ARGS, *option]
    assert main([*argv, "--data-dir", str(tmp_path / "data")]) == 2
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith(f"error: {option[0]} ")
    assert not (tmp_path / "data").exists()


def test_startup_timeout_nan_is_refused_before_a_server_is_launched(tmp_path, capsys):
    argv = ["bench", "--launch", "sleep 300 {port}", "--model", "m",
            "--model-config", "preset:tiny-dense", "--startup-timeout", "nan"]  # fmt: skip
    assert main([*argv, "--data-dir", str(tmp_path / "data")]) == 2
    assert _lines(capsys.readouterr().err)[0].startswith("error: --startup-timeout nan")


def test_a_served_alias_is_described_from_the_root_it_names(
    hostile, alias_folder, tmp_path, capsys
):
    argv = ["bench", "--endpoint", f"{hostile}/alias/v1", "--model", "m", "--concurrency", "2",
            "--num-requests", "4", "--max-output-tokens", "8", "--idle-s", "0"]  # fmt: skip
    assert main([*argv, "--data-dir", str(tmp_path / "data")]) == 0, capsys.readouterr().err
    (record,) = RunStore(tmp_path / "data").runs()
    spec = ServingSpec(model="m", levels=(1,), num_requests=1, endpoint="http://x/v1")
    expected = describe_served_model(spec, [{"id": "m", "root": str(alias_folder)}])
    preset = describe_served_model(spec, [{"id": "m", "root": "preset:tiny-dense"}])
    assert record.model.config_fingerprint == expected.config_fingerprint
    assert record.model.total_params == preset.total_params
    # without a root the alias cannot be described: --model-config is asked for
    assert main([*argv[:2], f"{hostile}/ok/v1", *argv[3:]]) == 2
    assert "--model-config" in capsys.readouterr().err


def test_an_unreadable_root_names_what_the_server_said(tmp_path):
    spec = ServingSpec(model="tiny", levels=(1,), num_requests=1, endpoint="http://x/v1")
    with pytest.raises(UserError, match=r"loaded '/srv/models/x'.*--model-config"):
        describe_served_model(spec, [{"id": "tiny", "root": "/srv/models/x\x1b[2J"}])


def test_chunk_schema_reads_reasoning_text_and_refuses_booleans_as_counts():
    assert parse_chunk(b'{"choices":[{"delta":{"reasoning_content":"hm"}}]}', True, 8, 9)[0]
    assert not parse_chunk(b'{"choices":[{"delta":{"content":""}}]}', True, 8, 9)[0]
    with pytest.raises(ChunkError, match="not an integer"):
        parse_chunk(b'{"usage":{"completion_tokens":true}}', True, 8, 9)
    with pytest.raises(ChunkError, match="2 choices"):
        parse_chunk(b'{"choices":[{},{}]}', True, 8, 9)
    with pytest.raises(ChunkError, match="not JSON"):
        parse_chunk(b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}", True, 8, 9)


def test_a_stream_past_its_whole_deadline_fails(hostile, monkeypatch):
    # 64 tokens 50 ms apart: each gap is within the timeout, the whole is not
    monkeypatch.setattr(client_module, "SLOWEST_TOKEN_S", 0.005)
    options = RequestOptions(f"{hostile}/slow/v1", "m", "chat", 64, request_timeout_s=0.5)
    assert client_module.request_deadline_s(options) == pytest.approx(0.5 + 64 * 0.005)

    async def go():
        async with http_session(2) as session:
            return await stream_request(session, options, "hi", RequestTiming(0, 0.0))

    timing = asyncio.run(go())
    assert timing.error is not None and "whole deadline of 0.82 s" in timing.error
    assert 0 < len(timing.chunk_times_s) < 64
    assert json.dumps(timing.error)  # one plain line


def _load(base, mode, level, n, procs, tokens=16):
    options = RequestOptions(f"{base}/{mode}/v1", "m", "chat", tokens, request_timeout_s=5.0)
    tracker = SteadyStateTracker(level)
    result = asyncio.run(
        generate_load(options, ["hi there"] * n, [0.0] * n, level, tracker, client_procs=procs)
    )
    return result, tracker


@pytest.mark.slow
def test_worker_processes_stream_the_same_requests(hostile):
    result, tracker = _load(hostile, "ok", 4, 12, procs=2)
    assert result.client_procs == 2
    assert all(t.ok and t.output_tokens == 16 for t in result.timings)
    assert [t.index for t in result.timings] == list(range(12))
    assert tracker.window is not None  # first tokens reached the tracker from the workers
    with pytest.raises(LoadFailed, match="is a list, not an object"):
        _load(hostile, "shape-list", 2, 4, procs=2)


@pytest.mark.slow
def test_auto_hands_requests_to_a_worker_when_the_client_is_busy(hostile, monkeypatch):
    monkeypatch.setattr(loadgen, "AUTO_BUSY", -1.0)  # always "busy": hand on at the first look
    monkeypatch.setattr(loadgen, "MONITOR_S", 0.05)
    result, _ = _load(hostile, "slow", 2, 16, procs=None, tokens=8)
    assert result.client_procs >= 2
    assert all(t.ok and t.output_tokens == 8 for t in result.timings)
