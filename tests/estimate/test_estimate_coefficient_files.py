"""Fitted coefficients and the calibration report are two files; both load back as written."""

from __future__ import annotations

import json

import pytest

from mlenergy.estimate.calibration_report import REPORT_FIELDS, CalibrationReport
from mlenergy.estimate.coefficients import (
    Coefficients,
    default_coefficients,
    report_path,
)

V2 = "leaderboard-v2-server"


def test_the_shipped_report_sits_beside_the_coefficients():
    shipped = default_coefficients()
    from mlenergy.estimate import coefficients as module
    from mlenergy.estimate.registry import SHIPPED_DIR

    assert module.__file__.startswith(str(SHIPPED_DIR))
    physics = json.loads((SHIPPED_DIR / "coefficients.json").read_text())
    report = json.loads((SHIPPED_DIR / "coefficients.report.json").read_text())
    assert not set(physics) & set(REPORT_FIELDS)  # no calibration fact among the coefficients
    assert set(report) == set(REPORT_FIELDS)
    assert shipped.report.host_bound_rule is not None
    assert shipped.report.calibrated_gpus == ("B200", "H100-SXM5-80GB")
    for name in REPORT_FIELDS:  # every report entry reads as an attribute too
        assert getattr(shipped, name) == getattr(shipped.report, name)


def test_save_writes_both_files_and_load_reads_them_back(tmp_path):
    coef = default_coefficients()
    path = coef.save(tmp_path / "mine.json")
    assert report_path(path) == tmp_path / "mine.report.json" and report_path(path).is_file()
    saved = Coefficients.load(path)
    assert saved == coef
    assert saved.engine_overheads == coef.engine_overheads
    assert Coefficients.load(coef.save(tmp_path)) == coef  # a folder: coefficients.json inside


def test_a_coefficients_file_without_its_report_takes_no_calibration_facts(tmp_path):
    """A user's coefficients never borrow the shipped report: defaults, widened everywhere."""
    coef = default_coefficients()
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(coef.to_dict()))
    bare = Coefficients.load(path)
    assert bare.seq_s == coef.seq_s and bare.engine_overheads == coef.engine_overheads
    assert bare.report == CalibrationReport()
    assert bare.host_bound_rule is None and bare.calibrated_gpus == ()


def test_a_single_file_of_the_former_layout_still_loads(tmp_path):
    """Coefficient files written before the split (report entries and ``legacy_*`` inside)."""
    coef = default_coefficients()
    flat = {k: v for k, v in coef.to_dict().items() if k != "engine_overheads"}
    terms = coef.engine_overheads[V2]
    flat.update(
        legacy_slowdown=terms["host_slowdown"],
        legacy_worker_s=terms["worker_s"],
        legacy_moe_layer_s=terms["moe_layer_s"],
        **coef.report.to_dict(),
    )
    path = tmp_path / "old.json"
    path.write_text(json.dumps(flat))
    assert Coefficients.load(path) == coef


def test_replace_takes_report_entries_and_profile_terms():
    coef = default_coefficients()
    wider = coef.replace(log_q95=0.9, **{f"{V2}.worker_s": 0.5})
    assert wider.report.log_q95 == 0.9 and wider.log_q95 == 0.9
    assert wider.engine_overheads[V2]["worker_s"] == 0.5
    assert getattr(wider, f"{V2}.worker_s") == 0.5
    assert coef.engine_overheads[V2]["worker_s"] != 0.5  # the original is untouched
    with pytest.raises(TypeError, match="no engine overhead"):
        coef.replace(**{"no-such-engine.worker_s": 1.0})


def test_every_fitted_coefficient_is_in_the_fit_bounds():
    from mlenergy.calibrate.calibration import BOUNDS

    assert list(BOUNDS) and set(BOUNDS) == set(Coefficients.FITTED)
    assert {f"{V2}.host_slowdown", f"{V2}.worker_s", f"{V2}.moe_layer_s"} <= set(BOUNDS)
