"""Artifacts: round trip to identical decisions, tamper/incomplete refusal, atomic writes,
calibration, pickle-free weights."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from recsys_router.export import (ArtifactError, calibrate_policy, candidate_values,
                                  export_router, load_router, set_default_policy)
from recsys_router.state.nets import load_module_arrays, module_arrays
from recsys_router.registry import register_router
from recsys_router.router import Router
from recsys_router.state import INT, STR, Arr, ListOf, Part


class _MeanRouter(Router):
    """Predicts each LLM's train mean, shifted per task (numpy state only)."""

    _state_ = {"means_": Arr("float64", ("n_llms",)), "tasks_": ListOf(STR, dim="n_tasks"),
               "task_means_": Arr("float64", ("n_tasks", "n_llms"))}

    def __init__(self, shrink: float = 0.0):
        self.shrink = shrink

    def _fit(self, train, val):
        self.means_ = np.nanmean(train.scores, axis=0) * (1 - self.shrink)
        self.tasks_ = sorted(set(train.tasks))
        self.task_means_ = np.stack([np.nanmean(train.scores[train.tasks == t], axis=0)
                                     for t in self.tasks_])

    def _predict_scores(self, data):
        index = {t: i for i, t in enumerate(self.tasks_)}
        return np.stack([self.task_means_[index[t]] if t in index else self.means_
                         for t in data.tasks])


class _NetRouter(Router):
    """Holds a torch network (sizes from a hyperparameter, weights as declared arrays)."""

    _state_ = {"n_in_": INT, "net_": Part()}

    def __init__(self, seed: int = 0, hidden: int = 4):
        self.seed = seed
        self.hidden = hidden

    def _features(self, data):
        return np.stack([[len(t or "") % 7, len(t or "")] for t in data.texts]).astype(np.float32)

    def _build(self, n_llms):
        return torch.nn.Sequential(torch.nn.Linear(2, self.hidden), torch.nn.Tanh(),
                                   torch.nn.Linear(self.hidden, n_llms))

    def _fit(self, train, val):
        torch.manual_seed(self.seed)
        self.n_in_ = 2
        self.net_ = self._build(train.n_llms)

    def _predict_scores(self, data):
        with torch.no_grad():
            return self.net_(torch.from_numpy(self._features(data))).numpy()

    def _get_state(self):
        fields, arrays = super()._get_state()
        fields["net_"] = {}
        arrays.update({f"net_/{k}": v for k, v in module_arrays(self.net_).items()})
        return fields, arrays

    @classmethod
    def _from_state(cls, params, fields, arrays):
        router = super()._from_state(params, fields, arrays)
        router.net_ = load_module_arrays(lambda: router._build(len(router.llm_names_)),
                                         {k[5:]: v for k, v in arrays.items()
                                          if k.startswith("net_/")}, "net_")
        return router


register_router("test-mean", f"{__name__}:_MeanRouter", overwrite=True)
register_router("test-net", f"{__name__}:_NetRouter", overwrite=True)


@pytest.mark.parametrize("cls", [_MeanRouter, _NetRouter])
def test_round_trip_identical_decisions(tmp_path, sim_split, cls):
    tr, te = sim_split["train"], sim_split["test"]
    r = cls().fit(tr)
    out = export_router(r, tmp_path / "art", train_data=tr, metrics={"mu_o": 0.5})
    loaded = load_router(out)
    for kw in ({}, {"wtp": 1000.0}, {"budget": float(np.median(tr.costs))}):
        np.testing.assert_array_equal(loaded.router.route(te, **kw), r.route(te, **kw))
    np.testing.assert_allclose(loaded.router.predict_scores(te), r.predict_scores(te))
    man = json.loads((out / "manifest.json").read_text())
    assert man["format_version"] == 2 and man["metrics"] == {"mu_o": 0.5}
    assert [x["name"] for x in man["llms"]] == tr.llm_names
    assert man["training_data"]["n_queries"] == tr.n_queries
    # weights load without pickle
    with np.load(out / "weights.npz", allow_pickle=False) as npz:
        assert len(npz.files) > 0


def test_route_texts_returns_all_candidates(tmp_path, sim_split):
    tr = sim_split["train"]
    r = _MeanRouter().fit(tr)
    loaded = load_router(export_router(r, tmp_path / "a", train_data=tr))
    res = loaded.route(["alpha beta", "gamma"], candidates=tr.llm_names[:2])
    assert len(res) == 2 and res[0]["policy"] == "argmax"
    assert set(res[0]["scores"]) == set(tr.llm_names[:2])
    best = max(tr.llm_names[:2], key=lambda n: res[0]["scores"][n])
    assert res[0]["llm"] == best


def test_tampered_and_incomplete_refused(tmp_path, sim_split):
    tr = sim_split["train"]
    out = export_router(_MeanRouter().fit(tr), tmp_path / "a", train_data=tr)
    with open(out / "weights.npz", "ab") as fh:
        fh.write(b"x")
    with pytest.raises(ArtifactError, match="checksum mismatch"):
        load_router(out)
    out2 = export_router(_MeanRouter().fit(tr), tmp_path / "b", train_data=tr)
    (out2 / "state.json").unlink()
    with pytest.raises(ArtifactError, match="state.json is missing"):
        load_router(out2)
    man = json.loads((out2 / "manifest.json").read_text())
    man["format_version"] = 99
    (out2 / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ArtifactError, match="format_version 99"):
        load_router(out2)


def test_unregistered_class_and_format_1_refused(tmp_path, sim_split):
    tr = sim_split["train"]
    out = export_router(_MeanRouter().fit(tr), tmp_path / "a", train_data=tr)
    man = json.loads((out / "manifest.json").read_text())
    man["router_class"] = "recsys_router.export.artifact:os.system"
    (out / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ArtifactError, match="not a registered router class"):
        load_router(out)
    man["format_version"] = 1
    (out / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ArtifactError, match="format 1 .* re-export it"):
        load_router(out)


def test_export_is_atomic(tmp_path, sim_split, monkeypatch):
    tr = sim_split["train"]
    r = _MeanRouter().fit(tr)
    import recsys_router.export.artifact as art

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(art.np, "savez", boom)
    with pytest.raises(OSError):
        export_router(r, tmp_path / "x", train_data=tr)
    assert list(tmp_path.iterdir()) == []  # nothing half-written, temp folder removed


def test_unfitted_and_existing(tmp_path, sim_split):
    with pytest.raises(ArtifactError, match="unfitted"):
        export_router(_MeanRouter(), tmp_path / "a")
    tr = sim_split["train"]
    export_router(_MeanRouter().fit(tr), tmp_path / "a", train_data=tr)
    with pytest.raises(ArtifactError, match="already exists"):
        export_router(_MeanRouter().fit(tr), tmp_path / "a", train_data=tr)
    export_router(_MeanRouter(0.5).fit(tr), tmp_path / "a", train_data=tr, overwrite=True)
    assert load_router(tmp_path / "a").router.shrink == 0.5


def test_calibrate_budget_and_share_by_hand():
    # 4 queries, 2 LLMs: cheap (cost 1, score .2) and dear (cost 10, score .9)
    s = np.array([[0.2, 0.9]] * 4)
    c = np.array([[1.0, 10.0]] * 4)
    r = calibrate_policy(s, c, policy="budget", target_cost=1.0)
    assert r["achieved"] == 1.0 and r["value"] == 1.0
    # wtp: dear wins when 0.9 L - 10 > 0.2 L - 1  <=>  L > 9/0.7 = 12.857...
    r = calibrate_policy(s, c, policy="wtp", target_share=(1, 1.0))
    assert r["achieved"] == 1.0 and r["value"] > 9 / 0.7
    r = calibrate_policy(s, c, policy="wtp", target_share=(1, 0.0))
    assert r["achieved"] == 0.0 and r["value"] < 9 / 0.7


def test_calibrate_mixed_share():
    # per-query different breakpoints: share of LLM 1 can be tuned to 50%
    s = np.array([[0.2, 0.9], [0.2, 0.3], [0.5, 0.6], [0.1, 0.95]])
    c = np.array([[1.0, 2.0]] * 4)
    r = calibrate_policy(s, c, policy="wtp", target_share=(1, 0.5))
    assert r["achieved"] == 0.5


def test_set_default_policy(tmp_path, sim_split):
    tr = sim_split["train"]
    out = export_router(_MeanRouter().fit(tr), tmp_path / "a", train_data=tr)
    set_default_policy(out, "budget", 0.001)
    loaded = load_router(out)
    assert loaded.default_policy == ("budget", 0.001)
    assert loaded.route(["x"])[0]["policy"] == "budget"
    with pytest.raises(ArtifactError, match="needs a finite value"):
        set_default_policy(out, "wtp", None)


def test_text_decisions_do_not_depend_on_the_batch(tmp_path, sim_split):
    from recsys_router.registry import make_router
    tr = sim_split["train"]
    art = load_router(export_router(make_router("random", seed=3).fit(tr), tmp_path / "r",
                                    train_data=tr))
    texts = [f"text {i}" for i in range(30)]
    whole = [r["llm"] for r in art.route(texts)]
    assert whole == [art.route([t])[0]["llm"] for t in texts]
    assert [r["llm"] for r in art.route(texts[::-1])] == whole[::-1]
    assert len(set(whole)) > 1  # the seeded draw really varies per text


def test_encoder_states_rebuild_identical_encoders(tmp_path):
    """Every built-in encoder kind declares its state; rebuilt ones encode identically, and
    nothing is read from a path or model name found in the state."""
    from recsys_router.encoders import HashingEncoder, PrecomputedEncoder, TfidfEncoder
    from recsys_router.encoders.neural import MINILM_NAME, SentenceTransformerEncoder
    from recsys_router.encoders.state import encoder_from_state, encoder_state
    from recsys_router.state import StateError
    texts = ["red apple pie", "green apple", "blue sky today", "a sky of apples"]
    npy = tmp_path / "e.npy"
    np.save(npy, np.arange(8, dtype=np.float32).reshape(4, 2))
    (tmp_path / "e.ids.txt").write_text("q0\nq1\nq2\nq3\n")
    for enc in (HashingEncoder(dim=16), TfidfEncoder(dim=3).fit(texts), PrecomputedEncoder(npy)):
        info, arrays = encoder_state(enc)
        json.dumps(info)
        assert all(a.dtype != object for a in arrays.values())
        back = encoder_from_state(info, arrays, "enc")
        # a precomputed file's identity is stored without its path (the table's digest)
        stored = enc.stored_identity() if isinstance(enc, PrecomputedEncoder) else enc.identity
        assert back.identity == stored and back.dim == enc.dim
        ids = ["q2", "q0"]
        np.testing.assert_array_equal(back.encode(texts[:2], ids), enc.encode(texts[:2], ids))
    npy.unlink()  # the precomputed table lives in the state, not in the file
    assert back.encode(["", ""], ["q3", "q1"]).tolist() == [[6.0, 7.0], [2.0, 3.0]]
    st = SentenceTransformerEncoder("minilm")
    st_info, arrays = encoder_state(st)
    assert st_info["model_name"] == MINILM_NAME and arrays == {}
    assert encoder_from_state(st_info, arrays, "enc").identity == st.identity  # not loaded
    from recsys_router.encoders import OnnxMiniLMEncoder
    onnx = OnnxMiniLMEncoder("fp32", max_seq_length=128, cache=False)
    info, arrays = encoder_state(onnx)
    assert (info["kind"], info["variant"], arrays) == ("onnx-minilm", "fp32", {})
    assert encoder_from_state(info, arrays, "enc").identity == onnx.identity  # nothing loaded
    with pytest.raises(StateError, match="variant"):
        encoder_from_state({**info, "variant": "../../evil"}, {}, "enc")
    with pytest.raises(StateError, match="packaged MiniLM"):
        encoder_state(SentenceTransformerEncoder(str(tmp_path)))
    with pytest.raises(StateError, match="packaged MiniLM"):
        encoder_from_state({**st_info, "model_name": str(tmp_path)}, {}, "enc")


def test_arrays_read_from_an_archive_in_memory_own_their_memory(tmp_path):
    """An archive given as bytes (how load_router reads weights.npz, once) yields arrays that
    are writable copies, not views that would keep the whole archive alive, equal to numpy's
    own reading of the file, in C and Fortran order."""
    import numpy as np
    from recsys_router.export.safe_io import NpzReader
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    f = np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3))
    path = tmp_path / "w.npz"
    np.savez(path, a=a, f=f)
    raw = path.read_bytes()
    with NpzReader(path, data=raw) as z:
        got = {n: z.read(n, 1 << 20) for n in ("a", "f")}
    with np.load(path) as ref:
        for n, arr in got.items():
            np.testing.assert_array_equal(arr, ref[n])
            assert arr.flags.writeable and arr.flags.c_contiguous and arr.base is None
            assert not np.shares_memory(arr, np.frombuffer(raw, np.uint8))


def _old_wtp_candidates(s, c, max_values=400):
    """candidate_values(..., "wtp") as it was: every ordered pair of every row at once."""
    dp = s[:, :, None] - s[:, None, :]
    dc = c[:, :, None] - c[:, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = dc / dp
    lam = lam[np.isfinite(lam) & (lam > 0)]
    brk = np.unique(np.concatenate([[0.0], lam]))
    top = brk.max() * 2 if brk.max() > 0 else 1.0
    vals = np.concatenate([[0.0], (brk[1:] + brk[:-1]) / 2, [top]])
    if len(vals) > max_values:
        vals = np.unique(np.quantile(vals, np.linspace(0, 1, max_values)))
    return vals


@pytest.mark.parametrize("seed", range(6))
def test_wtp_candidate_values_are_the_all_pairs_set(seed, monkeypatch):
    import recsys_router.export.calibrate as cal  # noqa: PLC0415
    monkeypatch.setattr(cal, "_PAIR_CHUNK_CELLS", 7, raising=False)          # many row blocks
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 30)), int(rng.integers(1, 7))
    s = np.round(rng.random((n, m)), 1)                         # ties in score and cost
    c = np.round(rng.random((n, m)), 1)
    c[rng.random((n, m)) < 0.1] = np.nan
    for mv in (400, 5):
        got = candidate_values(s, c, "wtp", max_values=mv)
        assert np.array_equal(got, _old_wtp_candidates(s, c, mv)), (n, m, mv)
    f32 = candidate_values(s.astype(np.float32), c.astype(np.float32), "wtp")
    assert np.array_equal(f32, _old_wtp_candidates(s.astype(np.float32), c.astype(np.float32)))


def test_wtp_candidate_values_by_hand_and_without_n_x_m_x_m_memory(monkeypatch):
    import tracemalloc  # noqa: PLC0415

    import recsys_router.export.calibrate as cal  # noqa: PLC0415
    # one row, scores (0, 0.5, 1), costs (0, 1, 4): breakpoints 1/0.5 = 2, 4/1 = 4, 3/0.5 = 6
    # -> candidates 0, the midpoints 1, 3, 5 and twice the largest, 12
    one = candidate_values(np.array([[0.0, 0.5, 1.0]]), np.array([[0.0, 1.0, 4.0]]), "wtp")
    assert one.tolist() == [0.0, 1.0, 3.0, 5.0, 12.0]
    # 400 queries x 60 LLMs on 4 distinct rows (a router predicting per task): all pairs of
    # all rows at once took 400 x 60 x 60 float64 (11.5 MB) per temporary
    monkeypatch.setattr(cal, "_PAIR_CHUNK_CELLS", 1 << 14, raising=False)
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 4, 400)
    s, c = rng.random((4, 60))[rows], rng.random((4, 60))[rows]
    tracemalloc.start()
    try:
        got = candidate_values(s, c, "wtp")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(got, _old_wtp_candidates(s, c))
    assert peak < 400 * 60 * 60 * 8 / 4, peak
