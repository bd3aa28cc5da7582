"""Validation that cannot be made to hoard: bundles are read record by record, each bounded
before it is built, and checking stops after a bounded number of problems."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from mlenergy.records import PowerTimeline
from mlenergy.store.bundle import MAX_RECORDS
from mlenergy.store.json_stream import MAX_ARRAY_ITEMS, MAX_RECORD_NODES
from mlenergy.store.validation import MAX_PROBLEMS, validate_bundle

EMPTY_RECORDS = 1_600_000
"""4.8 MB of ``{}`` records: the bundle that made validation hold every record at once."""


def _heap_peak_mb(data: bytes, **kwargs) -> tuple[float, list[str]]:
    tracemalloc.start()
    try:
        report = validate_bundle(data, **kwargs)
        return tracemalloc.get_traced_memory()[1] / 1e6, report.problems
    finally:
        tracemalloc.stop()


EMPTY_BUNDLES = {
    "json-lines": b"{}\n" * EMPTY_RECORDS,
    "array": b"[" + b"{}," * (EMPTY_RECORDS - 1) + b"{}]",
    "submission": b'{"submitter": "Lab", "runs": [' + b"{}," * (EMPTY_RECORDS - 1) + b"{}]}",
}


@pytest.mark.parametrize("data", EMPTY_BUNDLES.values(), ids=EMPTY_BUNDLES.keys())
def test_a_bundle_of_empty_records_stops_after_bounded_problems(data):
    assert len(data) <= 5_000_000
    peak_mb, problems = _heap_peak_mb(data, submitter="Lab")
    assert peak_mb < 40, f"validation held {peak_mb:.0f} MB of Python objects"  # was > 400 MB
    assert MAX_PROBLEMS < len(problems) <= MAX_PROBLEMS + 2
    last = problems[-1]
    assert last.startswith("... and ") and "not checked" in last, last
    assert any(word in last for word in ("1,599,9", "over 10,000"))


def test_the_rest_of_json_lines_is_counted_exactly():
    problems = validate_bundle(b"{}\n" * 1_000, submitter="Lab").problems
    stop = int(problems[-1].split()[2].replace(",", ""))
    checked = {p.split(".")[0].split(":")[0] for p in problems[:-1]}
    assert stop + len(checked) == 1_000


@pytest.mark.slow
def test_a_record_with_a_million_objects_is_refused_before_it_is_built():
    inner = b"{}," * 1_000_000 + b"{}"
    data = b'{"submitter": "Lab", "runs": [{"phases": [' + inner + b"]}]}"
    peak_mb, problems = _heap_peak_mb(data)
    assert peak_mb < 20, peak_mb  # building it would take > 60 MB, validating it gigabytes
    assert problems[0] == (
        f"runs[0]: a record holds more than {MAX_RECORD_NODES:,} objects, arrays and strings "
        "[json-size]"
    )


def test_long_arrays_are_refused_unless_they_are_number_series(factory):
    run = factory.make_run(seed=1).model_dump(mode="json")
    run["phases"] = [1] * (MAX_ARRAY_ITEMS + 1)
    problems = validate_bundle(json.dumps({"submitter": "Lab", "runs": [run]}).encode()).problems
    assert problems == [
        f"runs[0]: phases holds {MAX_ARRAY_ITEMS + 1:,} items (at most {MAX_ARRAY_ITEMS:,}; "
        "only number series such as a power timeline may be longer) [json-size]"
    ]
    series = factory.make_run(seed=2).model_dump(mode="json")
    series["power_timeline"] = {"t_s": [-1] * 5_000, "power_w": [1] * 5_000, "energy_source": "x"}
    problems = validate_bundle(json.dumps({"submitter": "Lab", "runs": [series]}).encode()).problems
    assert len(problems) == 1 and "not all numbers >= 0" in problems[0]


def test_a_long_power_timeline_is_read_in_full(factory):
    n = 50_000
    timeline = PowerTimeline(
        t_s=tuple(i * 0.001 for i in range(n)),
        power_w=(450.0,) * n,
        energy_source="measured:zeus-nvml",
    )
    run = factory.make_run(seed=3, power_timeline=timeline)
    report = validate_bundle(
        json.dumps({"submitter": "Lab", "runs": [run.model_dump(mode="json")]}).encode()
    )
    assert report.ok, report.problems
    assert report.submission.runs[0].power_timeline.t_s[-1] == pytest.approx((n - 1) * 0.001)


def test_records_beyond_the_cap_are_refused():
    data = b"[" + b"1," * MAX_RECORDS + b"1]"
    problems = validate_bundle(data, submitter="Lab").problems
    assert problems[-1].startswith("... and ")  # 200 "expected a JSON object" first
    small = b"[" + b"[]," * (MAX_RECORDS // 100) + b"[]]"
    assert "bundle-size" not in " ".join(validate_bundle(small, submitter="Lab").problems)


def test_many_top_level_fields_are_bounded():
    fields = ", ".join(f'"f{i}": 1' for i in range(MAX_RECORD_NODES + 10))
    problems = validate_bundle(f'{{"runs": [], {fields}}}'.encode()).problems
    assert any(p.endswith("[json-size]") for p in problems), problems[:3]
    assert len(problems) <= MAX_PROBLEMS + 2


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"submitter": "Lab", "runs": [', "Expecting value"),
        ('{"submitter": "Lab", "runs": [{}] "x": 1}', "Expecting ',' delimiter"),
        ('{"submitter": "Lab", "runs": [{}]} trailing', "Extra data"),
        ('{"submitter": "Lab" "runs": []}', "Expecting ',' delimiter"),
        ("[{}, {}", "Expecting"),
        ('{"submitter": "Lab", "submitter": "Other", "runs": [{}]}', "repeats the field"),
    ],
)
def test_broken_json_is_named_with_its_place(text, expected):
    problems = validate_bundle(text.encode(), submitter="Lab").problems
    assert any(expected in p for p in problems), problems


def test_json_lines_keep_going_past_a_broken_line(factory):
    good = factory.make_run(seed=4).model_dump_json()
    broken = factory.make_run(seed=5).model_dump_json().replace('"', "'", 1)
    other = factory.make_run(seed=6).model_dump_json()
    text = "\n".join([good, broken, "[" * 40 + "]" * 40, other]) + "\n"
    problems = validate_bundle(text.encode(), submitter="Lab").problems
    assert problems[0].startswith("line 2: not valid JSON") and "[json-format]" in problems[0]
    assert problems[1] == "line 3: bundle nests objects or arrays deeper than 32 [json-depth]"
    assert len(problems) == 2, problems
