"""Two-tower router with cold start for new LLMs.

References
----------
* Yi et al., "Sampling-Bias-Corrected Neural Modeling for Large Corpus Item
  Recommendations", RecSys 2019 (two-tower retrieval models).
* Volkovs et al., "DropoutNet: Addressing Cold Start in Recommender Systems", NeurIPS
  2017 (ID dropout so the item tower works from content features alone).
* Feng et al., "GraphRouter", ICLR 2025, and Li, "LLM Bandit" (2025): describing LLMs by
  text/price features so unseen LLMs can be routed to.

The query tower reads the text embedding; the LLM tower reads ``[ID embedding, description
embedding, log price, size]``. :meth:`TwoTowerRouter.add_llm_from_features` gives a new LLM a vector from
its features and, given a few of its records, refines only that vector.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from recsys_router.datamodules.routing_datamodule import N_LLM_NUMERIC_FEATURES, llm_feature_matrix
from recsys_router.hyperparams import check_width
from recsys_router.models.base.derive import for_module
from recsys_router.models.base.lightning_router import LightningRouter
from recsys_router.models.base.router_module import RouterModule
from recsys_router.models.components.two_tower import TwoTowerScorer
from recsys_router.models.losses import RoutingLoss
from recsys_router.data import RoutingData

__all__ = ["TwoTowerModule", "TwoTowerRouter", "add_llm_from_features"]


class TwoTowerModule(RouterModule):
    """LightningModule of the two-tower router.

    Parameters
    ----------
    n_llms, embed_dim : int
        Linked from the data module (the LLM feature width is ``embed_dim + 4``).
    dim, id_dim, query_hidden, llm_hidden, dropout, id_dropout
        See :class:`~recsys_router.models.components.two_tower.TwoTowerScorer`.
    loss : RoutingLoss or dict, optional
        Default listwise softmax cross-entropy.
    lr, weight_decay : float

    Example
    -------
    >>> TwoTowerModule(n_llms=3, embed_dim=8, dim=4)(torch.zeros(2, 8)).shape
    torch.Size([2, 3])
    """

    default_loss = "listwise"

    def __init__(self, n_llms: int, embed_dim: int, dim: int = 64, id_dim: int = 16,
                 query_hidden: Sequence[int] = (128,), llm_hidden: Sequence[int] = (64,),
                 dropout: float = 0.0, id_dropout: float = 0.3, loss: RoutingLoss | dict | None = None,
                 lr: float = 3e-3, weight_decay: float = 1e-5):
        super().__init__(n_llms, embed_dim, loss=loss, lr=lr, weight_decay=weight_decay)
        for value, name in ((dim, "dim"), (id_dim, "id_dim")):
            check_width(value, name)
        self.save_router_hyperparameters()
        self.net = TwoTowerScorer(n_llms, embed_dim, embed_dim + N_LLM_NUMERIC_FEATURES, dim=dim,
                                  id_dim=id_dim, query_hidden=tuple(query_hidden),
                                  llm_hidden=tuple(llm_hidden), dropout=dropout, id_dropout=id_dropout)

    def on_data(self, datamodule) -> None:
        self.net.set_llm_features(datamodule.llm_features)


def _new_llm_cost(router, name, records, mean_cost, input_price, output_price) -> float:
    """The new LLM's mean cost per query: ``mean_cost``, else its records' mean cost, else its
    price times the pool's cost/price ratio; NaN only for a router without known costs.

    Raises
    ------
    ValueError
        When the router predicts costs and none of these is known (as
        :meth:`Router.add_llm <recsys_router.router.Router.add_llm>` refuses).
    """
    if mean_cost is not None and not (np.isfinite(float(mean_cost)) and float(mean_cost) >= 0):
        raise ValueError(f"mean_cost must be a finite number >= 0, got {mean_cost!r}")
    mc = getattr(router, "mean_costs_", None)
    if mc is None:
        return float("nan")
    mc = np.asarray(mc, dtype=np.float64)
    est = np.nan if mean_cost is None else float(mean_cost)
    if mean_cost is None and records is not None and records.costs is not None:
        c = records.costs[:, records.llm_index([name])[0]]
        est = float(np.nanmean(c)) if np.isfinite(c).any() else np.nan
    if np.isnan(est) and input_price is not None:
        known = getattr(router, "llm_prices_", None)
        if known is not None:
            ratio = mc / np.asarray(known, np.float64)
            ratio = ratio[np.isfinite(ratio)]
            if ratio.size:
                est = float(np.median(ratio) * (input_price + output_price) / 2)
    if np.isnan(est) and np.isfinite(mc).any():
        raise ValueError(f"the router predicts costs, so {name!r} needs a mean_cost, records with "
                         "costs or a price (input_price / output_price, USD per 1M tokens, with "
                         "pool prices known)")
    return est


def add_llm_from_features(router: LightningRouter, name: str, *, description: str | None = None,
            input_price: float | None = None, output_price: float | None = None,
            size: float | None = None, records: RoutingData | None = None, steps: int = 200,
            lr: float = 0.05, l2: float = 1.0, mean_cost: float | None = None) -> LightningRouter:
    """Add a new LLM to a fitted two-tower router without retraining the rest.

    The new LLM's vector and bias come from the LLM tower fed with its features only
    (no ID embedding). With ``records``, only that vector and bias are then refined by
    minimising BCE on the records plus ``l2 * ||v - v0||^2`` (a pull towards the
    feature-based start); every other weight is frozen.

    Parameters
    ----------
    router : LightningRouter
        Fitted, with a :class:`TwoTowerScorer` as ``net_``.
    name : str
        New LLM name (must not be in the pool).
    description : str, optional
        Text description (default: the name).
    input_price, output_price : float, optional
        USD per 1M tokens (one is enough).
    size : float, optional
        Billions of parameters.
    records : RoutingData, optional
        A few queries with the new LLM's scores in a column named ``name``.
    steps, lr, l2 : refinement settings.
    mean_cost : float, optional
        Expected cost per query; default: the records' mean cost, else estimated from the
        price (cost/price ratio of the pool). A router that predicts costs refuses an LLM
        with none of these (ValueError), as :meth:`Router.add_llm` does.

    Returns
    -------
    LightningRouter
        The same router, now scoring ``name`` as its last LLM.
    """
    router._check_fitted()
    net = router.net_
    if not isinstance(net, TwoTowerScorer):
        raise TypeError(f"add_llm_from_features needs a two-tower router, got a {type(net).__name__} network")
    if name in router.llm_names_:
        raise ValueError(f"LLM {name!r} is already in the pool")
    if input_price is None and output_price is not None:
        input_price = output_price
    if output_price is None and input_price is not None:
        output_price = input_price
    est = _new_llm_cost(router, name, records, mean_cost, input_price, output_price)
    table = pd.DataFrame({"name": [name], "input_price": [np.nan if input_price is None else input_price],
                          "output_price": [np.nan if output_price is None else output_price],
                          "size": [np.nan if size is None else size], "description": [description]})
    feats, _ = llm_feature_matrix(table, router.encoder_, stats=router.llm_feature_stats_)
    with torch.no_grad():
        v0, b0 = net.llm_output(torch.as_tensor(feats))
    v0, b0 = v0[0].clone(), b0[0].clone()
    v, b = v0.clone(), b0.clone()
    if records is not None:
        y = records.scores[:, records.llm_index([name])[0]]
        ok = ~np.isnan(y)
        if not ok.any():
            raise ValueError(f"records have no observed score for {name!r}")
        with torch.no_grad():
            net.eval()
            q = net.query_tower(torch.as_tensor(router.encoder_.encode_data(records)[ok]))
        target = torch.as_tensor(y[ok], dtype=torch.float32)
        v.requires_grad_(True)
        b.requires_grad_(True)
        opt = torch.optim.Adam([v, b], lr=lr)
        for _ in range(int(steps)):
            opt.zero_grad()
            loss = F.binary_cross_entropy_with_logits(q @ v + b, target) + l2 * ((v - v0) ** 2).sum()
            loss.backward()
            opt.step()
    router._append_llm_row(torch.cat([v.detach(), b.detach().reshape(1), torch.zeros(1)]).double().numpy())
    router.llm_info_ = {**(getattr(router, "llm_info_", None) or {}),
                        name: {"origin": "onboarded", "method": "two-tower LLM features",
                               "n_probes": 0 if records is None else int(ok.sum())}}
    router.llm_names_ = list(router.llm_names_) + [name]
    if router.mean_costs_ is not None:
        router.mean_costs_ = np.append(np.asarray(router.mean_costs_, np.float64), est)
    if getattr(router, "llm_prices_", None) is not None:
        new_price = np.nan if input_price is None else (input_price + output_price) / 2
        router.llm_prices_ = np.append(np.asarray(router.llm_prices_, np.float64), new_price)
    return router


@for_module(TwoTowerModule)
class TwoTowerRouter(LightningRouter):
    """Two-tower router (registered as ``"two-tower"``); cold start from probes (:meth:`add_llm`)
    or from LLM features (:meth:`add_llm_from_features`).

    The generic :class:`~recsys_router.models.base.lightning_router.LightningRouter` with
    :class:`TwoTowerModule`; its hyperparameters and their defaults are TwoTowerModule's.

    Parameters
    ----------
    dim, id_dim, query_hidden, llm_hidden, dropout, id_dropout, lr, weight_decay
        See :class:`TwoTowerModule`.
    loss : {"listwise", "bce", "mse", "bpr", "utility"}
        Loss kind (listwise by default).
    wtp, temperature, ipw_clip, logit_adjust, entropy_weight
        Loss options.
    encoder, encoder_options, mode, batch_size, max_epochs, seed, accelerator, val_fraction, patience
        See :class:`~recsys_router.models.base.lightning_router.LightningRouter`.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(100, 3, 2, seed=0)
    >>> r = TwoTowerRouter(dim=4, max_epochs=1, encoder_options={"dim": 16}).fit(d)
    >>> r.add_llm_from_features("new", description="a small model", price=0.2).predict_scores(
    ...     RoutingData(d.queries, d.llm_names + ["new"], np.full((100, 4), np.nan))).shape
    (100, 4)
    """

    def add_llm_from_features(self, name: str, *, description: str | None = None,
                              price: float | None = None, size: float | None = None,
                              records: RoutingData | None = None, **options):
        """Add a new LLM from its features (and refine on a few records); see
        :func:`add_llm_from_features`.

        ``price`` is USD per 1M tokens (input and output alike); ``options`` go to
        :func:`add_llm_from_features` (``output_price``, ``steps``, ``lr``, ``l2``, ``mean_cost``).
        """
        return add_llm_from_features(self, name, description=description, input_price=price,
                                     size=size, records=records, **options)
