"""The toy study's report links to the measured study only when that report exists."""

from __future__ import annotations

from mlenergy.studies import report
from mlenergy.studies.report_page import StudyReport


def _report(report_dir) -> StudyReport:
    return StudyReport(
        title="t",
        notes=[],
        meta="meta",
        link=report.measured_link(report_dir),
        sections=[("t", "id", ["a"], [["1"]])],
        conclusion=["p"],
        missing_link=report.MEASURED_MISSING,
    )


def test_no_link_to_a_missing_report_but_the_command_that_makes_it(tmp_path):
    toy = tmp_path / "reports" / "dense-vs-moe"
    toy.mkdir(parents=True)
    assert not report.measured_report_exists(toy)
    page = _report(toy).html([])
    assert "measured-link" not in page and "dense-vs-moe-measured" not in page
    assert report.MEASURED_REPORT_COMMAND in page
    md = _report(toy).markdown()
    assert "../dense-vs-moe-measured" not in md and report.MEASURED_REPORT_COMMAND in md


def test_link_once_the_measured_report_exists(tmp_path):
    toy = tmp_path / "reports" / "dense-vs-moe"
    measured = tmp_path / "reports" / "dense-vs-moe-measured"
    measured.mkdir(parents=True)
    (measured / "index.html").write_text("<html></html>")
    assert report.measured_report_exists(toy)
    assert f"href='{report.MEASURED_REPORT_LINK}'" in _report(toy).html([])
    # The relative link resolves to the file that exists.
    assert (toy / report.MEASURED_REPORT_LINK).resolve() == (measured / "index.html").resolve()
