"""Posterior draws of a router's predicted scores, for Thompson-sampling exploration.

A router can sample when it defines ``sample_scores(data, n_samples, seed)`` itself, or
when it is a Lightning router whose network has dropout (``dropout > 0``): then each draw
runs the network with dropout active (Monte-Carlo dropout as an approximate posterior).

The draws run on a private deep copy of the network, made once per router object and
dropped with it (a pool change serves a new router object, so it gets a fresh copy): the
shared network's modes are never touched, so a prediction running meanwhile in another
thread (the serving batcher's) stays deterministic.

Reference: Gal & Ghahramani, "Dropout as a Bayesian Approximation", ICML 2016; Riquelme,
Tucker & Snoek, "Deep Bayesian Bandits Showdown", ICLR 2018 (dropout Thompson sampling).
"""

from __future__ import annotations

import copy
import threading
import weakref
from contextlib import contextmanager

import numpy as np

__all__ = ["sample_scores", "dropout_active"]


#: router -> (its network, that network's state when copied, the private copy, a lock for
#: sampling on the copy)
_PRIVATE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_PRIVATE_LOCK = threading.Lock()


def _state_key(net) -> tuple:
    """What the private copy must match besides the network object: its tensors (storage and
    in-place version) and its dropout rates; a change of any of them makes a new copy."""
    import torch.nn as nn
    tensors = tuple((t.data_ptr(), t._version) for t in net.state_dict(keep_vars=True).values())
    rates = tuple(m.p for m in net.modules() if isinstance(m, nn.modules.dropout._DropoutNd))
    return tensors, rates


def _private_router(router, net):
    """A view of ``router`` (same state, one level deep) whose ``net_`` is its private copy of
    ``net``, and the lock to hold while sampling on it. The copy is made once per router
    object (refreshed if its network was reassigned or changed in place) and goes with it."""
    key = _state_key(net)
    with _PRIVATE_LOCK:
        entry = _PRIVATE.get(router)
        if entry is None or entry[0] is not net or entry[1] != key:
            entry = (net, key, copy.deepcopy(net), threading.Lock())
            _PRIVATE[router] = entry
    view = copy.copy(router)
    view.__dict__ = dict(router.__dict__)
    view.net_ = entry[2]
    return view, entry[3]


def _dropout_net(router):
    net = getattr(router, "net_", None)
    if net is None or not callable(getattr(router, "scores_from_logits", None)):
        return None
    import torch.nn as nn
    drops = [m for m in net.modules() if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0]
    return net if drops else None


@contextmanager
def dropout_active(net):
    """Keep ``net``'s dropout layers sampling while the rest of it is in eval mode, even
    through the ``net.eval()`` that prediction calls (Monte-Carlo dropout); restores the
    layers' modes on exit."""
    import torch.nn as nn
    drops = [m for m in net.modules() if isinstance(m, nn.modules.dropout._DropoutNd)]
    modes = [m.training for m in drops]
    was = net.training
    net.eval()
    try:
        for m in drops:
            m.train(True)
            m.train = lambda mode=True, _m=m: _m   # ignore eval() while sampling
        yield net
    finally:
        for m in drops:
            del m.train
        net.train(was)
        for m, mode in zip(drops, modes):
            m.train(mode)


def _draws(router, data, n_samples: int):
    """MC-dropout draws through the router's own prediction path: the pool's logits (added
    LLMs' rows included), ``scores_from_logits`` (calibration, data scale) and, for a pool
    changed by probe heads, the pool's columns, exactly as ``predict_scores`` does."""
    from recsys_router.coldstart.pool import core_view, pool_changed, predict_pool
    changed = pool_changed(router)
    x = router.embed(core_view(router, data) if changed else data)
    out = []
    for _ in range(int(n_samples)):
        s = router.scores_from_logits(router._pool_logits(x))
        out.append(predict_pool(router, data, s) if changed else s)
    return np.stack(out).astype(np.float64)


def sample_scores(router, data, n_samples: int, seed: int, *, check_only: bool = False):
    """``n_samples`` draws of the predicted scores, shape (n_samples, n_queries, n_llms), on
    the scale of :meth:`~recsys_router.router.Router.predict_scores` (the data's scores, after
    any logit calibration): Thompson sampling compares the draws' policy utilities with the
    greedy choice made on ``predict_scores``.

    Raises
    ------
    ValueError
        The router cannot sample its predictions (no ``sample_scores``, no dropout).
    """
    own = getattr(router, "sample_scores", None)
    net = None if callable(own) else _dropout_net(router)
    if not callable(own) and net is None:
        raise ValueError(f"--explore thompson needs a router that can sample its predicted "
                         f"scores; {type(router).__name__} cannot (a Lightning router with "
                         "dropout layers, e.g. mf with hidden=[64] and dropout > 0, can)")
    if check_only:
        return None
    if callable(own):
        return np.asarray(own(data, n_samples, seed), dtype=np.float64)
    import torch
    router._check_fitted()
    router._check_llms(data)
    view, lock = _private_router(router, net)
    with lock:
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(int(seed))
        try:
            with dropout_active(view.net_):
                out = _draws(view, data, n_samples)
        finally:
            torch.random.set_rng_state(gen_state)
    return out
