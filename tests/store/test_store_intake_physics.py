"""The attacker's physics: every limit comes from the GPU catalog, each refusal names its check."""

from __future__ import annotations

import json

import pytest

from mlenergy.cli import main
from mlenergy.errors import ValidationFailed
from mlenergy.store.checks import CHECKS
from mlenergy.store.submissions import SubmissionQueue
from mlenergy.store.validation import validate_bundle


def _dump(record) -> dict:
    return record.model_dump(mode="json")


def _bundle(*runs: dict, submitter: str = "Green Lab") -> bytes:
    return json.dumps({"submitter": submitter, "runs": list(runs)}).encode()


def _phase(run: dict, name: str) -> dict:
    return next(p for p in run["phases"] if p["phase"] == name)


def _set_decode(run: dict, *, duration_s=None, energy_j=None, tokens=None) -> dict:
    """Change the decode phase and keep its derived figures consistent."""
    p = _phase(run, "decode")
    p["duration_s"] = duration_s if duration_s is not None else p["duration_s"]
    p["energy_j"] = energy_j if energy_j is not None else p["energy_j"]
    p["tokens"] = tokens if tokens is not None else p["tokens"]
    p["avg_power_w"] = p["energy_j"] / p["duration_s"]
    p["energy_per_token_j"] = p["energy_j"] / p["tokens"]
    p["throughput_tokens_per_s"] = p["tokens"] / p["duration_s"]
    p["energy_j_repeats"] = None
    return run


def _problems(raw: bytes) -> list[str]:
    report = validate_bundle(raw)  # default lookup: the GPU catalog
    assert not report.ok
    return report.problems


def _attacks(factory) -> dict[str, tuple[dict, str]]:
    """name -> (run dict, the check it must fail)."""
    hot = _dump(factory.make_run(seed=1, decode_power_w=50_000.0, accelerator_tdp_w=50_000.0))
    cheap = _set_decode(_dump(factory.make_run(seed=2)), tokens=9_000_000_000)  # 4.5e-7 J/token
    huge_energy = _set_decode(_dump(factory.make_run(seed=3)), energy_j=1e308)
    many_tokens = _set_decode(_dump(factory.make_run(seed=4)), tokens=20_000_000_000_000)
    big_model = _dump(factory.make_run(seed=5))
    big_model["model"]["total_params"] = big_model["model"]["active_params"] = 10**15
    fast = _dump(factory.make_run(seed=6))
    _phase(fast, "decode")["throughput_tokens_per_s"] = 1e12
    long = _set_decode(_dump(factory.make_run(seed=7)), duration_s=1e17, energy_j=4.5e19)
    mystery = _dump(factory.make_run(seed=8, accelerator_model="Mystery X1"))  # claims 700 W
    many_gpus = _dump(factory.make_run(seed=9))
    many_gpus["hardware"]["accelerator_count"] = 1_000_000
    big_batch = _dump(factory.make_run(seed=10))
    big_batch["workload"]["batch_size"] = 10**9
    slow_token = _dump(factory.make_run(seed=11))
    _phase(slow_token, "decode")["itl_p99_s"] = 1e17
    return {
        "an ITL of 1e17 s": (slow_token, "figures-bounded"),
        "50 kW on one H100 (record claims the TDP)": (hot, "power-within-tdp"),
        "record TDP above the catalog": (hot, "tdp-matches-catalog"),
        "energy per token below the catalog floor": (cheap, "energy-per-token-floor"),
        "1e308 J": (huge_energy, "figures-bounded"),
        "2e13 tokens": (many_tokens, "figures-bounded"),
        "1e15 parameters": (big_model, "figures-bounded"),
        "throughput is not tokens / duration": (fast, "throughput-matches"),
        "1e17 s": (long, "figures-bounded"),
        "unknown GPU with its own TDP": (mystery, "gpu-in-catalog"),
        "a million GPUs": (many_gpus, "figures-bounded"),
        "a billion-sequence batch": (big_batch, "figures-bounded"),
    }


def test_each_attack_is_refused_by_its_named_check(factory):
    for name, (run, check) in _attacks(factory).items():
        problems = _problems(_bundle(run))
        assert any(p.endswith(f"[{check}]") for p in problems), (name, problems)


def test_the_floor_grows_with_active_parameters(factory):
    """The same figures pass for a small model and fail for a huge one (the floor's input)."""
    run = _set_decode(_dump(factory.make_run(seed=20)), tokens=400_000)  # 1e-2 J/token
    assert validate_bundle(_bundle(run)).ok
    run["model"]["total_params"] = run["model"]["active_params"] = 400_000_000_000
    assert any("[energy-per-token-floor]" in p for p in _problems(_bundle(run)))


def test_a_run_without_its_own_tdp_is_judged_by_the_catalog(factory):
    run = _dump(factory.make_run(seed=21, accelerator_tdp_w=None))
    assert validate_bundle(_bundle(run)).ok
    hot = _dump(factory.make_run(seed=22, accelerator_tdp_w=None, decode_power_w=900.0))
    assert any("[power-within-tdp]" in p for p in _problems(_bundle(hot)))


def test_a_maintainer_admits_an_unknown_gpu(data_dir, factory):
    run = _dump(factory.make_run(seed=23, accelerator_model="Mystery X1"))
    queue = SubmissionQueue(data_dir)
    with pytest.raises(ValidationFailed, match="gpu-in-catalog"):
        queue.submit(_bundle(run))
    (data_dir / "submissions").mkdir(parents=True)
    (data_dir / "submissions" / "gpus.json").write_text(
        json.dumps({"gpus": [{"name": "Mystery X1", "tdp_w": 700, "bf16_tflops": 900}]})
    )
    assert SubmissionQueue(data_dir).submit(_bundle(run)).status == "pending"


def test_explain_lists_every_named_check(capsys):
    assert main(["submit", "--explain"]) == 0
    out = capsys.readouterr().out
    for check in CHECKS:
        assert check.name in out
    assert main(["submit", "--explain", "--markdown"]) == 0
    table = capsys.readouterr().out
    assert table.startswith("| check |") and "`power-within-tdp`" in table


def test_docs_list_the_checks_as_explain_prints_them():
    from pathlib import Path

    from mlenergy.store.checks import explain

    docs = Path(__file__).resolve().parents[2] / "docs" / "submit.md"
    assert explain(markdown=True) in docs.read_text(encoding="utf-8")


def test_a_fabricated_run_queued_before_the_rules_is_not_approved(data_dir, factory):
    """An entry queued under older rules (50 kW on one H100) is checked again on approval."""
    from mlenergy.store import RunStore

    queue = SubmissionQueue(data_dir, tdp_lookup=lambda name: 50_000.0)  # yesterday's laxity
    hot = _dump(factory.make_run(seed=30, decode_power_w=40_000.0, accelerator_tdp_w=50_000.0))
    entry = queue.submit(_bundle(hot))
    with pytest.raises(ValidationFailed, match="power-within-tdp"):
        SubmissionQueue(data_dir).approve(entry.submission_id)
    assert not RunStore(data_dir).results_dir.exists() or RunStore(data_dir).count() == 0
    assert SubmissionQueue(data_dir).reject(entry.submission_id, "fabricated").status == "rejected"
