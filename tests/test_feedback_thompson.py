"""Thompson draws of a Lightning router with dropout are on the scale the router decides on:
the data's own scores after the logit calibration, as ``predict_scores``."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.feedback.explore import choice_probabilities, parse_explore, policy_utility
from recsys_router.feedback.sampling import sample_scores
from recsys_router.policies import wtp_policy
from recsys_router.registry import make_router


@pytest.fixture(scope="module")
def fitted():
    logging.disable(logging.WARNING)
    try:
        d = make_synthetic(300, 3, seed=0)
        d10 = RoutingData(d.queries, d.llms, 1.0 + 9.0 * d.scores, d.costs, name="1-10 scale")
        r = make_router("mf", hidden=[16], dropout=0.2, max_epochs=2, seed=0,
                        encoder_options={"dim": 32}).fit(d10)
    finally:
        logging.disable(logging.NOTSET)
    return r, d10.subset(np.arange(40))


def _set_dropout(net, p):
    import torch.nn as nn
    for m in net.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd):
            m.p = p


def test_near_deterministic_draws_equal_predict_scores(fitted):
    r, te = fitted
    s = r.predict_scores(te)
    # independently: min-max scale of the 1-10 training scores over sigmoid(logits)
    lo, hi = r.score_scale_.lo, r.score_scale_.hi
    assert (lo, hi) == (1.0, 10.0)
    z = r.predict_logits(te).astype(np.float64)
    assert np.allclose(s, lo + (hi - lo) / (1.0 + np.exp(-z)), atol=1e-9)
    _set_dropout(r.net_, 1e-12)          # dropout still on, but it drops (almost) nothing
    try:
        draws = sample_scores(r, te, 8, seed=3)
    finally:
        _set_dropout(r.net_, 0.2)
    assert draws.shape == (8, te.n_queries, 3)
    assert np.allclose(draws, s[None], atol=1e-5)   # old code: sigmoid(net(x)) in [0, 1]
    assert not r.net_.training                       # modes restored


def test_dropout_draws_on_the_data_scale_and_wtp_probabilities(fitted):
    r, te = fitted
    s, c = r.predict_scores(te), r.predict_costs(te)
    draws = sample_scores(r, te, 64, seed=0)
    assert draws.min() > 1.0 and draws.max() < 10.0 and draws.max() > 2.0
    assert abs(draws.mean() - s.mean()) < 0.5       # the [0, 1] scale is ~5 points off
    assert not np.allclose(draws[0], draws[1])       # dropout does sample
    # same seed, same draws; the global torch RNG is left as it was
    import torch
    before = torch.random.get_rng_state()
    assert np.array_equal(sample_scores(r, te, 4, seed=5), sample_scores(r, te, 4, seed=5))
    assert torch.equal(before, torch.random.get_rng_state())
    # near-deterministic draws: every wtp's Thompson choice is the greedy wtp choice
    _set_dropout(r.net_, 1e-12)
    try:
        tiny = sample_scores(r, te, 16, seed=1)
    finally:
        _set_dropout(r.net_, 0.2)
    ds = np.median(np.abs(np.diff(s, axis=1)))
    dc = np.median(np.abs(np.diff(c, axis=1)))
    for wtp in (0.5 * dc / ds, 2 * dc / ds, 5 * dc / ds):
        g = wtp_policy(s, c, wtp)
        u, al = policy_utility(s, c, "wtp", wtp)
        samples = np.stack([policy_utility(x, c, "wtp", wtp)[0] for x in tiny])
        p = choice_probabilities(parse_explore("thompson:16"), g, u, al, samples)
        assert np.allclose(p[np.arange(len(g)), g], 1.0)


def test_draws_cover_an_added_llm_like_predict_scores(fitted):
    """An LLM added after fitting (its own row, outside the trained network's output layer)
    is a column of the draws, as of ``predict_scores``; removing it restores the pool."""
    import copy
    r, te = fitted
    r = copy.deepcopy(r)
    probes = {t: 1.0 + 9.0 * (k % 2) for k, t in enumerate(te.texts[:10])}
    r.add_llm("new", probes, costs={t: 0.001 for t in probes})
    te4 = RoutingData(te.queries, r.llm_names_, np.full((te.n_queries, 4), np.nan))
    s = r.predict_scores(te4)
    _set_dropout(r.net_, 1e-12)
    draws = sample_scores(r, te4, 4, seed=0)
    assert draws.shape == (4, te.n_queries, 4)      # old code: 3 columns, the added one missing
    assert np.allclose(draws, s[None], atol=1e-5)


def _modes(net):
    return [m.training for m in net.modules()]


def test_sampling_never_changes_the_shared_network(fitted):
    """Thompson draws in one thread, greedy ``predict_scores`` in another (the serving
    batcher's worker thread): the greedy scores stay exactly the deterministic ones and the
    shared network's modes never change. The greedy thread runs, and the modes are read, in
    the middle of every draw (a spy on ``scores_from_logits``), so no timing is involved; the
    old code switched the shared network's dropout on for the draws."""
    import threading
    r, te = fitted
    shared = r.net_
    base, modes0 = r.predict_scores(te), _modes(shared)
    assert not any(modes0)
    seen_modes, greedy, draws = [], [], []
    inside = [False]
    own = r.scores_from_logits

    def spy(logits):
        if not inside[0]:                # a draw (the greedy thread's own call passes through)
            inside[0] = True
            try:
                seen_modes.append(_modes(shared))
                t = threading.Thread(target=lambda: greedy.append(r.predict_scores(te)))
                t.start()
                t.join()
            finally:
                inside[0] = False
        return own(logits)

    def sampler():
        for seed in range(3):
            draws.append(sample_scores(r, te, 4, seed=seed))

    r.scores_from_logits = spy           # the router's instance attribute, so views carry it
    try:
        t = threading.Thread(target=sampler)
        t.start()
        t.join()
    finally:
        del r.scores_from_logits
    assert len(seen_modes) == len(greedy) == 12 and len(draws) == 3
    assert all(m == modes0 for m in seen_modes)
    for g in greedy:
        np.testing.assert_array_equal(g, base)
    assert _modes(shared) == modes0 and r.net_ is shared
    assert not np.allclose(draws[0][0], draws[0][1])      # the draws do sample


def test_private_network_is_one_per_live_router(fitted):
    """The private copy is made once per router object, a new router object (a pool change
    serves one) gets its own, and it goes with its router: memory stays bounded."""
    import copy
    import gc

    from recsys_router.feedback import sampling
    r, te = fitted
    sample_scores(r, te, 2, seed=0)
    mine = sampling._PRIVATE[r][2]
    assert mine is not r.net_
    sample_scores(r, te, 2, seed=1)
    assert sampling._PRIVATE[r][2] is mine                # not copied again
    before = len(sampling._PRIVATE)
    other = copy.copy(r)
    other.__dict__ = dict(r.__dict__)                     # as serving's pool change does
    sample_scores(other, te, 2, seed=0)
    assert len(sampling._PRIVATE) == before + 1 and sampling._PRIVATE[other][2] is not mine
    del other
    gc.collect()
    assert len(sampling._PRIVATE) == before


def test_draws_use_a_private_generator_not_the_global_rng(fitted):
    """Another thread using torch's global RNG in the middle of every draw (emulated by a spy
    on ``scores_from_logits``, so no timing is involved) neither changes the draws nor gets
    other numbers than its own seeded stream. The old code seeded the global RNG for the
    draws: the spy's numbers came from the draw's seed and its calls shifted the masks."""
    import torch
    r, te = fitted
    alone = sample_scores(r, te, 4, seed=11)
    torch.manual_seed(123)
    assert np.array_equal(sample_scores(r, te, 4, seed=11), alone)   # global seed irrelevant
    torch.manual_seed(7)
    want = [torch.rand(5) for _ in range(4)]      # the other thread's stream, independently
    own = r.scores_from_logits
    got = []

    def spy(logits):
        got.append(torch.rand(5))                 # the "other thread" between two masks
        return own(logits)

    torch.manual_seed(7)
    r.scores_from_logits = spy
    try:
        mixed = sample_scores(r, te, 4, seed=11)
    finally:
        del r.scores_from_logits
    np.testing.assert_array_equal(mixed, alone)
    assert len(got) == 4 and all(torch.equal(a, b) for a, b in zip(got, want))


def test_concurrent_draws_of_two_routers_match_their_sequential_draws(fitted):
    """Two router objects (two private networks, no shared lock) sampling in two threads at
    once give, per seed, exactly the draws each gives alone; same seed, same Thompson
    choice probabilities."""
    import copy
    import threading
    r, te = fitted
    other = copy.copy(r)
    other.__dict__ = dict(r.__dict__)             # as serving's pool change does
    seeds = {0: [1, 2, 3, 4, 5, 6], 1: [6, 5, 4, 3, 2, 1]}
    routers = {0: r, 1: other}
    ref = {k: [sample_scores(routers[k], te, 3, seed=s) for s in seeds[k]] for k in seeds}
    out = {0: [], 1: []}
    start = threading.Barrier(2)

    def run(k):
        start.wait()
        for s in seeds[k]:
            out[k].append(sample_scores(routers[k], te, 3, seed=s))

    threads = [threading.Thread(target=run, args=(k,)) for k in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in seeds:
        for a, b in zip(out[k], ref[k]):
            np.testing.assert_array_equal(a, b)
    # the same seed on either router: the same draws, hence the same Thompson probabilities
    s, c = r.predict_scores(te), r.predict_costs(te)
    u, al = policy_utility(s, c, "wtp", 1.0)
    probs = [choice_probabilities(parse_explore("thompson:3"), wtp_policy(s, c, 1.0), u, al,
                                  np.stack([policy_utility(x, c, "wtp", 1.0)[0] for x in d]))
             for d in (out[0][0], out[1][-1])]    # both seed 1
    np.testing.assert_array_equal(probs[0], probs[1])


def test_unsupported_dropout_kind_is_refused_before_any_draw(fitted):
    """A dropout layer the private generator cannot drive (``Dropout2d`` here) is refused
    in one line naming it, at the service's start-up check too."""
    import copy

    import torch.nn as nn
    r, te = fitted
    r = copy.deepcopy(r)
    r.net_.extra = nn.Dropout2d(0.3)
    for check_only in (True, False):
        with pytest.raises(ValueError, match="nn.Dropout layers only; .* has a Dropout2d"):
            sample_scores(r, te, 2, seed=0, check_only=check_only)
