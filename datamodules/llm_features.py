"""LLM side features of the routing data modules: each LLM's description embedding and its
standardised log price and log size, with missing-value flags.

Used by :class:`~recsys_router.datamodules.routing_datamodule.RoutingDataModule` (the
features of the training pool) and by the routers that featurise an onboarded LLM exactly
like that pool (the two-tower and graph routers); re-exported by
:mod:`recsys_router.datamodules.routing_datamodule`, their public path.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["N_LLM_NUMERIC_FEATURES", "llm_feature_matrix"]

#: numeric LLM features after the description embedding: z(log price), price missing,
#: z(log1p size), size missing
N_LLM_NUMERIC_FEATURES = 4


def llm_feature_matrix(llms: pd.DataFrame, encoder, stats: dict | None = None):
    """LLM side features: ``[description embedding, z(log price), price missing, z(log1p size),
    size missing]``.

    Parameters
    ----------
    llms : DataFrame
        Columns ``name``, ``input_price``, ``output_price``, ``size``, ``description``.
    encoder : Encoder
        The query encoder (descriptions live in the same space as queries); an encoder that
        does not read text (``needs_text = False``) gives zero description vectors.
    stats : dict, optional
        Standardisation statistics from an earlier call (to featurise a new LLM exactly like
        the training pool); computed from ``llms`` when None.

    Returns
    -------
    features : ndarray float32, shape (n_llms, encoder.dim + 4)
    stats : dict
        ``{"price_mean", "price_std", "size_mean", "size_std"}``.

    Example
    -------
    >>> from recsys_router.encoders import get_encoder
    >>> t = pd.DataFrame({"name": ["a", "b"], "input_price": [1.0, 10.0], "output_price": [1.0, 10.0],
    ...                   "size": [7.0, None], "description": ["small", "large"]})
    >>> f, s = llm_feature_matrix(t, get_encoder("hashing", dim=8))
    >>> f.shape, f[:, -1].tolist()
    ((2, 12), [0.0, 1.0])
    """
    names = llms["name"].astype(str).tolist()
    desc = [d if isinstance(d, str) and d.strip() else n
            for d, n in zip(llms["description"].tolist(), names)]
    if getattr(encoder, "needs_text", True):
        emb = encoder.encode(desc)
    else:
        emb = np.zeros((len(names), encoder.dim), np.float32)
    price = llms[["input_price", "output_price"]].to_numpy(dtype=float)
    n_known = (~np.isnan(price)).sum(axis=1)
    p = np.divide(np.nansum(price, axis=1), n_known, out=np.full(len(price), np.nan),
                  where=n_known > 0)
    logp = np.log(p + 1e-3)
    logs = np.log1p(llms["size"].to_numpy(dtype=float))
    if stats is None:
        stats = {}
        for key, v in (("price", logp), ("size", logs)):
            ok = v[~np.isnan(v)]
            stats[f"{key}_mean"] = float(ok.mean()) if ok.size else 0.0
            sd = float(ok.std()) if ok.size else 0.0
            stats[f"{key}_std"] = sd if sd > 1e-9 else 1.0
    cols = []
    for key, v in (("price", logp), ("size", logs)):
        miss = np.isnan(v)
        z = np.where(miss, 0.0, (v - stats[f"{key}_mean"]) / stats[f"{key}_std"])
        cols += [z, miss.astype(float)]
    feats = np.hstack([emb.astype(np.float32), np.stack(cols, axis=1).astype(np.float32)])
    return feats, stats
