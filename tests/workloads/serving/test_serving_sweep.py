"""``kind: serve`` sweep plans: parsing, stable keys, and a live sweep with a failed point."""

from __future__ import annotations

import pytest

from mlenergy.errors import UserError
from mlenergy.measure.emulated import install_emulated_gpus
from mlenergy.records import canonical_json, sha256_hex
from mlenergy.store import RunStore
from mlenergy.sweep import KEY_TAG, LocalExecutor, check_plan, parse_plan, run_sweep
from mlenergy.sweep.spec import IDENTITY_FIELDS, KEY_LENGTH

SERVE = {
    "name": "serve",
    "kind": "serve",
    "models": ["/models/m"],
    "batch_sizes": [2, 4],
    "input_tokens": 8,
    "output_tokens": 16,
    "serve": {"endpoint": "http://127.0.0.1:1/v1", "num_requests": 8, "ignore_eos": True},
}
BENCH = {
    "name": "tiny",
    "models": ["preset:tiny-dense"],
    "batch_sizes": [1],
    "input_tokens": [2],
    "output_tokens": [2],
}


def test_a_serve_plan_expands_levels_with_its_settings():
    runs = parse_plan(SERVE).runs()
    assert [r.kind for r in runs] == ["serve", "serve"]
    assert [r.batch_size for r in runs] == [2, 4]
    assert runs[0].serve.num_requests == 8 and runs[0].gpus == 0
    assert runs[0].key != runs[1].key
    other = parse_plan({**SERVE, "serve": {**SERVE["serve"], "request_rate": 4.0}}).runs()
    assert other[0].key != runs[0].key  # the load is part of what a serve run is


def test_bench_keys_do_not_change():
    (run,) = parse_plan(BENCH).runs()
    assert run.serve is None
    identity = {name: getattr(run, name) for name in IDENTITY_FIELDS}  # as before serve runs
    assert run.key == sha256_hex(canonical_json(identity))[:KEY_LENGTH]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"serve": None}, "kind: serve needs one"),
        ({"serve": {"num_requests": 8}}, "exactly one of endpoint and launch"),
        ({"serve": {"endpoint": "http://x/v1", "num_requests": 3}}, "below the largest"),
        ({"kind": "bench"}, "a serve: block goes with kind: serve"),
    ],
)
def test_bad_serve_plans_name_the_problem(change, says):
    with pytest.raises(UserError, match=says):
        parse_plan({**SERVE, **change})


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_live_serve_sweep_stores_a_level_that_never_ran_as_a_failed_point(dense_server, tmp_path):
    endpoint, _, model = dense_server
    plan = {
        **SERVE,
        "models": [model],
        "batch_sizes": [1, 4],
        # 1 request every ~2 s: level 1 is reached at once, level 4 never is
        "serve": {
            "endpoint": endpoint,
            "num_requests": 4,
            "request_rate": 0.5,
            "burstiness": 50.0,
            "ignore_eos": True,
            "engine": "transformers (test)",
        },
    }
    store = RunStore(tmp_path / "data")
    with install_emulated_gpus(power_w=100.0, count=1):
        summary = run_sweep(check_plan(parse_plan(plan)), store, LocalExecutor(), progress=False)
    records = sorted(store.runs(), key=lambda r: r.workload.batch_size)
    assert [(r.workload.batch_size, r.status) for r in records] == [(1, "ok"), (4, "failed")]
    assert "no steady state" in records[1].error
    assert all(KEY_TAG in r.tags for r in records)
    assert summary.ok == 1 and summary.failed == 1
    assert records[0].serving.request_rate_per_s == 0.5
