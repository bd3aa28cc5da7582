"""Near-duplicates are duplicates: a stored run, slightly altered, is refused."""

from __future__ import annotations

import json

import pytest

from mlenergy.errors import ValidationFailed
from mlenergy.store import RunStore
from mlenergy.store.submissions import SubmissionQueue


def _bundle(*runs: dict) -> bytes:
    return json.dumps({"submitter": "Green Lab", "runs": list(runs)}).encode()


def _decode(run: dict) -> dict:
    return next(p for p in run["phases"] if p["phase"] == "decode")


def _energy_up(run: dict) -> None:
    _decode(run)["energy_j"] *= 1 + 1e-9


def _one_more_token(run: dict) -> None:
    _decode(run)["tokens"] += 1


def _longer(run: dict) -> None:
    _decode(run)["duration_s"] *= 1.0001


def _fresh(run: dict, factory) -> dict:
    """A new run id and timestamp, so only the figures say it is the same run."""
    other = factory.make_run(seed=99).model_dump(mode="json")
    run["run_id"], run["created_at"] = other["run_id"], other["created_at"]
    run["tags"] = {"note": "resubmitted"}
    return run


@pytest.mark.parametrize("alter", [_energy_up, _one_more_token, _longer])
def test_a_slightly_altered_stored_run_is_a_duplicate(data_dir, factory, alter):
    stored = factory.make_run(seed=1)
    RunStore(data_dir).append([stored])
    run = _fresh(stored.model_dump(mode="json"), factory)
    for phase in run["phases"]:
        phase["energy_j_repeats"] = phase["duration_s_repeats"] = None
    alter(run)
    with pytest.raises(ValidationFailed, match="no-near-duplicate") as err:
        SubmissionQueue(data_dir).submit(_bundle(run))
    assert stored.run_id in str(err.value)


def test_near_duplicates_within_a_bundle_and_against_the_queue(data_dir, factory):
    queue = SubmissionQueue(data_dir)
    first = factory.make_run(seed=2).model_dump(mode="json")
    twin = _fresh(json.loads(json.dumps(first)), factory)
    _longer(twin)
    with pytest.raises(ValidationFailed, match=r"runs\[1\]: every figure is within 0.1%"):
        queue.submit(_bundle(first, twin))
    queue.submit(_bundle(first))
    with pytest.raises(ValidationFailed, match="of pending submission"):
        queue.submit(_bundle(twin))


def test_genuine_repeats_are_not_duplicates(data_dir, factory):
    """Two runs of one configuration a normal spread apart (0.5%) are both accepted."""
    RunStore(data_dir).append([factory.make_run(seed=3)])
    other = factory.make_run(seed=5)  # the factory jitter: +0.6% duration
    assert SubmissionQueue(data_dir).submit(_bundle(other.model_dump(mode="json")))
