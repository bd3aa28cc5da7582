"""docs/records.md holds exactly what `mlenergy schema fields` prints."""

from pathlib import Path

from mlenergy.records.fields import docstring_attributes, field_tables
from mlenergy.records.run import RunRecord

DOC = Path(__file__).resolve().parents[2] / "docs" / "records.md"


def test_the_documented_fields_are_the_codes():
    text = DOC.read_text(encoding="utf-8")
    body = text.split("<!-- fields:start -->\n", 1)[1].split("<!-- fields:end -->", 1)[0]
    assert body.strip() == field_tables().strip(), "run: mlenergy schema fields (into docs)"


def test_every_run_record_field_has_a_meaning():
    described = docstring_attributes(RunRecord)
    assert set(RunRecord.model_fields) <= set(described)
