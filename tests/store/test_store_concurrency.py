"""Two processes appending 200 records each lose none and duplicate none."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

from mlenergy.records import RunRecord
from mlenergy.store import RunStore


def _append_worker(
    data_dir: str, payloads: list[str], batch: int, compact_above: int
) -> tuple[int, int]:
    """Append the records (JSON texts) in small batches; return (added, duplicates).

    ``compact_above`` lowers the automatic compaction threshold, so compactions race the
    other process's appends and the parent's reads.
    """
    import mlenergy.store.store as store_module

    store_module.AUTO_COMPACT_SEGMENTS = compact_above
    store = RunStore(data_dir)
    records = [RunRecord.model_validate_json(p) for p in payloads]
    added = dups = 0
    for i in range(0, len(records), batch):
        res = store.append(records[i : i + batch])
        added += res.added
        dups += res.duplicates
    return added, dups


@pytest.mark.slow
def test_two_processes_append_200_each(data_dir, factory):
    base = [factory.make_run(seed=i) for i in range(8)]
    # 200 distinct records per process, plus 20 both processes try to write (overlap).
    shared = [base[i % 8].model_copy(update={"run_id": f"shared-run-{i:04d}"}) for i in range(20)]
    mine = [
        [base[i % 8].model_copy(update={"run_id": f"proc{p}-run-{i:04d}"}) for i in range(180)]
        for p in range(2)
    ]
    payloads = [[r.model_dump_json() for r in mine[p] + shared] for p in range(2)]
    ctx = mp.get_context("spawn")
    args = [(str(data_dir), payloads[0], 5, 12), (str(data_dir), payloads[1], 7, 12)]
    reads = []
    with ctx.Pool(2) as pool:
        pending = pool.starmap_async(_append_worker, args)
        while not pending.ready():  # read while both write and compact
            ids = RunStore(data_dir).runs_frame()["run_id"].tolist()
            assert len(ids) == len(set(ids)), "a reader saw a duplicate"
            reads.append(len(ids))
            time.sleep(0.05)
        results = pending.get(timeout=120)
    assert reads == sorted(reads), "a reader saw records disappear"
    total_added = sum(a for a, _ in results)
    total_dups = sum(d for _, d in results)
    assert total_added == 380 and total_dups == 20

    store = RunStore(data_dir)
    ids = store.runs_frame()["run_id"].tolist()
    assert len(ids) == 380 and len(set(ids)) == 380
    expected = {r.run_id for r in mine[0] + mine[1] + shared}
    assert set(ids) == expected
    assert len({r.content_hash() for r in store.runs()}) == 380
    leftovers = [p.name for p in (data_dir / "results").iterdir() if p.name.startswith(".tmp")]
    assert leftovers == []
