"""A text router predicts with the encoder fixed at ``fit``: ``set_params(encoder=...)`` (or
other encoder options) afterwards changes no prediction until the next ``fit``, and an
export made then holds the encoder the router predicts with.

The embedding baselines (knn, prknn, c-roberta, svm, linearr, mlpr, mlc) rebuilt a stateless
encoder from the ``encoder`` parameter at every prediction: after ``set_params`` they
embedded test queries with the new encoder against state learned from the old one
(silently other scores at the same width, an error at another width), and an export after
``set_params(encoder="tfidf")`` failed on an unfitted tfidf encoder. The contract check
``RouterContract.test_encoder_fixed_at_fit`` covers every text router; these tests add the
next fit and the export.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.encoders import HashingEncoder
from recsys_router.export import export_router, load_router
from recsys_router.registry import make_router

torch.set_num_threads(1)

#: the baselines that embed query text through ``TextEmbeddingMixin``
EMBEDDING_BASELINES = {"knn": {"k": 3}, "prknn": {}, "c-roberta": {"n_init": 2}, "svm": {},
                       "linearr": {}, "mlpr": {"epochs": 5}, "mlc": {}}


@pytest.fixture(scope="module")
def split():
    d = make_synthetic(90, 3, 2, seed=0)
    idx = np.random.default_rng(0).permutation(d.n_queries)
    return d.subset(np.sort(idx[:60])), d.subset(np.sort(idx[60:]))


def _words_only() -> HashingEncoder:
    """As wide as the default hashing encoder (512), hashing words alone."""
    return HashingEncoder(512, word_ngrams=(1, 1), char_ngrams=None, word_weight=1.0)


@pytest.mark.parametrize("name", sorted(EMBEDDING_BASELINES))
def test_encoder_stays_until_refit(split, name):
    train, test = split
    params = EMBEDDING_BASELINES[name]
    other = _words_only()
    texts = list(test.texts)
    assert not np.allclose(other.encode(texts), HashingEncoder(512).encode(texts))
    r = make_router(name, **params).fit(train)             # the default: "hashing"
    before = r.predict_scores(test)
    # a second router fitted with the same settings: what the fitted one must keep predicting
    np.testing.assert_array_equal(before, make_router(name, **params).fit(train).predict_scores(test))
    r.set_params(encoder=other)
    assert r.get_params()["encoder"] is other
    np.testing.assert_array_equal(r.predict_scores(test), before)
    r.set_params(encoder="hashing:x")                      # not even a valid name: unread
    np.testing.assert_array_equal(r.predict_scores(test), before)
    # the next fit takes the encoder set
    r.set_params(encoder=other).fit(train)
    assert r.encoder_ is other
    np.testing.assert_array_equal(
        r.predict_scores(test), make_router(name, encoder=other, **params).fit(train).predict_scores(test))


@pytest.mark.parametrize("name", ["knn", "linearr"])
def test_export_after_set_params_holds_the_fitted_encoder(split, tmp_path, name):
    train, test = split
    r = make_router(name, **EMBEDDING_BASELINES[name]).fit(train)
    before, choice = r.predict_scores(test), r.route(test).tolist()
    r.set_params(encoder="tfidf")                          # the next fit's, unfitted now
    out = export_router(r, tmp_path / name, train_data=train)
    man = json.loads((out / "manifest.json").read_text())
    assert man["router_params"]["encoder"] == "hashing"    # the parameters as fitted
    assert man["encoder"] == {"identity": HashingEncoder(512).identity, "dim": 512}
    back = load_router(out).router
    assert back.encoder == "hashing" and back.encoder_.identity == HashingEncoder(512).identity
    np.testing.assert_array_equal(back.predict_scores(test), before)
    assert back.route(test).tolist() == choice


def test_lightning_encoder_options_stay_until_refit(split):
    train, test = split
    r = make_router("mf", encoder_options={"dim": 16}, max_epochs=1, dim=4).fit(train)
    before = r.predict_scores(test)
    r.set_params(encoder_options={"dim": 24}, encoder="tfidf")
    np.testing.assert_array_equal(r.predict_scores(test), before)
    assert r.encoder_.dim == 16 and r.get_params()["encoder_options"] == {"dim": 24}
    r.set_params(encoder="hashing").fit(train)
    assert r.encoder_.dim == 24 and r.predict_scores(test).shape == test.shape


def test_implicit_encoder_kwargs_stay_until_refit(split):
    train, test = split
    r = make_router("als", encoder_kwargs={"dim": 16}).fit(train)
    before = r.predict_scores(test)
    r.set_params(encoder_kwargs={"dim": 24}, encoder=_words_only())
    np.testing.assert_array_equal(r.predict_scores(test), before)
    r.set_params(encoder="hashing").fit(train)
    assert r.encoder_.dim == 24
