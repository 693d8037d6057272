"""Routers given an encoder object (not a name) export like routers given its name: the
router fits a copy, stores that copy's state, and the artifact predicts what the router does.
The same holds for the ``--auto`` wrapper, whose parameters for the router it builds hold
the object."""

from __future__ import annotations

import json

import numpy as np
import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.encoders import get_encoder
from recsys_router.export import export_router, load_router
from recsys_router.registry import make_router
from recsys_router.tuning.inner import AutoTunedRouter


@pytest.fixture(scope="module")
def split():
    d = make_synthetic(90, 3, 2, seed=0)
    idx = np.random.default_rng(0).permutation(d.n_queries)
    return d.subset(idx[:60]), d.subset(idx[60:])


def _round_trip(router, train, test, out):
    export_router(router, out, train_data=train)
    back = load_router(out).router
    np.testing.assert_array_equal(back.predict_scores(test), router.predict_scores(test))
    assert back.route(test).tolist() == router.route(test).tolist()
    return json.loads((out / "manifest.json").read_text())


@pytest.mark.filterwarnings("ignore:tfidf encoder")
def test_router_given_an_unfitted_tfidf_object_exports(split, tmp_path):
    train, test = split
    enc = get_encoder("tfidf", dim=16)
    router = make_router("knn", k=3, encoder=enc).fit(train)
    assert enc.vocab_ is None  # the router fitted a copy, the object passed stays unfitted
    man = _round_trip(router, train, test, tmp_path / "knn")
    assert man["router_params"]["encoder"] == "tfidf"
    # the fitted copy's settings travel with the artifact (16 wide, not the default)
    assert load_router(tmp_path / "knn").router.encoder_.dim == 16


@pytest.mark.parametrize("enc", [lambda: get_encoder("hashing", dim=32, word_weight=0.3),
                                 lambda: get_encoder("tfidf", dim=16)],
                         ids=["hashing", "tfidf"])
@pytest.mark.filterwarnings("ignore:tfidf encoder")
def test_auto_tuned_router_with_an_encoder_object_exports(split, tmp_path, enc):
    train, test = split
    router = AutoTunedRouter("knn", make_router("knn", encoder=enc()).get_params(),
                             n_trials=2).fit(train)
    man = _round_trip(router, train, test, tmp_path / "auto")
    assert man["router_params"]["params"]["encoder"] in ("hashing", "tfidf")
