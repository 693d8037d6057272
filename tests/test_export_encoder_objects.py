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


@pytest.mark.parametrize("name", ["minilm:fp32", "minilm:int8", "minilm:int8-batched"])
def test_an_onnx_minilm_object_is_stored_as_its_variant(name):
    """An ONNX MiniLM object was stored as ``minilm``: a refit or copy of the loaded router
    built the machine's default MiniLM (bf16 on AMX CPUs, per-text int8 elsewhere), other
    vectors than the fp32 or batched int8 encoder it was configured with."""
    from recsys_router.router_state import encoder_param
    from recsys_router.encoders.state import stored_encoder_name
    enc = get_encoder(name)
    assert encoder_param(enc) == name
    rebuilt = get_encoder(stored_encoder_name(encoder_param(enc), "params.encoder"))
    assert rebuilt.identity == enc.identity and rebuilt.batch_size == enc.batch_size


def test_loading_still_takes_built_in_names_only():
    from recsys_router.encoders.state import stored_encoder_name
    from recsys_router.state import StateError
    for name in ("minilm:fp32", "minilm:int8", "minilm:int8-batched"):
        assert stored_encoder_name(name, "p") == name
    assert stored_encoder_name("onnx-minilm", "p") == "minilm"   # an older artifact's kind
    for bad in ("minilm:int9", "minilm:fp32:x", "onnx-minilm:fp32", "/tmp/model"):
        with pytest.raises(StateError, match="not a built-in encoder name"):
            stored_encoder_name(bad, "p")


def test_router_given_an_fp32_minilm_object_refits_with_fp32(tmp_path):
    """Export, load, then rebuild from the stored parameters: the same fp32 encoder."""
    import pandas as pd

    from recsys_router.data import RoutingData
    texts = ["bake bread", "prove a theorem", "write a unit test", "name a red planet"]
    data = RoutingData(pd.DataFrame({"query_id": [f"q{i}" for i in range(4)], "text": texts}),
                       ["m1", "m2"], [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    enc = get_encoder("minilm:fp32", cache=False)
    router = make_router("knn", k=1, encoder=enc).fit(data)
    export_router(router, tmp_path / "a", train_data=data)
    stored = json.loads((tmp_path / "a" / "state.json").read_text())["params"]["encoder"]
    assert stored == "minilm:fp32"
    back = load_router(tmp_path / "a").router
    assert back.get_params()["encoder"] == "minilm:fp32"
    assert get_encoder(back.get_params()["encoder"]).identity == enc.identity
    assert back.route(data).tolist() == router.route(data).tolist() == ["m1", "m2", "m1", "m2"]
