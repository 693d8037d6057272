"""The serving fast path (request RoutingData assembled without re-validation, training
rows normalised once) gives exactly the results of the fully validated path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.errors import DataValidationError
from recsys_router.export import export_router, load_router
from recsys_router.models.baselines._common import TextEmbeddingMixin
from recsys_router.models.baselines.neighbours import knn_indices
from recsys_router.registry import make_router

TEXTS = ["What is 2+2?", "Translate 'cat' into French.", "Prove that sqrt(2) is irrational.",
         "write a python function that sums a list", "ünïcödé ✓ text\twith\ttabs",
         "a" * 3000]


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fast")
    train = make_synthetic(200, 5, 3, seed=0)
    out = {}
    for name, kw in [("knn", {"k": 7, "encoder": "hashing"}),
                     ("knn-euclid", {"k": 3, "encoder": "hashing", "metric": "euclidean"}),
                     ("linearr", {"encoder": "hashing"})]:
        router = make_router(name.split("-")[0], **kw).fit(train)
        out[name] = load_router(export_router(router, tmp / name))
    return out


@pytest.mark.parametrize("name", ["knn", "knn-euclid", "linearr"])
def test_fast_and_validated_paths_route_identically(artifacts, name):
    art = artifacts[name]
    slow = art.route(art.to_data(TEXTS, validate=True))
    fast = art.route(TEXTS)
    assert fast == slow  # same llm, policy and every score/cost, bit for bit
    for t in TEXTS:  # one text alone, as a served request
        assert art.route([t]) == art.route(art.to_data([t], validate=True))
    s_fast, _, _ = art.predict(TEXTS)
    s_slow, _, _ = art.predict(art.to_data(TEXTS, validate=True))
    np.testing.assert_array_equal(s_fast, s_slow)


def test_fast_request_tables_equal_validated_ones(artifacts):
    art = artifacts["knn"]
    fast, slow = art.to_data(TEXTS), art.to_data(TEXTS, validate=True)
    pd.testing.assert_frame_equal(fast.queries, slow.queries)
    pd.testing.assert_frame_equal(fast.llms, slow.llms)
    assert fast.scores.dtype == slow.scores.dtype == np.float32
    assert np.isnan(fast.scores).all() and fast.scores.shape == slow.scores.shape
    assert fast.costs is None and slow.costs is None
    assert fast.query_ids == slow.query_ids and list(fast.texts) == list(slow.texts)
    fast.llms["name"] = "mutated"  # a request's table is its own: the next one is clean
    assert list(art.to_data(["x"]).llm_names) == art.llm_names


def test_cached_unit_rows_match_a_plain_cosine_ranking():
    rng = np.random.default_rng(0)
    xt, xq = rng.normal(size=(40, 6)), rng.normal(size=(5, 6))
    unit = xt / np.linalg.norm(xt, axis=1, keepdims=True)
    got = knn_indices(xq, xt, 4, "cosine", train_prepared=unit)
    np.testing.assert_array_equal(got, knn_indices(xq, xt, 4, "cosine"))
    for i in range(5):  # independent: largest cosine similarity first, by a plain loop
        sims = [float(xq[i] @ xt[j]) / (np.linalg.norm(xq[i]) * np.linalg.norm(xt[j]))
                for j in range(40)]
        assert got[i].tolist() == sorted(range(40), key=lambda j: -sims[j])[:4]


def test_refit_drops_the_cached_unit_rows():
    a = make_synthetic(120, 4, 2, seed=1)
    b = make_synthetic(120, 4, 2, seed=2)
    r = make_router("knn", k=5, encoder="hashing").fit(a)
    r.predict_scores(b)
    r.fit(b)
    fresh = make_router("knn", k=5, encoder="hashing").fit(b)
    np.testing.assert_array_equal(r.predict_scores(a), fresh.predict_scores(a))


@pytest.mark.parametrize("bad", ["", "   ", "\n\t"])
def test_hostile_texts_get_clean_errors(artifacts, bad):
    art = artifacts["knn"]
    with pytest.raises(DataValidationError, match="no text"):
        art.route([bad])
    with pytest.raises(DataValidationError, match="no text"):
        art.route(art.to_data([bad], validate=True))
    assert art.route(["fine"])[0]["llm"] in art.llm_names  # the next request is unaffected
    with pytest.raises(ValueError, match="no queries"):
        art.route([])


@pytest.mark.parametrize("queries,match", [
    ("hello", r"queries: expected a list of texts, got one str"),    # routed each character
    ("hello world", r"got one str; pass \["),                         # 'row 0 has no text': the space
    ([None], r"queries\[0\]: expected a text \(str\), got NoneType"),  # routed the text 'None'
    (["ok", 1.5], r"queries\[1\]: expected a text \(str\), got float '1.5'"),
    (np.array([["a", "b"]]), r"one text per query, got an array of shape \(1, 2\)"),
    (7, r"expected a list of texts, got int"),
])
def test_route_refuses_a_single_string_or_entries_that_are_not_texts(artifacts, queries, match):
    art = artifacts["knn"]
    for call in (lambda: art.route(queries), lambda: art.predict(queries),
                 lambda: art.route(queries, tasks=[None] * 2)):
        with pytest.raises(ValueError, match=match):
            call()
    assert [r["llm"] for r in art.route(("hello", np.str_("hello")))] == [art.route(["hello"])[0]["llm"]] * 2


@pytest.mark.parametrize("n", [4, 100])  # the small (Python) and large (pandas) checks agree
def test_missing_text_check_names_the_same_row_either_way(n):
    texts = ["ok"] * n
    texts[2] = "  "
    texts[3] = None
    data = RoutingData(pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "text": texts}),
                       ["a"], np.zeros((n, 1)))
    with pytest.raises(DataValidationError, match=r"query 'q2' has no text \(2 such"):
        TextEmbeddingMixin._check_text(data)


def test_request_llm_table_follows_a_swapped_pool(artifacts):
    """A copied artifact with another router (the service's pool swap) gets its own LLMs."""
    import copy
    art = artifacts["knn"]
    art.to_data(["warm the cached LLM table"])
    snap = copy.copy(art)
    snap.router = make_router("knn", k=3, encoder="hashing").fit(make_synthetic(60, 7, 2, seed=4))
    data = snap.to_data(["which LLM?"])
    assert data.llm_names == snap.llm_names and len(data.llm_names) == 7
    assert snap.route(["which LLM?"]) == snap.route(snap.to_data(["which LLM?"], validate=True))
    assert art.to_data(["x"]).llm_names == art.llm_names  # the original is untouched
