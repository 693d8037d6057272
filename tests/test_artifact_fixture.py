"""Format stability: the committed format-2 artifact keeps loading to the same results."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from recsys_router.export import ArtifactError, FORMAT_VERSION, load_router

FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import make_artifact_fixture as maker  # noqa: E402


def _results(art, texts):
    res = art.route(texts)
    return [r["llm"] for r in res], [[r["scores"][n] for n in sorted(r["scores"])] for r in res]


def test_committed_artifact_loads_to_recorded_results():
    expected = json.loads((FIXTURES / "artifact_v2.expected.json").read_text())
    art = load_router(FIXTURES / "artifact_v2", sign_key=maker.KEY)
    assert art.manifest["format_version"] == FORMAT_VERSION == 2
    assert art.default_policy == ("wtp", 100.0)
    llms, scores = _results(art, expected["texts"])
    assert llms == expected["llms"]
    np.testing.assert_allclose(scores, expected["scores"], rtol=1e-12, atol=1e-12)
    with pytest.raises(ArtifactError, match="signature mismatch"):
        load_router(FIXTURES / "artifact_v2", sign_key="not the key")


def test_script_still_makes_the_same_artifact(tmp_path):
    art, expected = maker.make(tmp_path, seed=0)
    committed = json.loads((FIXTURES / "artifact_v2.expected.json").read_text())
    assert expected["llms"] == committed["llms"]
    np.testing.assert_allclose(expected["scores"], committed["scores"], rtol=1e-12, atol=1e-12)
    fresh = json.loads((art / "manifest.json").read_text())
    old = json.loads((FIXTURES / "artifact_v2" / "manifest.json").read_text())
    for key in ("format_version", "router_class", "arrays"):
        assert fresh[key] == old[key], key
    # hyperparameters added since the fixture was made appear at their defaults, and the
    # committed artifact (without them) loads with those values
    assert _without_added(fresh["router_params"]) == old["router_params"]
    fresh_state = json.loads((art / "state.json").read_text())
    old_state = json.loads((FIXTURES / "artifact_v2" / "state.json").read_text())
    fresh_state["params"] = _without_added(fresh_state["params"])
    assert fresh_state == old_state
    loaded = load_router(FIXTURES / "artifact_v2", sign_key=maker.KEY).router
    assert {k: getattr(loaded, k) for k in ADDED_SINCE} == ADDED_SINCE


#: hyperparameters the fixture's router (LinearR) gained after the fixture was committed, with
#: their defaults
ADDED_SINCE = {"loss": "squared"}


def _without_added(params: dict) -> dict:
    for k, default in ADDED_SINCE.items():
        assert params.get(k, default) == default, (k, params.get(k))
    return {k: v for k, v in params.items() if k not in ADDED_SINCE}
