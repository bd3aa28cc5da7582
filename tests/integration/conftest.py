"""Fixtures of the integration tests: the importers' writer files and the study's quality rows.

The importer fixtures (``tests/importers/importer_fixtures.py``) and the measured study's
fixture (``tests/studies/measured_fixture.py``) are plain modules of their own test folders;
their folders are put on ``sys.path`` so that these tests read exactly the same files.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

TESTS = Path(__file__).resolve().parent.parent
for folder in (TESTS / "importers", TESTS / "studies"):
    if str(folder) not in sys.path:
        sys.path.append(str(folder))
