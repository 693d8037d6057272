"""RoutingDataModule / PreferenceDataModule: sizes, splits, batch layouts, features, errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from recsys_router.datamodules import (N_LLM_NUMERIC_FEATURES, PreferenceDataModule, RoutingDataModule,
                         battles_from_scores, llm_feature_matrix, read_battles)
from recsys_router.datamodules._datasets import score_pairs
from recsys_router.data import RoutingData
from recsys_router.encoders import get_encoder
from recsys_router.errors import DataValidationError

torch.set_num_threads(1)
SMALL = {"dataset_options": {"n_queries": 120, "n_llms": 4, "n_topics": 3, "seed": 3},
         "encoder_options": {"dim": 16}, "batch_size": 16}


def _tiny() -> RoutingData:
    q = pd.DataFrame({"query_id": ["a", "b", "c"], "text": ["x y", "y z", "z x"],
                      "task": ["t1", "t2", "t1"]})
    return RoutingData(q, ["m0", "m1", "m2"],
                       [[1.0, 0.0, np.nan], [0.5, 0.5, 0.9], [0.0, 1.0, 1.0]],
                       [[0.1, 0.2, np.nan], [0.1, 0.2, 0.3], [0.1, 0.2, 0.3]])


def test_sizes_are_known_right_after_construction():
    dm = RoutingDataModule("synthetic", **SMALL)
    assert (dm.n_llms, dm.embed_dim, dm.llm_feature_dim) == (4, 16, 16 + N_LLM_NUMERIC_FEATURES)
    assert dm.llm_features.shape == (4, 20)
    assert sorted(dm.splits) == ["test", "train", "val"]
    assert sum(s.n_queries for s in dm.splits.values()) == 120
    assert (dm.splits["train"].n_queries, dm.splits["val"].n_queries) == (96, 12)


def test_batch_layouts_per_mode():
    tiny = _tiny()
    dm = RoutingDataModule.from_splits({"train": tiny, "val": tiny}, mode="pointwise",
                                       encoder_options={"dim": 8}, batch_size=100)
    cells = next(iter(dm.train_dataloader()))
    assert sorted(cells) == ["llm", "row", "x", "y"]
    assert len(cells["y"]) == 8                      # 8 observed cells
    got = sorted(zip(cells["row"].tolist(), cells["llm"].tolist(), cells["y"].tolist()))
    assert got[:3] == [(0, 0, 1.0), (0, 1, 0.0), (1, 0, 0.5)]
    np.testing.assert_allclose(cells["x"].numpy(), dm.embeddings("train")[cells["row"].numpy()])

    dm.mode = "listwise"
    lists = next(iter(dm.train_dataloader()))
    order = lists["index"].argsort()                 # training batches are shuffled
    assert lists["y"].shape == (3, 3) and lists["mask"][order].tolist()[0] == [True, True, False]
    # selection vectors (continuous scores: >= 0.95 * best)
    assert lists["sel"][order].tolist() == [[1, 0, 0], [0, 0, 1], [0, 1, 1]]
    assert lists["cost"][order][0].tolist() == pytest.approx([0.1, 0.2, 0.0])

    dm.mode = "pairwise"
    pairs = next(iter(dm.train_dataloader()))
    trip = sorted(zip(pairs["row"].tolist(), pairs["pos"].tolist(), pairs["neg"].tolist()))
    assert trip == [(0, 0, 1), (1, 2, 0), (1, 2, 1), (2, 1, 0), (2, 2, 0)]
    val = next(iter(dm.val_dataloader()))
    assert "mask" in val                              # evaluation batches are always listwise


def test_score_pairs_subsampling_is_seeded():
    s = np.array([[0.0, 0.1, 0.2, 0.3]])
    r1 = score_pairs(s, 3, seed=5)
    assert len(r1[0]) == 3 and all((a > b) for a, b in zip(s[0][r1[1]], s[0][r1[2]]))
    np.testing.assert_array_equal(r1[1], score_pairs(s, 3, seed=5)[1])


def test_splits_column_ood_candidates_and_carving():
    d = _tiny()
    q = d.queries.copy()
    q["split"] = ["train", "train", "test"]
    col = RoutingData(q, d.llms, d.scores, d.costs)
    dm = RoutingDataModule.from_splits({"train": col.subset([0, 1]), "test": col.subset([2])},
                                       encoder_options={"dim": 8}, split_ratios=(0.5, 0.5, 0.0))
    assert dm.splits["val"].n_queries == 1 and dm.splits["train"].n_queries == 1
    dm2 = RoutingDataModule.from_splits({"train": d}, carve_val=False, candidates=["m2", "m0"],
                                        encoder_options={"dim": 8})
    assert "val" not in dm2.splits and dm2.llm_names == ["m2", "m0"] and dm2.val_dataloader() == []
    from recsys_router.pools import candidate_groups
    many = dict(SMALL, dataset_options={"n_queries": 120, "n_llms": 12, "seed": 3})
    grouped = RoutingDataModule("synthetic", candidate_group="all-weak", pool_size=3, **many)
    expect = candidate_groups(RoutingDataModule("synthetic", **many).splits["train"], 3,
                              seed=0, groups=["all-weak"])["all-weak"]
    assert grouped.llm_names == expect and grouped.n_llms == 3
    assert grouped.splits["test"].llm_names == expect
    train = RoutingDataModule("synthetic", **many).splits["train"]
    ways = {meth: candidate_groups(train, 3, seed=0, method=meth, groups=["all-strong"])
            ["all-strong"] for meth in ("routereval", "oracle-best")}
    assert ways["routereval"] != ways["oracle-best"]   # here: two LLMs tie, in either order
    for meth, want in ways.items():
        dm = RoutingDataModule("synthetic", candidate_group="all-strong", pool_size=3,
                               group_method=meth, **many)
        assert dm.llm_names == want
    with pytest.raises(ValueError, match="group_method must be one of"):
        RoutingDataModule("synthetic", group_method="best")
    ood = RoutingDataModule("synthetic", ood_tasks=["topic_0"], **SMALL)
    assert set(ood.splits["test"].tasks) == {"topic_0"}
    assert "topic_0" not in set(ood.splits["train"].tasks)
    with pytest.raises(ValueError, match="mode"):
        RoutingDataModule("synthetic", mode="triplet")
    with pytest.raises(ValueError, match="unknown dataset"):
        _ = RoutingDataModule("no-such-dataset").n_llms


def test_llm_features_by_hand():
    t = pd.DataFrame({"name": ["a", "b", "c"], "input_price": [1.0, 10.0, np.nan],
                      "output_price": [3.0, np.nan, np.nan], "size": [7.0, 70.0, 7.0],
                      "description": ["small fast", None, "big"]})
    enc = get_encoder("hashing", dim=8)
    f, stats = llm_feature_matrix(t, enc)
    logp = np.log(np.array([2.0, 10.0]) + 1e-3)          # mean of the known prices
    z = (logp - logp.mean()) / logp.std()
    np.testing.assert_allclose(f[:, 8], [z[0], z[1], 0.0], rtol=1e-5)
    assert f[:, 9].tolist() == [0.0, 0.0, 1.0]           # price missing for c
    logs = np.log1p([7.0, 70.0, 7.0])
    np.testing.assert_allclose(f[:, 10], (logs - logs.mean()) / logs.std(), rtol=1e-5)
    np.testing.assert_allclose(f[1, :8], enc.encode(["b"])[0])   # no description -> the name
    # a new LLM featurised with the pool's statistics
    f_new, _ = llm_feature_matrix(t.iloc[[1]], enc, stats=stats)
    np.testing.assert_allclose(f_new[0], f[1], rtol=1e-6)


def test_train_positives_and_mean_costs():
    dm = RoutingDataModule.from_splits({"train": _tiny()}, carve_val=False, encoder_options={"dim": 8})
    assert dm.train_positives.tolist() == [1, 1, 2]
    np.testing.assert_allclose(dm.mean_costs, [0.1, 0.2, 0.3], rtol=1e-6)


def test_battles_from_scores_and_preference_module(tmp_path):
    s = np.array([[1.0, 0.0, np.nan], [0.5, 0.5, 0.2]])
    rows, w, l_, t = battles_from_scores(s)
    assert list(zip(rows.tolist(), w.tolist(), l_.tolist(), t.tolist())) == \
        [(0, 0, 1, 0.0), (1, 0, 1, 1.0), (1, 0, 2, 0.0), (1, 1, 2, 0.0)]
    assert len(battles_from_scores(s, include_ties=False)[0]) == 3
    dm = PreferenceDataModule(**SMALL)
    assert dm.mode == "pairwise"
    b = next(iter(dm.train_dataloader()))
    assert set(b) == {"x", "pos", "neg", "tie", "row"}

    f = tmp_path / "battles.csv"
    names = dm.llm_names
    pd.DataFrame({"prompt": ["p one", "p two", "p three"], "model_a": [names[0], names[1], names[2]],
                  "model_b": [names[1], names[2], names[0]],
                  "winner": ["model_b", "tie", "model_a"]}).to_csv(f, index=False)
    table = read_battles(f, names)
    assert table[["winner_idx", "loser_idx", "tie"]].values.tolist() == [[1, 0, 0], [1, 2, 1], [2, 0, 0]]
    dmf = PreferenceDataModule(battles=str(f), **SMALL)
    bf = next(iter(dmf.train_dataloader()))
    assert len(bf["pos"]) == 3
    np.testing.assert_allclose(bf["x"][bf["row"].argsort()][0].numpy(),
                               dmf.encoder.encode(["p one"])[0])
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"prompt": ["p"], "model_a": [names[0]], "model_b": ["gpt-x"],
                  "winner": ["model_a"]}).to_csv(bad, index=False)
    with pytest.raises(DataValidationError, match="gpt-x") as err:
        read_battles(bad, names)
    assert err.value.row == 2 and err.value.column == "model_b"   # file line 2 (header: 1)
    pd.DataFrame({"prompt": ["p"], "model_a": [names[0]], "model_b": [names[1]],
                  "winner": ["maybe"]}).to_csv(bad, index=False)
    with pytest.raises(DataValidationError, match="winner"):
        read_battles(bad, names)


def test_battles_keyed_by_query_id_embed_each_query_text(tmp_path):
    dm = PreferenceDataModule(**SMALL)
    train, names = dm.splits["train"], dm.llm_names
    ids = [str(q) for q in train.query_ids[:4]]
    f = tmp_path / "by_id.csv"
    pd.DataFrame({"query_id": ids, "model_a": names[0], "model_b": names[1],
                  "winner": ["model_a", "model_b"] * 2}).to_csv(f, index=False)
    dmf = PreferenceDataModule(battles=str(f), **SMALL)
    ds = dmf._train_dataset()
    # by hand: each battle row is the encoding of its query's own text
    want = dmf.encoder.encode([str(t) for t in train.texts[:4]])
    np.testing.assert_allclose(ds.x, want, rtol=1e-6)
    assert len(np.unique(ds.x.round(6), axis=0)) == 4
    pd.DataFrame({"query_id": [ids[0], "nowhere-1"], "model_a": names[0], "model_b": names[1],
                  "winner": "model_a"}).to_csv(f, index=False)
    with pytest.raises(DataValidationError, match=r"1 battle query_id\(s\) have no query text.*"
                                                   r"nowhere-1"):
        PreferenceDataModule(battles=str(f), **SMALL)._train_dataset()


def test_permutation_batch_sampler_covers_each_row_once_per_epoch():
    import torch
    from recsys_router.datamodules._datasets import PermutationBatchSampler
    gen = torch.Generator().manual_seed(3)
    s = PermutationBatchSampler(10, 4, shuffle=True, generator=gen)
    assert len(s) == 3
    e1, e2 = [np.concatenate(list(s)) for _ in range(2)]
    assert [len(b) for b in s] == [4, 4, 2]
    assert sorted(e1.tolist()) == list(range(10)) == sorted(e2.tolist())
    assert e1.tolist() != e2.tolist()  # a new permutation each epoch
    again = PermutationBatchSampler(10, 4, shuffle=True,
                                    generator=torch.Generator().manual_seed(3))
    assert np.concatenate(list(again)).tolist() == e1.tolist()  # seeded
    assert np.concatenate(list(PermutationBatchSampler(5, 2, shuffle=False))).tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        PermutationBatchSampler(5, 0, shuffle=False)


def test_cell_loader_batches_are_the_gathered_rows(sim_small):
    from recsys_router.datamodules import RoutingDataModule
    dm = RoutingDataModule.from_splits({"train": sim_small}, encoder="hashing", batch_size=64,
                                       mode="pointwise", seed=0)
    dm.setup("fit")
    x, scores = dm.embeddings("train"), dm.splits["train"].scores
    rows, cols = np.nonzero(~np.isnan(scores))
    seen = []
    for b in dm.train_dataloader():
        # every batch row is the embedding of its query row and the score of its cell
        r = b["row"].numpy()
        np.testing.assert_array_equal(b["x"].numpy(), x[r])
        np.testing.assert_array_equal(b["y"].numpy(), scores[r, b["llm"].numpy()])
        seen.extend(zip(r.tolist(), b["llm"].tolist()))
    assert sorted(seen) == sorted(zip(rows.tolist(), cols.tolist()))


def test_val_fraction_sets_the_carved_share_of_a_published_split():
    """With a split column (no val part) ``val_fraction`` is the carved share of train; the
    default stays r_val / (r_train + r_val) of split_ratios."""
    from recsys_router.datasets.synthetic import make_synthetic
    d = make_synthetic(200, 3, 2, seed=0)
    q = d.queries.copy()
    q["split"] = ["test" if i % 4 == 0 else "train" for i in range(200)]   # 150 train, 50 test
    col = RoutingData(q, d.llms, d.scores, d.costs)
    parts = col.split(column="split")
    dm = RoutingDataModule.from_splits(parts, encoder_options={"dim": 8}, val_fraction=0.1)
    assert {k: v.n_queries for k, v in dm.splits.items()} == {"train": 135, "val": 15, "test": 50}
    dflt = RoutingDataModule.from_splits(parts, encoder_options={"dim": 8})
    assert dflt.splits["val"].n_queries == round(150 * 0.1 / 0.9)                       # 17
    with pytest.raises(ValueError, match=r"val_fraction must be in \[0, 1\)"):
        RoutingDataModule(val_fraction=1.0)


def test_a_zero_val_share_carves_no_validation_split():
    """split_ratios (0.9, 0, 0.1) or val_fraction 0: no val split (a one-query val was carved)."""
    opts = dict(dataset_options={"n_queries": 200, "n_llms": 3}, encoder_options={"dim": 8})
    dm = RoutingDataModule("synthetic", split_ratios=(0.9, 0.0, 0.1), **opts)
    assert sorted(dm.splits) == ["test", "train"] and dm.val_dataloader() == []
    assert dm.splits["train"].n_queries + dm.splits["test"].n_queries == 200
    from recsys_router.datasets.synthetic import make_synthetic
    d = make_synthetic(60, 3, 2, seed=0)
    dm0 = RoutingDataModule.from_splits({"train": d.subset(np.arange(50)),
                                         "test": d.subset(np.arange(50, 60))},
                                        encoder_options={"dim": 8}, val_fraction=0.0)
    assert sorted(dm0.splits) == ["test", "train"] and dm0.splits["train"].n_queries == 50


def test_battle_file_errors_name_the_file_line(tmp_path):
    """Rows in battle-file errors are file lines like the long-table loader's (they were
    0-based record indices): a quoted prompt spanning lines and a blank JSONL line count."""
    names = PreferenceDataModule(**SMALL).llm_names
    f = tmp_path / "b.csv"
    f.write_text("prompt,model_a,model_b,winner\n"                          # line 1
                 f'"two\nlines",{names[0]},{names[1]},model_a\n'           # lines 2-3
                 f"ok,{names[0]},{names[1]},bogus\n")                      # line 4
    with pytest.raises(DataValidationError) as err:
        read_battles(f, names)
    assert (err.value.row, err.value.column) == (4, "winner")
    assert str(err.value).startswith(f"{f}, row 4, column 'winner': winner 'bogus'")
    j = tmp_path / "b.jsonl"
    j.write_text(f'{{"prompt": "a", "model_a": "{names[0]}", "model_b": "{names[1]}", "winner": "tie"}}\n'
                 "\n"
                 f'{{"prompt": "b", "model_a": "{names[0]}", "model_b": "gpt-x", "winner": "tie"}}\n')
    with pytest.raises(DataValidationError) as err:
        read_battles(j, names)
    assert (err.value.row, err.value.column) == (3, "model_b")


def test_a_battles_file_without_battles_is_refused_naming_it(tmp_path):
    """An empty battles file, or one of ties only without include_ties, trained nothing and
    'succeeded'; now it is a DataValidationError naming the file."""
    names = PreferenceDataModule(**SMALL).llm_names
    empty = tmp_path / "empty.csv"
    empty.write_text("prompt,model_a,model_b,winner\n")
    ties = tmp_path / "ties.csv"
    ties.write_text(f"prompt,model_a,model_b,winner\nhi,{names[0]},{names[1]},tie\n")
    for f, ties_ok, why in [(empty, True, "the file holds no battles"),
                            (ties, False, "all 1 battles are ties and include_ties is false")]:
        dm = PreferenceDataModule(battles=str(f), include_ties=ties_ok, **SMALL)
        with pytest.raises(DataValidationError) as err:
            dm.train_dataloader()
        assert str(err.value) == f"{f}: no battles to train on: {why}"
    assert len(PreferenceDataModule(battles=str(ties), **SMALL).train_dataloader().dataset) == 1


@pytest.mark.parametrize("bad", [-0.1, 1.0, 2.0, float("nan"), float("inf")])
def test_val_fraction_out_of_range_is_refused(bad):
    """The validation share carved out of a published train split: a fraction in [0, 1)."""
    with pytest.raises(ValueError, match=r"val_fraction must be in \[0, 1\), got"):
        RoutingDataModule("synthetic", val_fraction=bad, **SMALL)


@pytest.mark.parametrize("kwargs,says", [
    ({"num_workers": -1}, "num_workers must be an integer >= 0, got -1"),
    ({"num_workers": 1.5}, "num_workers must be an integer >= 0, got 1.5"),
    ({"max_pairs_per_query": -1}, "max_pairs_per_query must be an integer >= 1 or None, got -1"),
    ({"max_pairs_per_query": 0}, "max_pairs_per_query must be an integer >= 1 or None, got 0"),
    ({"propensity_clip": -1.0}, "propensity_clip must be a finite number in (0, 1], got -1.0"),
    ({"propensity_clip": 0.0}, "propensity_clip must be a finite number in (0, 1], got 0.0"),
    ({"propensity_clip": float("nan")},
     "propensity_clip must be a finite number in (0, 1], got nan"),
], ids=["workers-neg", "workers-float", "pairs-neg", "pairs-zero", "clip-neg", "clip-zero",
        "clip-nan"])
def test_out_of_range_loader_values_are_refused_at_construction(kwargs, says):
    """They were accepted and failed inside fit (torch's num_workers text, numpy's "negative
    dimensions", "no query with two different observed scores" for 0 pairs)."""
    from recsys_router.errors import ArgumentValueError
    with pytest.raises(ArgumentValueError) as err:
        RoutingDataModule("synthetic", **kwargs, **SMALL)
    assert str(err.value) == says


def test_unknown_dataset_options_are_refused_at_construction():
    from recsys_router.errors import ArgumentValueError
    opts = {**SMALL.get("dataset_options", {}), "bogus": 1, "colour": "red"}
    with pytest.raises(ArgumentValueError) as err:
        RoutingDataModule("synthetic", **{**SMALL, "dataset_options": opts})
    assert str(err.value).startswith("no such dataset_options key(s) ['bogus', 'colour'] for "
                                     "dataset 'synthetic'; its options: ['binary', 'n_llms', ")
    # load_dataset's own options, and a path (no registered loader), are not refused here
    dm = RoutingDataModule("synthetic", **{**SMALL, "dataset_options": {
        **SMALL.get("dataset_options", {}), "download": False}})
    assert dm.n_llms == 4
    RoutingDataModule("some/file.csv", dataset_options={"anything": 1})


def test_zero_battles_per_query_is_refused_at_construction():
    from recsys_router.errors import ArgumentValueError
    with pytest.raises(ArgumentValueError, match=r"^battles_per_query must be an integer >= 1 "
                                                 r"or None, got 0$"):
        PreferenceDataModule(battles_per_query=0, **SMALL)
    assert PreferenceDataModule(battles_per_query=2, **SMALL).battles_per_query == 2


def test_a_seeded_sampler_draws_epoch_e_from_seed_and_epoch_alone():
    """With ``seed``, a sampler that starts at epoch 1 (a resumed fit: a new sampler) yields
    the order the second pass of an uninterrupted one yields; the seed still decides it."""
    from recsys_router.datamodules._datasets import PermutationBatchSampler
    run = PermutationBatchSampler(50, 8, shuffle=True, seed=7)
    first, second = [np.concatenate(list(run)) for _ in range(2)]
    resumed = PermutationBatchSampler(50, 8, shuffle=True, seed=7, epoch_of=lambda: 1)
    assert np.concatenate(list(resumed)).tolist() == second.tolist() != first.tolist()
    assert sorted(second.tolist()) == list(range(50))
    other_seed = PermutationBatchSampler(50, 8, shuffle=True, seed=8, epoch_of=lambda: 1)
    assert np.concatenate(list(other_seed)).tolist() != second.tolist()


def test_fit_resumed_from_an_epoch_checkpoint_equals_the_uninterrupted_fit(tmp_path):
    """fit 2 epochs == fit 1 epoch + ``fit --ckpt_path last.ckpt`` to 2 epochs, with several
    shuffled batches per epoch (the resumed run replayed epoch 0's order: max |dw| 0.03)."""
    from pathlib import Path
    from recsys_router.lightning_cli import build_lightning_cli
    root = Path(__file__).resolve().parents[1]

    def fit(name, epochs, *extra):
        out = tmp_path / name
        build_lightning_cli([
            "fit", "-c", str(root / "configs/models/mf.yaml"),
            "-c", str(root / "configs/data/synthetic.yaml"),
            "--data.init_args.dataset_options={n_queries: 120, n_llms: 4, n_topics: 3, seed: 0}",
            "--data.init_args.encoder_options={dim: 16}", "--data.init_args.batch_size=16",
            "--seed_everything=0", f"--trainer.max_epochs={epochs}", "--trainer.logger=false",
            f"--trainer.default_root_dir={out}", f"--checkpoint.dirpath={out}/ck",
            "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
            *extra])
        return torch.load(out / "ck" / "last.ckpt", map_location="cpu", weights_only=True)

    straight = fit("straight", 2)
    fit("first", 1)
    resumed = fit("resumed", 2, f"--ckpt_path={tmp_path / 'first' / 'ck' / 'last.ckpt'}")
    assert straight["global_step"] == resumed["global_step"] == 2 * 6  # 96 train rows / 16
    for key, w in straight["state_dict"].items():
        torch.testing.assert_close(resumed["state_dict"][key], w, rtol=0, atol=1e-6)
