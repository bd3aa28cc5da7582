"""The toy study's report links to the measured study only when that report exists."""

from __future__ import annotations

from mlenergy.studies import report


def _body(measured: bool) -> str:
    return "\n".join(report._page_body("note", "meta", [("t", "id", ["a"], [])], ["p"], measured))


def test_no_link_to_a_missing_report_but_the_command_that_makes_it(tmp_path):
    toy = tmp_path / "reports" / "dense-vs-moe"
    toy.mkdir(parents=True)
    assert not report.measured_report_exists(toy)
    body = _body(report.measured_report_exists(toy))
    assert "measured-link" not in body and "href=" not in body
    assert report.MEASURED_REPORT_COMMAND in body
    md = report._summary_md("note", "meta", [("t", "id", ["a"], [["1"]])], ["p"], False)
    assert "../dense-vs-moe-measured" not in md and report.MEASURED_REPORT_COMMAND in md


def test_link_once_the_measured_report_exists(tmp_path):
    toy = tmp_path / "reports" / "dense-vs-moe"
    measured = tmp_path / "reports" / "dense-vs-moe-measured"
    measured.mkdir(parents=True)
    (measured / "index.html").write_text("<html></html>")
    assert report.measured_report_exists(toy)
    body = _body(True)
    assert f"href='{report.MEASURED_REPORT_LINK}'" in body
    # The relative link resolves to the file that exists.
    assert (toy / report.MEASURED_REPORT_LINK).resolve() == (measured / "index.html").resolve()
