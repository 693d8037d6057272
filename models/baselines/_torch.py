"""Small, seeded torch MLP trainer with masked losses (used by MLPR and MLC).

Training runs inside ``torch.random.fork_rng`` so the global torch RNG is left untouched,
uses a private generator for shuffling, and is deterministic on CPU for a given seed. It
runs single-threaded (restoring the caller's thread count afterwards): these MLPs are tiny,
and extra threads only contend with each other on shared machines.
"""

from __future__ import annotations

import numpy as np

from recsys_router.hyperparams import check_number, check_seed

__all__ = ["build_mlp", "fit_mlp", "predict_mlp"]

_LOSSES = ("bce", "mse")


def build_mlp(in_dim: int, out_dim: int, hidden_size: int, n_hidden: int):
    """``n_hidden`` x (Linear + ReLU) of width ``hidden_size`` then a Linear output layer:
    the package's one MLP stack, :class:`~recsys_router.models.components.mlp.MLP`.

    Example
    -------
    >>> build_mlp(8, 3, 16, 2).net[2].in_features
    16
    """
    from recsys_router.models.components.mlp import MLP
    return MLP(int(in_dim), int(out_dim), hidden=(int(hidden_size),) * int(n_hidden))


def fit_mlp(x: np.ndarray, y: np.ndarray, mask: np.ndarray, *, hidden_size: int, n_hidden: int,
            loss: str, lr: float, epochs: int, batch_size: int, weight_decay: float, seed: int):
    """Train an MLP on ``x -> y`` with a loss averaged over the cells where ``mask`` is True.

    Parameters
    ----------
    x : ndarray, shape (n, d)
    y : ndarray, shape (n, m)
        Targets; values where ``mask`` is False are ignored (may be NaN).
    mask : ndarray of bool, shape (n, m)
    hidden_size, n_hidden : int
        Architecture (``n_hidden = 0`` is a linear model).
    loss : {"bce", "mse"}
        ``"bce"``: binary cross-entropy on logits (targets in [0, 1]); ``"mse"``: squared error.
    lr, weight_decay : float
        Adam settings; the learning rate follows a cosine schedule to 0 over training.
    epochs, batch_size : int
        Passes over the data and rows per step (shuffled each epoch).
    seed : int
        Seeds initialisation and shuffling.

    Returns
    -------
    MLP
        The trained model in eval mode. An output column with no observed cell (an LLM never
        seen in training) gets zero weights and a bias below every target (logit -30 for
        ``"bce"``, the lowest observed target minus 1 for ``"mse"``), so it ranks last as in
        the other baselines instead of keeping its untrained output.
    """
    import torch
    if loss not in _LOSSES:
        raise ValueError(f"loss must be one of {_LOSSES}, got {loss!r}")
    for value, name, low in ((epochs, "epochs", 1), (batch_size, "batch_size", 1),
                             (hidden_size, "hidden_size", 1), (n_hidden, "n_hidden", 0)):
        check_number(value, name, low=low, integer=True)
    check_number(lr, "lr", low=0, low_open=True)
    check_number(weight_decay, "weight_decay", low=0)
    check_seed(seed)
    xt = torch.as_tensor(np.asarray(x, dtype=np.float32))
    mt = torch.as_tensor(np.asarray(mask, dtype=bool))
    yt = torch.as_tensor(np.where(mask, np.asarray(y, dtype=np.float32), 0.0).astype(np.float32))
    n = xt.shape[0]
    steps_per_epoch = (n + int(batch_size) - 1) // int(batch_size)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls: one thread is fastest and avoids oversubscription
    try:
        with torch.random.fork_rng(devices=[]):
            model = _train(xt, yt, mt, n, steps_per_epoch, hidden_size=hidden_size,
                           n_hidden=n_hidden, loss=loss, lr=lr, epochs=epochs,
                           batch_size=batch_size, weight_decay=weight_decay, seed=seed)
    finally:
        torch.set_num_threads(threads)
    unseen = ~np.asarray(mask, dtype=bool).any(axis=0)
    if unseen.any():
        seen = np.asarray(y, dtype=np.float64)[np.asarray(mask, dtype=bool)]
        low = -30.0 if loss == "bce" else (float(seen.min()) - 1.0 if seen.size else -1.0)
        last = model.net[-1]
        idx = torch.as_tensor(np.flatnonzero(unseen))
        with torch.no_grad():
            last.weight[idx] = 0.0
            last.bias[idx] = low
    model.eval()
    return model


def _train(xt, yt, mt, n, steps_per_epoch, *, hidden_size, n_hidden, loss, lr, epochs,
           batch_size, weight_decay, seed):
    import torch
    from torch.nn import functional as F
    torch.manual_seed(int(seed))
    model = build_mlp(xt.shape[1], yt.shape[1], hidden_size, n_hidden)
    gen = torch.Generator().manual_seed(int(seed))
    opt = torch.optim.Adam(model.parameters(), lr=float(lr), weight_decay=float(weight_decay))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, int(epochs) * steps_per_epoch))
    bs = int(batch_size)
    model.train()
    for _ in range(int(epochs)):
        perm = torch.randperm(n, generator=gen)
        for s in range(0, n, bs):
            b = perm[s:s + bs]
            out = model(xt[b])
            m = mt[b].to(out.dtype)
            if loss == "bce":
                cell = F.binary_cross_entropy_with_logits(out, yt[b], reduction="none")
            else:
                cell = (out - yt[b]) ** 2
            value = (cell * m).sum() / m.sum().clamp(min=1.0)
            opt.zero_grad()
            value.backward()
            opt.step()
            sched.step()
    return model


def predict_mlp(model, x: np.ndarray, *, sigmoid: bool, batch: int = 8192) -> np.ndarray:
    """Model outputs (sigmoid-ed when ``sigmoid``) as float64, shape (n, m)."""
    import torch
    xt = torch.as_tensor(np.asarray(x, dtype=np.float32))
    outs = []
    with torch.no_grad():
        for s in range(0, xt.shape[0], batch):
            o = model(xt[s:s + batch])
            outs.append(torch.sigmoid(o) if sigmoid else o)
    if not outs:
        return np.zeros((0, model.out_dim))
    return torch.cat(outs).numpy().astype(np.float64)
