"""Posterior draws of a router's predicted scores, for Thompson-sampling exploration.

A router can sample when it defines ``sample_scores(data, n_samples, seed)`` itself, or
when it is a Lightning router whose network has dropout (``dropout > 0``): then each draw
runs the network with dropout active (Monte-Carlo dropout as an approximate posterior).

The draws run on a private deep copy of the network, made once per router object and
dropped with it (a pool change serves a new router object, so it gets a fresh copy): the
shared network's modes are never touched, so a prediction running meanwhile in another
thread (the serving batcher's) stays deterministic.

Their randomness never touches torch's global RNG: ``torch.nn.functional.dropout`` takes no
generator, so while sampling, each ``nn.Dropout`` layer of the private copy draws its mask
with ``torch.rand(..., generator=g)`` from a private ``torch.Generator`` seeded with the
call's ``seed`` (the same inverted dropout: an element is kept with probability ``1 - p``
and scaled by ``1 / (1 - p)``). The same seed gives the same draws whatever other threads
do with the global RNG meanwhile (seeding and restoring the global state, as before, let a
concurrent draw or training step change them), and the global state is left untouched.
Other dropout kinds (``Dropout2d``, ``AlphaDropout``...) with a non-zero rate are refused.

Reference: Gal & Ghahramani, "Dropout as a Bayesian Approximation", ICML 2016; Riquelme,
Tucker & Snoek, "Deep Bayesian Bandits Showdown", ICLR 2018 (dropout Thompson sampling).
"""

from __future__ import annotations

import copy
import functools
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


def _unsupported_dropout(net) -> str | None:
    """The class name of a dropout layer of ``net`` with a non-zero rate that the private
    generator cannot drive (anything but ``nn.Dropout`` itself), else None."""
    import torch.nn as nn
    for m in net.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 and type(m) is not nn.Dropout:
            return type(m).__name__
    return None


def _generator_dropout(layer, generator, x):
    """``nn.Dropout``'s inverted dropout of ``x`` with its mask drawn from ``generator``."""
    import torch
    p = float(layer.p)
    if not layer.training or p == 0.0:
        return x
    if p >= 1.0:
        return x * 0.0
    dtype = x.dtype if x.is_floating_point() else torch.float32
    keep = torch.rand(x.shape, generator=generator, device=x.device, dtype=dtype) >= p
    return x * keep.to(x.dtype) / (1.0 - p)


@contextmanager
def dropout_active(net, generator=None):
    """Keep ``net``'s dropout layers sampling while the rest of it is in eval mode, even
    through the ``net.eval()`` that prediction calls (Monte-Carlo dropout); restores the
    layers' modes on exit.

    With a ``torch.Generator``, every dropout layer draws its mask from it instead of
    torch's global RNG (layers at rate 0 pass their input through; ``net`` must have no
    other dropout kind at a non-zero rate, see :func:`sample_scores`), so ``net`` must be a
    copy no other thread runs meanwhile."""
    import torch.nn as nn
    drops = [m for m in net.modules() if isinstance(m, nn.modules.dropout._DropoutNd)]
    modes = [m.training for m in drops]
    was = net.training
    net.eval()
    try:
        for m in drops:
            m.train(True)
            m.train = lambda mode=True, _m=m: _m   # ignore eval() while sampling
            if generator is not None:             # instance attribute: nn.Module calls it
                m.forward = functools.partial(_generator_dropout, m, generator)
        yield net
    finally:
        for m in drops:
            del m.train
            if generator is not None:
                del m.forward
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

    The dropout masks come from a private ``torch.Generator`` seeded with ``seed`` (see the
    module docstring): the same seed gives the same draws, concurrent callers do not change
    each other's draws, and torch's global RNG state is never read or changed.

    Raises
    ------
    ValueError
        The router cannot sample its predictions (no ``sample_scores``, no dropout, or a
        dropout kind other than ``nn.Dropout`` at a non-zero rate).
    """
    own = getattr(router, "sample_scores", None)
    net = None if callable(own) else _dropout_net(router)
    if not callable(own) and net is None:
        raise ValueError(f"--explore thompson needs a router that can sample its predicted "
                         f"scores; {type(router).__name__} cannot (a Lightning router with "
                         "dropout layers, e.g. mf with hidden=[64] and dropout > 0, can)")
    bad = None if net is None else _unsupported_dropout(net)
    if bad is not None:
        raise ValueError(f"--explore thompson samples nn.Dropout layers only; "
                         f"{type(router).__name__}'s network has a {bad} with a non-zero rate")
    if check_only:
        return None
    if callable(own):
        return np.asarray(own(data, n_samples, seed), dtype=np.float64)
    import torch
    router._check_fitted()
    router._check_llms(data)
    view, lock = _private_router(router, net)
    param = next(view.net_.parameters(), None)
    gen = torch.Generator(device=param.device if param is not None else "cpu")
    gen.manual_seed(int(seed))
    with lock, dropout_active(view.net_, generator=gen):
        return _draws(view, data, n_samples)
