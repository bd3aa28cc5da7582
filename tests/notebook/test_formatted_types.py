"""Every type the notebook display formats exists where its entry says (moved classes fail)."""

import importlib

import pytest

from mlenergy.notebook.display import FORMATTED_TYPES


@pytest.mark.parametrize(("module", "name"), FORMATTED_TYPES)
def test_formatted_type_is_defined_in_its_module(module, name):
    cls = getattr(importlib.import_module(module), name)
    assert cls.__module__ == module  # IPython matches formatters by the defining module
