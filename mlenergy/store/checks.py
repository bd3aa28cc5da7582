"""The named checks of the submission intake: one name per rule, listed by ``--explain``.

Every problem the intake reports ends with the name of the check it failed, in brackets
(``runs[0].phases[1] (decode): average power 50000 W is outside ... [power-within-tdp]``), as
MLCommons' submission checker names its checks. ``mlenergy submit --explain`` prints this list
(``--markdown`` for docs/submit.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    """One rule of the intake.

    Attributes:
        name: Short kebab-case name, shown after each problem.
        group: What the rule guards (format, physics, provenance, identity, duplicates,
            queue).
        rule: What is checked, in one or two sentences.
        verdict: ``refused`` (the bundle is not queued) or ``flagged`` (queued, shown with a
            flag on the leaderboard).
    """

    name: str
    group: str
    rule: str
    verdict: str = "refused"


CHECKS: tuple[Check, ...] = (
    # format
    Check(
        "bundle-size",
        "format",
        "The bundle is at most 5 MB and 10,000 records; reading stops at the limit.",
    ),
    Check("json-format", "format", "UTF-8 JSON: one Submission object, an array or JSON Lines."),
    Check("json-depth", "format", "Objects and arrays nest at most 32 deep within a record."),
    Check(
        "json-size",
        "format",
        "A record holds at most 5,000 objects, arrays and strings, and an array at most 1,000 "
        "items (number series such as a power timeline's samples excepted: numbers >= 0 only); "
        "counted before the record is built.",
    ),
    Check("integer-size", "format", "Integers have at most 20 digits."),
    Check("finite-numbers", "format", "No NaN or Infinity anywhere (they are not JSON numbers)."),
    Check("schema", "format", "The record schema (data/schema): no unknown fields, types, ranges."),
    # physics (limits from the GPU catalog, never from the record)
    Check(
        "gpu-in-catalog",
        "physics",
        "The accelerator is in the GPU catalog (mlenergy/reference/gpu_catalog.json) or admitted "
        "by a maintainer in data/submissions/gpus.json; every limit below comes from there.",
    ),
    Check(
        "tdp-matches-catalog",
        "physics",
        "A record's own accelerator_tdp_w, if given, is not above the catalog's TDP x 1.2.",
    ),
    Check(
        "power-within-tdp",
        "physics",
        "Each phase's average power (energy / duration) lies in [5% of, 1.2 x] the catalog TDP "
        "x accelerator count (CPU-only runs: the CPU TDP x packages).",
    ),
    Check("idle-within-tdp", "physics", "Idle power is at most 1.2 x the catalog TDP x count."),
    Check(
        "energy-per-token-floor",
        "physics",
        "Energy per token is at least half of 2 x active parameters x TDP / peak FLOP/s: no "
        "device turns out tokens faster than its peak tensor throughput at its TDP allows.",
    ),
    Check("energy-matches-power", "physics", "energy_j = avg_power_w x duration_s within 5%."),
    Check(
        "energy-per-token-matches", "physics", "energy_per_token_j = energy_j / tokens within 1%."
    ),
    Check(
        "throughput-matches",
        "physics",
        "throughput_tokens_per_s = tokens / duration_s within 1% (tokens = throughput x time).",
    ),
    Check(
        "figures-bounded",
        "physics",
        "Durations at most 30 days, energies at most 1e12 J, tokens at most 1e12 per phase, "
        "parameters at most 1e13, counts (GPUs, batch, requests, repeats, token lengths) within "
        "stated maxima, latencies (TTFT, ITL) no longer than their phase, durations positive "
        "when energy is given.",
    ),
    Check("cpu-tdp-given", "physics", "A CPU-only run states its CPU TDP (its power model)."),
    Check(
        "request-energies-fit",
        "physics",
        "A serving record's per-request energies, and split_energy_j, add up to at most the "
        "whole run's energy run_energy_j (within 0.5%), which is given with them.",
    ),
    Check(
        "times-plausible",
        "physics",
        "created_at, started_at and ended_at lie at most 10 minutes in the future (clock "
        "skew), and a run does not end before it starts.",
    ),
    # provenance
    Check("run-succeeded", "provenance", "Only successful runs are submitted."),
    Check("cpu-model-given", "provenance", "A CPU-only run names its CPU."),
    Check(
        "software-versions",
        "provenance",
        "Measured or modelled runs give the torch version (or the serving engine); Zeus "
        "measurements give the Zeus version.",
    ),
    Check("has-energy", "provenance", "At least one energy figure (energy is never a silent 0)."),
    Check("no-emulated-source", "provenance", "No energy figure comes from emulated test devices."),
    Check(
        "no-reserved-source",
        "provenance",
        "No energy figure is labelled reference:* (the maintainers' imports of published "
        "data), nor names an emulated device.",
    ),
    Check(
        "no-reserved-submitter",
        "provenance",
        "The submitter (NFKC-normalised) does not look like a reserved name: its Unicode "
        "confusable skeleton (UTS #39), case-folded, differs from the reference data's "
        "submitters' and does not start with mlenergy's own labels (mlenergy, emulated, "
        "reference); a model id does not look like a reference data submitter either.",
    ),
    Check(
        "measured-provenance",
        "provenance",
        "A measured run carries what a real run records: device names and driver, the Zeus "
        "version, the measured GPU indices and a power timeline covering each phase window "
        "(as MLCommons' power check requires). Without it the run is queued but shown as "
        "unverified.",
        "flagged",
    ),
    # identity
    Check("model-id", "identity", "A hub id (org/name), preset:<name> or config:<name>@<hex>."),
    Check(
        "name-visible",
        "identity",
        "The submitter's name holds no control, format or bidirectional character (ANSI "
        "escapes, newlines, zero-width or direction marks) and at least one letter; model "
        "ids, architectures, dtypes and hardware and engine names hold no control or format "
        "character.",
    ),
    Check("task-known", "identity", "A known task, or one declared new (new_tasks)."),
    Check(
        "run-id-unique",
        "identity",
        "A run or quality id is not reused for other content in the bundle, the store or "
        "the queue.",
    ),
    # duplicates
    Check(
        "no-duplicate", "duplicates", "No record twice (content hash), in bundle, store or queue."
    ),
    Check(
        "no-near-duplicate",
        "duplicates",
        "No run nearly duplicating a stored, pending or bundled run: the same workload shape "
        "(kind, batch, input and output lengths) with every figure (each phase's duration, "
        "energy, tokens and power, the median ITL) within 0.1%, whatever model id or "
        "hardware name it carries.",
    ),
    # queue
    Check(
        "pending-per-submitter",
        "queue",
        "A submitter has at most 20 bundles waiting for review at once (the setting "
        "MLENERGY_MAX_PENDING_PER_SUBMITTER; names compared by their skeleton).",
    ),
)
"""Every check, in the order ``--explain`` lists them."""

CHECK_NAMES = frozenset(c.name for c in CHECKS)


def tag(check: str, problem: str) -> str:
    """``problem`` with the name of the check it failed appended.

    Raises:
        KeyError: ``check`` is not a registered check (a programming error).
    """
    if check not in CHECK_NAMES:
        raise KeyError(f"unregistered check {check!r}")
    return f"{problem} [{check}]"


def explain(markdown: bool = False) -> str:
    """The list of checks as plain text (or a Markdown table) for ``mlenergy submit --explain``."""
    if markdown:
        lines = ["| check | group | rule | verdict |", "|---|---|---|---|"]
        lines += [
            f"| `{c.name}` | {c.group} | {c.rule.replace('|', '/')} | {c.verdict} |" for c in CHECKS
        ]
        return "\n".join(lines)
    width = max(len(c.name) for c in CHECKS)
    return "\n".join(f"{c.name:<{width}}  {c.group:<11} {c.rule}" for c in CHECKS)
