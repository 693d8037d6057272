"""Any CF router trained on logged feedback (one revealed LLM per query) with a debiasing loss.

References
----------
* Schnabel, Swaminathan, Singh, Chandak & Joachims, "Recommendations as Treatments:
  Debiasing Learning and Evaluation", ICML 2016: inverse-propensity (IPS) and
  self-normalised (SNIPS) training on missing-not-at-random feedback.
* Wang, Zhang, Sun & Qi, "Doubly Robust Joint Learning for Recommendation on Data Missing
  Not at Random", ICML 2019: the doubly robust (DR) loss.

Production reveals only the answer of the LLM the serving policy chose, with the
probability (propensity) it chose it. Training data here is such a log: the generic long
table with a ``propensity`` column, or :func:`recsys_router.feedback.logged.log_to_data` of
the decision log. Every collaborative-filtering router trains with the losses ``naive``
(logged cells as they are), ``ips`` (weights ``1 / max(p, clip)``), ``snips`` (those weights
self-normalised) or ``dr`` (doubly robust pseudo-targets for every cell), each router class
declaring them in ``feedback_losses``: the Lightning routers (mf, two-tower, mirt, nirt and
the graph router, in its own subgraph steps) through
:func:`~recsys_router.models.losses.logged_feedback_loss`; the implicit ALS / BPR routers
through their interaction matrix (:mod:`recsys_router.models.implicit_feedback` says what
each loss means there). Every other router trains ``naive`` only (it simply sees one observed
cell per query); asking it for another loss is an error listing which routers take which.
"""

from __future__ import annotations

import numpy as np

from recsys_router.data import RoutingData
from recsys_router.feedback.logged import FEEDBACK_LOSSES, check_logged
from recsys_router.hyperparams import check_seed
from recsys_router.router import Router

from .inner_state import InnerRouterState

__all__ = ["LoggedFeedbackRouter", "feedback_loss_table"]


def feedback_loss_table() -> str:
    """Which registered routers train with which logged-feedback losses (from the registry:
    each router class's ``feedback_losses``).

    Example
    -------
    >>> "als" in feedback_loss_table() and "naive only:" in feedback_loss_table()
    True
    """
    from recsys_router.registry import ROUTERS  # noqa: PLC0415
    groups: dict[tuple, list[str]] = {}
    for name, _ in ROUTERS.items():
        if name == "logged":
            continue
        try:
            cls = ROUTERS.get(name)
        except Exception:  # noqa: BLE001 - an optional backend missing: not listed
            continue
        losses = tuple(getattr(cls, "feedback_losses", ("naive",)))
        groups.setdefault(losses, []).append(name)
    parts = [f"{', '.join(k) if k != ('naive',) else 'naive only'}: {', '.join(sorted(v))}"
             for k, v in sorted(groups.items(), key=lambda kv: -len(kv[0]))]
    return "Logged-feedback losses by router: " + "; ".join(parts)


class LoggedFeedbackRouter(InnerRouterState, Router):
    """A registry router trained on logged feedback (registered as ``"logged"``).

    Parameters
    ----------
    router : str
        Registry name of the wrapped router (``mf``, ``two-tower``, ``mirt``, ``nirt``,
        ``graph``, ``als``, ``bpr``...).
    params : dict, optional
        Its hyperparameters (its loss ``kind`` must be ``bce`` or ``mse``; when ``params``
        sets no loss, a router whose default loss is another kind trains with ``bce``; when
        it sets no ``val_fraction``, early stopping is off: held-out mu_o needs every LLM's
        score of a held-out query, and a log reveals one).
    loss : {"naive", "ips", "snips", "dr"}
        Logged-feedback loss.
    propensity_clip : float
        Propensities below this count as this (weights at most ``1 / clip``).
    encoder : str, optional
        Encoder of the wrapped router (unless ``params`` sets it).
    seed : int

    Attributes
    ----------
    router_ : Router
        The fitted wrapped router.

    Example
    -------
    >>> from recsys_router.registry import make_router
    >>> make_router("logged", router="mf", loss="ips").loss
    'ips'
    """

    uses_text = True
    #: trains on logged feedback (one revealed LLM per query), not on a full matrix
    needs_logged_feedback = True

    def __init__(self, router: str = "mf", params: dict | None = None, loss: str = "dr",
                 propensity_clip: float = 0.05, encoder: str | None = None, seed: int = 0):
        self.router = router
        self.params = params
        self.loss = loss
        self.propensity_clip = propensity_clip
        self.encoder = encoder
        self.seed = seed

    def _fit(self, train: RoutingData, val: RoutingData | None) -> None:
        from recsys_router.models.base.lightning_router import LightningRouter
        from recsys_router.router_spec import resolve_router  # noqa: PLC0415 (imports models)
        if self.loss not in FEEDBACK_LOSSES:
            raise ValueError(f"loss must be one of {FEEDBACK_LOSSES}, got {self.loss!r}")
        if not 0 < float(self.propensity_clip) <= 1:
            raise ValueError(f"propensity_clip must be in (0, 1], got {self.propensity_clip!r}")
        check_seed(self.seed)
        check_logged(train, need_propensity=self.loss != "naive")
        inner = resolve_router(self.router, self.params, encoder=self.encoder, seed=self.seed)[0]
        accepted = tuple(getattr(inner, "feedback_losses", ("naive",)))
        if self.loss not in accepted:
            raise ValueError(f"loss {self.loss!r} needs a collaborative-filtering router; "
                             f"{self.router!r} trains only with {', '.join(accepted)}. "
                             f"{feedback_loss_table()}")
        if isinstance(inner, LightningRouter):
            self._prepare_lightning(inner)
        if accepted == ("naive",):
            inner.fit(train, val)  # sees the log as it is
        else:
            inner._feedback = {"feedback": self.loss, "propensity_clip": float(self.propensity_clip)}
            try:
                inner.fit(train, val)
            finally:
                del inner._feedback
        self.router_ = inner

    def _prepare_lightning(self, inner) -> None:
        """Pointwise loss kind and no early stopping for a wrapped Lightning router."""
        loss = inner.module_kwargs().get("loss")
        kind = loss.kind if loss is not None else inner.module_class().default_loss
        if kind not in ("bce", "mse") and "loss" not in (self.params or {}):
            inner.set_params(loss="bce")  # e.g. two-tower's default listwise loss
        elif kind not in ("bce", "mse"):
            raise ValueError(f"{self.router}: logged-feedback training needs loss 'bce' or "
                             f"'mse', got {kind!r}")
        if "val_fraction" not in (self.params or {}) and "val_fraction" in inner.get_params():
            # early stopping ranks epochs by held-out mu_o, which needs every LLM's score of
            # a held-out query: a log reveals one, so it would pick epochs by noise
            inner.set_params(val_fraction=0.0)

    def _predict_scores(self, data: RoutingData) -> np.ndarray:
        return np.asarray(self.router_.predict_scores(data), dtype=np.float64)

    def _predict_costs(self, data: RoutingData) -> np.ndarray:
        """The wrapped router's predicted costs (the base class adds LLMs added later)."""
        return np.asarray(self.router_.predict_costs(data), dtype=np.float64)
