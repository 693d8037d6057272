"""Posterior draws of a router's predicted scores, for Thompson-sampling exploration.

A router can sample when it defines ``sample_scores(data, n_samples, seed)`` itself, or
when it is a Lightning router whose network has dropout (``dropout > 0``): then each draw
runs the network with dropout active (Monte-Carlo dropout as an approximate posterior).

Reference: Gal & Ghahramani, "Dropout as a Bayesian Approximation", ICML 2016; Riquelme,
Tucker & Snoek, "Deep Bayesian Bandits Showdown", ICLR 2018 (dropout Thompson sampling).
"""

from __future__ import annotations

import numpy as np

__all__ = ["sample_scores"]


def _dropout_net(router):
    net = getattr(router, "net_", None)
    if net is None:
        return None
    import torch.nn as nn
    drops = [m for m in net.modules() if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0]
    return net if drops else None


def sample_scores(router, data, n_samples: int, seed: int, *, check_only: bool = False):
    """``n_samples`` draws of the predicted scores, shape (n_samples, n_queries, n_llms).

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
    x = torch.as_tensor(np.asarray(router.embed(data), np.float32))
    was = net.training
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(int(seed))
    try:
        net.eval()
        for m in net.modules():
            if isinstance(m, torch.nn.modules.dropout._DropoutNd):
                m.train()
        with torch.no_grad():
            out = np.stack([torch.sigmoid(net(x)).double().numpy() for _ in range(int(n_samples))])
    finally:
        net.train(was)
        torch.random.set_rng_state(gen_state)
    return out
