"""The Example sections of the metrics docstrings are worked cases too: run them."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest

MODULES = ["base", "routereval", "routerbench", "orbit", "rci", "routellm"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    mod = importlib.import_module(f"recsys_router.metrics.{name}")
    res = doctest.testmod(mod, extraglobs={"np": np}, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0
