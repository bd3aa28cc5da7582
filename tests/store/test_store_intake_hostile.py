"""A submitter who pretends: look-alike and hidden names, impossible times and energies, run ids
queued twice, a flood of bundles. Each is refused with its check, and the store and the queue
stay byte-identical."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mlenergy.cli import main
from mlenergy.errors import ValidationFailed
from mlenergy.records import ServingStats
from mlenergy.store import RunStore
from mlenergy.store.names import name_key, skeleton
from mlenergy.store.submissions import SubmissionQueue

CATALOG = {"NVIDIA H100 80GB HBM3": 700.0}


def lookup(name: str) -> float | None:
    return CATALOG.get(name)


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with the SHA-256 of its bytes (directories too)."""
    return {
        str(p.relative_to(root)): "dir"
        if p.is_dir()
        else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
    }


def bundle(*runs, submitter: str = "Green Lab") -> bytes:
    return json.dumps(
        {"submitter": submitter, "runs": [r.model_dump(mode="json") for r in runs]}
    ).encode()


@pytest.fixture
def queue(data_dir, factory):
    """A queue over a store holding one run, with one bundle already pending."""
    RunStore(data_dir).append([factory.make_run(seed=90)])
    q = SubmissionQueue(data_dir, tdp_lookup=lookup)
    q.submit(bundle(factory.make_run(seed=91), submitter="Other Lab"))
    return q


def refused(queue: SubmissionQueue, data: bytes, check: str, submitter: str | None = None) -> str:
    """Submit ``data``; assert it is refused by ``check`` and nothing on disk changed."""
    before = snapshot(queue.data_dir)
    with pytest.raises(ValidationFailed) as info:
        queue.submit(data, submitter=submitter)
    assert snapshot(queue.data_dir) == before
    hits = [p for p in info.value.problems if p.endswith(f"[{check}]")]
    assert hits, info.value.problems
    return hits[0]


# ---------------------------------------------------------------------- names


LOOKALIKES = {
    "cyrillic-M": "\u041cL.ENERGY Leaderboard v3",  # МL.ENERGY
    "cyrillic-E": "ML.\u0415NERGY",  # ML.ЕNERGY
    "cyrillic-e-lower": "ml\u0435nergy",  # mlеnergy
    "fullwidth": "\uff2d\uff2c.\uff25\uff2e\uff25\uff32\uff27\uff39 Leaderboard v2",
    "rn-for-m": "rnlenergy lab",
    "cyrillic-e-in-reference": "ref\u0435rence data",
    "greek-omicron-in-emulated": "emulated\u03bf",
}
HIDDEN = {
    "rtl-override": "\u202e3v draobredaeL YGRENE.LM",  # renders as ML.ENERGY Leaderboard v3
    "ansi-escape": "\x1b[31mGreen Lab\x1b[0m",
    "newline-claim": "Green Lab\nApproved by ML.ENERGY",
    "zero-width-only": "\u200b\u200b\u200b",
    "zero-width-inside": "Green\u200bLab",
    "bidi-isolate": "Green \u2067Lab\u2069",
    "hangul-fillers": "\u3164\u3164\u3164",
}


@pytest.mark.parametrize("name", LOOKALIKES.values(), ids=LOOKALIKES.keys())
def test_lookalike_submitters_are_refused(queue, factory, name):
    problem = refused(
        queue, bundle(factory.make_run(seed=1), submitter=name), "no-reserved-submitter"
    )
    assert "looks like a reserved name" in problem


@pytest.mark.parametrize("name", HIDDEN.values(), ids=HIDDEN.keys())
def test_hidden_characters_in_a_submitter_are_refused(queue, factory, name):
    problem = refused(queue, bundle(factory.make_run(seed=2), submitter=name), "name-visible")
    assert "U+" in problem and "\x1b" not in problem and "\n" not in problem


@pytest.mark.parametrize("name", ["   ", "...", "42 - 7"])
def test_a_submitter_without_a_letter_is_refused(queue, factory, name):
    refused(queue, bundle(factory.make_run(seed=3), submitter=name), "name-visible")


def test_bare_records_with_a_lookalike_submitter_option_are_refused(queue, factory):
    line = (factory.make_run(seed=4).model_dump_json() + "\n").encode()
    refused(queue, line, "no-reserved-submitter", submitter="ML.\u0415NERGY Leaderboard v3")


def test_names_are_kept_nfkc_normalised(queue, factory):
    entry = queue.submit(bundle(factory.make_run(seed=5), submitter="  \uff27reen Lab "))
    assert entry.submission.submitter == "Green Lab"
    assert queue.get(entry.submission_id).submission.submitter == "Green Lab"


def test_honest_names_in_other_scripts_are_accepted(queue, factory):
    for seed, name in ((6, "Лаборатория Энергии"), (7, "東京エネルギー研究室"), (8, "Énergie Lab")):
        assert queue.submit(bundle(factory.make_run(seed=seed), submitter=name))


def test_model_and_hardware_names_with_control_characters_are_refused(queue, factory):
    run = factory.make_run(seed=9)
    hw = run.hardware.model_copy(update={"cpu_model": "Xeon\x1b]0;pwned\x07"})
    problem = refused(queue, bundle(run.model_copy(update={"hardware": hw})), "name-visible")
    assert "hardware.cpu_model" in problem
    model = run.model.model_copy(update={"dtype": "bfloat16\u202e"})
    refused(queue, bundle(run.model_copy(update={"model": model})), "name-visible")


def test_a_model_id_named_like_the_reference_data_is_refused(queue, factory):
    model = factory.make_model("ML.ENERGY-Leaderboard/v3")
    run = factory.make_run(seed=10, model=model)
    refused(queue, bundle(run), "no-reserved-submitter")


def test_skeletons_follow_the_unicode_table():
    assert skeleton("\u0440aypal") == skeleton("paypal")  # Cyrillic р
    assert skeleton("\u041c") == skeleton("M") and skeleton("\u0435") == skeleton("e")
    assert skeleton("m") == skeleton("rn") and skeleton("0") == skeleton("O")
    assert skeleton("1") == skeleton("l") == skeleton("I")
    assert name_key("ML.ENERGY") == name_key("ml energy") == name_key("\u041cL.\u0415NERGY")
    assert name_key("Green Lab") != name_key("Greek Lab")


# ---------------------------------------------------------------------- records


def test_a_run_created_in_the_future_is_refused(queue, factory):
    run = factory.make_run(seed=20, created_at=datetime(2999, 1, 1, tzinfo=UTC))
    assert "lies in the future" in refused(queue, bundle(run), "times-plausible")


def test_a_run_that_ends_before_it_starts_is_refused(queue, factory):
    start = datetime(2026, 11, 1, 12, tzinfo=UTC)
    run = factory.make_run(seed=21, started_at=start, ended_at=start - timedelta(days=400_000))
    assert "400,000 day(s) before it starts" in refused(queue, bundle(run), "times-plausible")


def test_a_small_clock_skew_is_allowed(queue, factory):
    soon = datetime.now(UTC) + timedelta(minutes=2)
    run = factory.make_run(seed=22, created_at=soon, started_at=soon, ended_at=soon)
    assert queue.submit(bundle(run))


def _serving(factory, seed: int, **changes):
    """A serving run whose window is the request phase and whose requests fit in the run."""
    run = factory.make_run(seed=seed)
    req = run.phase("request")
    energy = req.energy_j
    stats = {
        "endpoint_api": "chat",
        "concurrency": 8,
        "max_output_tokens": 256,
        "ignore_eos": True,
        "requests_completed": 4,
        "input_tokens_total": 2048,
        "output_tokens_total": req.tokens,
        "window_start_s": 0.0,
        "window_end_s": req.duration_s,
        "window_output_tokens": req.tokens,
        "achieved_concurrency": 8.0,
        "run_duration_s": req.duration_s * 1.2,
        "run_energy_j": energy * 1.2,
        "request_energies_j": (energy * 0.25,) * 4,
        "request_output_tokens": (req.tokens // 4,) * 4,
        "split_energy_j": energy,
        "split_window_energy_j": energy,
    }
    stats.update(changes)
    workload = run.workload.model_copy(update={"method": "serving-steady-state"})
    return run.model_copy(update={"workload": workload, "serving": ServingStats(**stats)})


def test_request_energies_beyond_the_run_energy_are_refused(queue, factory):
    assert queue.submit(bundle(_serving(factory, 30)))
    window = _serving(factory, 31).phase("request").energy_j
    inflated = _serving(
        factory, 31, request_energies_j=(1e6,) * 4, split_energy_j=4e6, run_energy_j=window * 1.2
    )
    problem = refused(queue, bundle(inflated), "request-energies-fit")
    assert "add up to 4e+06 J" in problem
    unanchored = _serving(factory, 32, run_energy_j=None)
    refused(queue, bundle(unanchored), "request-energies-fit")


def test_a_run_id_pending_with_other_content_is_refused_and_approvals_never_stick(queue, factory):
    first = queue.submit(bundle(factory.make_run(seed=40, run_id="shared-run-0001")))
    again = factory.make_run(seed=41, run_id="shared-run-0001")
    problem = refused(queue, bundle(again), "run-id-unique")
    assert "shared-run-0001" in problem
    assert queue.approve(first.submission_id).added == 1
    assert queue.list("pending")[-1].submission_id != first.submission_id


def test_an_id_stored_meanwhile_refuses_the_approval_with_its_reason(queue, factory):
    entry = queue.submit(bundle(factory.make_run(seed=42, run_id="raced-run-0001")))
    RunStore(queue.data_dir).append([factory.make_run(seed=43, run_id="raced-run-0001")])
    before = snapshot(queue.data_dir)
    with pytest.raises(ValidationFailed, match="already used by another record"):
        queue.approve(entry.submission_id)
    assert snapshot(queue.data_dir) == before
    queue.reject(entry.submission_id, "run id taken")
    assert not [q for q in queue.list("pending") if q.submission_id == entry.submission_id]


def test_pending_bundles_per_submitter_are_capped(data_dir, factory):
    queue = SubmissionQueue(data_dir, tdp_lookup=lookup, max_pending=3)
    for seed in range(50, 53):
        queue.submit(bundle(factory.make_run(seed=seed), submitter="Busy Lab"))
    problem = refused(
        queue, bundle(factory.make_run(seed=53), submitter="busy lab"), "pending-per-submitter"
    )
    assert "already has 3 bundle(s) waiting for review (at most 3)" in problem
    assert queue.submit(bundle(factory.make_run(seed=54), submitter="Quiet Lab"))
    line = (factory.make_run(seed=55).model_dump_json() + "\n").encode()
    refused(queue, line, "pending-per-submitter", submitter="Busy Lab")


def test_the_cap_is_a_setting(data_dir, factory, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("MLENERGY_MAX_PENDING_PER_SUBMITTER", "1")
    d = ["--data-dir", str(data_dir)]
    for seed, code in ((60, 0), (61, 2)):
        path = tmp_path / f"b{seed}.json"
        path.write_bytes(bundle(factory.make_run(seed=seed)))
        assert main(["submit", str(path), *d]) == code
    assert "(at most 1)" in capsys.readouterr().err
    monkeypatch.setenv("MLENERGY_MAX_PENDING_PER_SUBMITTER", "lots")
    assert main(["submit", str(path), *d]) == 2
    assert "MLENERGY_MAX_PENDING_PER_SUBMITTER" in capsys.readouterr().err
