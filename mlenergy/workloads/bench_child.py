"""One fresh run of ``bench --processes N``: read a job on stdin, print records on stdout.

Run as ``python -m mlenergy.workloads.bench_child`` by
:func:`mlenergy.workloads.bench_processes.run_in_fresh_process`. The job is the JSON of
:func:`~mlenergy.workloads.bench_processes.job_text`; each record is printed as one line
(:data:`RECORD_PREFIX` and its JSON) as soon as it is made, and nothing is stored. Bad input
prints one line on stderr and exits 2.
"""

from __future__ import annotations

import json
import sys

from mlenergy.errors import UserError
from mlenergy.workloads.bench import BenchOptions, run_bench
from mlenergy.workloads.inference import InferenceSpec

RECORD_PREFIX = "mlenergy-record "
"""Starts each record line on stdout (any other line a library prints there is passed on)."""


def main() -> int:
    """Run the job on stdin; return the exit status."""
    try:
        job = json.loads(sys.stdin.read())
        spec_fields = dict(job["spec"])
        spec_fields["batch_sizes"] = tuple(spec_fields["batch_sizes"])
        spec = InferenceSpec(**spec_fields)
        options = BenchOptions(**job["options"])
        model = str(job["model"])
    except (ValueError, KeyError, TypeError) as err:
        print(f"error: a malformed bench job ({err})", file=sys.stderr)
        return 2
    try:
        run_bench(
            [model],
            spec,
            options,
            data_dir=None,
            on_record=lambda r: print(RECORD_PREFIX + r.model_dump_json(), flush=True),
        )
    except UserError as err:
        print(f"error: {err.message}", file=sys.stderr)
        return err.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
