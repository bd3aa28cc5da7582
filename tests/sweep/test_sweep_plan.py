"""Plans: keys checked whole before anything runs, one-line errors, stable run keys."""

from __future__ import annotations

import pytest
from sweep_helpers import TINY, run_cli

from mlenergy.errors import UserError
from mlenergy.measure.emulated import install_emulated_gpus
from mlenergy.sweep import check_plan, parse_plan
from mlenergy.sweep.spec import RunSpec


@pytest.mark.parametrize(
    "changes, named",
    [
        ({"batchsize": 4}, "'batchsize' (value 4)"),
        ({"repeats": [1, 2]}, "'repeats' = [1, 2]"),
        ({"batch_sizes": []}, "'batch_sizes' = []"),
        ({"input_tokens": [4, -8]}, "'input_tokens[1]' = -8"),
        ({"output_tokens": -1}, "'output_tokens' = -1"),
        ({"resources": {"gpus": [1, 2]}}, "'resources.gpus' = [1, 2]"),
        ({"resources": {"retry": 1}}, "'resources.retry'"),
        ({"quality": "bleu"}, "'quality' = 'bleu'"),
        ({"models": ["preset:no-such-model"]}, "models[0] = 'preset:no-such-model'"),
        ({"models": ["./missing/config.json"]}, "models[0] = './missing/config.json'"),
        ({"precisions": ["float8"]}, "precisions[0] = 'float8'"),
        ({"resources": {"gpus": 2}}, "resources.gpus = 2"),
        ({"devices": ["cuda"]}, "devices[0] = 'cuda'"),
        ({"input_tokens": [4000]}, "models[0] = 'preset:tiny-dense'"),
        ({"resources": {"gpus": 2, "tensor_parallel": 2}}, "resources.tensor_parallel = 2"),
    ],
)
def test_bad_plan_fails_before_anything_runs(write_plan, tmp_path, changes, named):
    data = tmp_path / "data"
    rc, out, err = run_cli("sweep", str(write_plan(**changes)), "--data-dir", str(data))
    assert rc == 2, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert named in lines[0]
    assert not data.exists(), "nothing may be written for a bad plan"


def test_gpus_without_a_gpu_fail_but_pass_where_zeus_sees_them():
    plan = parse_plan({**TINY, "resources": {"gpus": 2}})
    with pytest.raises(UserError, match="has no GPU"):
        check_plan(plan)
    with install_emulated_gpus(count=2):
        runs = check_plan(plan)
    assert {r.gpus for r in runs} == {2}
    check_plan(plan, use_ray=True)  # the Ray executor checks the cluster's nodes instead


def test_not_a_mapping_and_not_yaml(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n", encoding="utf-8")
    rc, _, err = run_cli("sweep", str(bad))
    assert rc == 2 and "must be a mapping" in err
    bad.write_text("name: [unclosed\n", encoding="utf-8")
    rc, _, err = run_cli("sweep", str(bad))
    assert rc == 2 and "not valid YAML" in err
    rc, _, err = run_cli("sweep", str(tmp_path / "absent.yaml"))
    assert rc == 2 and "does not exist" in err


def test_grid_is_the_product_of_the_axes():
    changes = {"batch_sizes": [1, 2, 2], "input_tokens": 3, "quality": "perplexity"}
    plan = parse_plan({**TINY, **changes})
    runs = plan.runs()
    bench = [r for r in runs if r.kind == "bench"]
    assert [(r.batch_size, r.input_tokens) for r in bench] == [(1, 3), (2, 3)]
    assert [r.kind for r in runs].count("quality") == 1
    assert len({r.key for r in runs}) == len(runs)


def test_key_depends_on_what_runs_not_how_or_which_plan():
    base = RunSpec(
        kind="bench", model="preset:tiny-dense", batch_size=1, input_tokens=2, output_tokens=2
    )
    same = base.model_copy(update={"timeout_s": 5.0, "retries": 3, "plan": "other"})
    assert same.key == base.key
    for field, value in [
        ("batch_size", 2),
        ("precision", "bfloat16"),
        ("gpus", 1),
        ("model", "preset:tiny-moe"),
        ("seed", 1),
        ("repeats", 2),
    ]:
        assert base.model_copy(update={field: value}).key != base.key, field
    assert len(base.key) == 32 and base.key == RunSpec.model_validate(base.model_dump()).key


@pytest.mark.parametrize(
    "args, named",
    [
        (["--address", "auto"], "--address 'auto' needs --ray"),
        (["--ray", "--address", "127.0.0.1:1"], "no Ray cluster answers at --address"),
        (["--ray", "--address", "nonsense"], "is not auto or HOST:PORT"),
    ],
)
def test_bad_ray_options_fail_in_one_line(write_plan, tmp_path, args, named):
    pytest.importorskip("ray")
    data = tmp_path / "data"
    rc, _, err = run_cli("sweep", str(write_plan()), "--data-dir", str(data), *args)
    assert rc == 2 and err.startswith("error: ") and named in err, err
    assert not (data / "results").exists()


@pytest.mark.parametrize("name", ["sweep-tiny.yaml", "sweep-estimate.yaml"])
def test_example_plans_are_valid(name, tmp_path):
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / name
    rc, out, err = run_cli("sweep", str(path), "--data-dir", str(tmp_path / "d"), "--dry-run")
    assert rc == 0, err
    assert "0 done" in out and out.count("todo  ") == 4
