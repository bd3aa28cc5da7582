"""The serving extra installs on its own, and ``make install``/``make demo`` environments get it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _extras() -> dict[str, list[str]]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]


def test_the_serve_extra_brings_transformers_serve():
    extras = _extras()
    assert any(req.startswith("transformers[serving]") for req in extras["serve"])
    assert "mlenergy-lab[serve]" in extras["dev"]  # the serving tests drive the same server


def test_the_makefiles_install_includes_the_serve_extra():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("$(VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    installs = re.findall(r"pip install -q -e '?\.\[([a-z,]+)\]", recipe)
    assert any("serve" in extras.split(",") for extras in installs), recipe
    assert "demo: $(VENV)/.installed" in makefile  # make demo runs on that install
