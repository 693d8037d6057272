"""Training losses of the collaborative-filtering routers, selectable in config.

References
----------
* Pointwise BCE / MSE: the usual rating-prediction objectives (EmbedLLM, Zhuang et al. 2024).
* Listwise softmax cross-entropy: Cao et al., "Learning to Rank: From Pairwise Approach to
  Listwise Approach" (ListNet), ICML 2007; targets are RouterEval selection vectors.
* Pairwise BPR / Bradley-Terry: Rendle et al., "BPR", UAI 2009; RouteLLM (Ong et al. 2024).
* Cost-aware utility ``lambda * score - cost``: RouterBench's willingness to pay
  (Hu et al. 2024).
* Popularity re-weighting (``ipw_clip``): each LLM's positives weighted by the inverse of its
  share of train positives, in the spirit of Saito et al., WSDM 2020. This is NOT a logging
  propensity (no policy chose the cells of a benchmark matrix); for logged feedback with real
  logging propensities use :func:`logged_feedback_loss` (``ips``/``snips``/``dr``, data from
  :mod:`recsys_router.feedback.logged`).
* Logged-feedback losses: Schnabel et al., "Recommendations as Treatments", ICML 2016 (IPS,
  SNIPS); Wang et al., "Doubly Robust Joint Learning for Recommendation on Data Missing Not
  at Random", ICML 2019 (DR).
* Logit adjustment: Menon et al., "Long-tail learning via logit adjustment", ICLR 2021.
* Selection-entropy regulariser: against the collapse RouterEval measures with ``E_p``.

All functions take logits (pre-sigmoid scores) and boolean masks of observed cells, so
unobserved (NaN) cells never reach a loss. :class:`RoutingLoss` combines them. The functions
live in :mod:`recsys_router.models.loss_functions` and are re-exported here.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

from recsys_router.hyperparams import check_number
from recsys_router.errors import ArgumentValueError
# the loss terms live in loss_functions; re-exported here (their public path) and looked up
# as this module's names by RoutingLoss
from recsys_router.models.loss_functions import (listwise_softmax_ce, logged_feedback_loss,
                                                 pairs_from_lists, pairwise_bpr,
                                                 pointwise_bce, pointwise_mse,
                                                 popularity_weights, soft_selection_entropy,
                                                 utility_selection)

__all__ = ["LOSS_KINDS", "LAYOUT_LOSS_KINDS", "RoutingLoss", "default_mode", "pointwise_bce", "pointwise_mse", "listwise_softmax_ce",
           "pairwise_bpr", "pairs_from_lists", "utility_selection", "popularity_weights",
           "soft_selection_entropy", "logged_feedback_loss"]

LOSS_KINDS = ("bce", "mse", "listwise", "bpr", "utility")
_DEFAULT_MODES = {"bce": "pointwise", "mse": "pointwise", "listwise": "listwise",
                  "utility": "listwise", "bpr": "pairwise"}
#: the loss kinds :meth:`RoutingLoss.forward` trains on each training-batch layout (a data
#: module's ``mode``, or ``logged`` for logged feedback); any other kind raises there
LAYOUT_LOSS_KINDS = {"pointwise": ("bce", "mse"), "pairwise": ("bpr",), "listwise": LOSS_KINDS,
                     "logged": ("bce", "mse")}


def default_mode(kind: str) -> str:
    """The training-batch layout that suits a loss kind.

    Example
    -------
    >>> default_mode("bpr")
    'pairwise'
    """
    if kind not in _DEFAULT_MODES:
        raise ArgumentValueError(f"loss kind must be one of {LOSS_KINDS}, got {kind!r}")
    return _DEFAULT_MODES[kind]


class RoutingLoss(nn.Module):
    """One configurable training objective (pick ``kind``, add debiasing terms).

    Parameters
    ----------
    kind : {"bce", "mse", "listwise", "bpr", "utility"}
        ``bce`` pointwise BCE (0/1 or soft labels); ``mse`` squared error of
        ``sigmoid(logit)``; ``listwise`` softmax cross-entropy against selection vectors;
        ``bpr`` pairwise BPR (better vs worse LLM of a query, or battle winner vs loser);
        ``utility`` listwise cross-entropy against the LLM(s) maximising
        ``wtp * score - cost`` (a router trained so should be used with the argmax policy).
    wtp : float
        The willingness to pay lambda of ``utility``.
    temperature : float
        Softness of the ``utility`` target (0 = hard argmax).
    selection_ratio : float
        Continuous scores: an LLM is "selected" (positive) when its score is at least this
        fraction of the query's best (RouterEval's selection vector); in (0, 1].
    ipw_clip : float, optional
        Popularity re-weighting of positives by the inverse of each LLM's share of train
        positives, clipped at this maximum weight, a finite number >= 1 (None = off; refused
        with ``mse``, which has
        no positives to weight). Not a logging propensity:
        logged-feedback batches (key ``w``) use :func:`logged_feedback_loss` instead.
    logit_adjust : float
        ``tau`` of logit adjustment: training logits get ``+ tau * log prior_j`` (prior = the
        LLM's share of positives), so the learned logits are prior-free (0 = off); finite.
    entropy_weight : float
        Weight ``beta`` of the batch selection-entropy bonus: ``loss - beta * H`` (0 = off).

    Example
    -------
    >>> loss = RoutingLoss("listwise", entropy_weight=0.1)
    >>> batch = {"y": torch.tensor([[1.0, 0.0]]), "mask": torch.ones(1, 2, dtype=torch.bool),
    ...          "sel": torch.tensor([[1.0, 0.0]])}
    >>> float(loss({"logits": torch.zeros(1, 2)}, batch)) < 0.6931
    True
    """

    def __init__(self, kind: str = "bce", wtp: float = 1.0, temperature: float = 0.0,
                 selection_ratio: float = 0.95, ipw_clip: float | None = None,
                 logit_adjust: float = 0.0, entropy_weight: float = 0.0):
        super().__init__()
        if kind not in LOSS_KINDS:
            raise ArgumentValueError(f"loss kind must be one of {LOSS_KINDS}, got {kind!r}")
        ipw_clip = check_number(ipw_clip, "ipw_clip", low=1, none=True)
        if ipw_clip is not None and kind == "mse":
            raise ArgumentValueError("ipw_clip re-weights each LLM's positives, which the 'mse' "
                                     "loss does not have (it would be ignored); use it with bce, "
                                     "listwise, utility or bpr, or set ipw_clip to None")
        self.kind = kind
        self.wtp = check_number(wtp, "wtp", low=0)
        self.temperature = check_number(temperature, "temperature", low=0)
        # the share of the best score that selects an LLM (data.selection_vectors: (0, 1])
        self.selection_ratio = check_number(selection_ratio, "selection_ratio", low=0, high=1,
                                            low_open=True)
        self.ipw_clip = ipw_clip
        self.logit_adjust = check_number(logit_adjust, "logit_adjust")
        self.entropy_weight = check_number(entropy_weight, "entropy_weight", low=0)
        self.register_buffer("positives", torch.zeros(0), persistent=False)

    @property
    def needs_all_logits(self) -> bool:
        """Whether cell/pair batches must also provide every LLM's logits (entropy term)."""
        return self.entropy_weight > 0

    #: the class paths a loss configuration may name (compared as text, never imported)
    CLASS_PATHS = ("recsys_router.models.losses.RoutingLoss", "models.losses.RoutingLoss",
                   "RoutingLoss")

    def config(self) -> dict:
        """The constructor arguments, as plain data (checkpoint hyperparameters, exports).

        Example
        -------
        >>> RoutingLoss("listwise", entropy_weight=0.1).config()["kind"]
        'listwise'
        """
        return {"kind": self.kind, "wtp": self.wtp, "temperature": self.temperature,
                "selection_ratio": self.selection_ratio, "ipw_clip": self.ipw_clip,
                "logit_adjust": self.logit_adjust, "entropy_weight": self.entropy_weight}

    @classmethod
    def coerce(cls, loss, source: str = "loss") -> "RoutingLoss | None":
        """The one conversion of a module's ``loss`` argument: a :class:`RoutingLoss` as it
        is, None as None (the module's default), a mapping (a config's or a checkpoint's
        plain data) through :meth:`from_config`.

        Raises
        ------
        ValueError
            A bad configuration (see :meth:`from_config`), or anything else.

        Example
        -------
        >>> RoutingLoss.coerce({"kind": "bpr"}).kind, RoutingLoss.coerce(None)
        ('bpr', None)
        >>> RoutingLoss.coerce("bpr", "module loss")
        Traceback (most recent call last):
        ...
        ValueError: module loss: a loss is a RoutingLoss or its configuration (a mapping), got str
        """
        if loss is None or isinstance(loss, cls):
            return loss
        if isinstance(loss, dict):
            return cls.from_config(loss, source)
        raise ValueError(f"{source}: a loss is a RoutingLoss or its configuration (a mapping), "
                         f"got {type(loss).__name__}")

    @classmethod
    def from_config(cls, config: dict, source: str = "loss") -> "RoutingLoss":
        """Rebuild a loss from :meth:`config` or a YAML ``{class_path, init_args}`` block.

        Only :class:`RoutingLoss` is built: a ``class_path`` is compared with
        :attr:`CLASS_PATHS` as text, never imported, so a checkpoint or config cannot make
        loading import a name of its choosing.

        Parameters
        ----------
        config : dict
            Plain constructor arguments, or ``{"class_path": ..., "init_args": {...}}``.
        source : str
            Where the configuration came from (for the error message).

        Raises
        ------
        ValueError
            An unknown class path, an unknown argument or a value that is not plain data.

        Example
        -------
        >>> RoutingLoss.from_config({"kind": "bpr", "ipw_clip": 5.0}).config()["ipw_clip"]
        5.0
        >>> RoutingLoss.from_config({"class_path": "os.system", "init_args": {}})
        Traceback (most recent call last):
        ...
        ValueError: loss: class_path 'os.system' is not a known loss; expected one of ('recsys_router.models.losses.RoutingLoss', 'models.losses.RoutingLoss', 'RoutingLoss')
        """
        if not isinstance(config, dict):
            raise ValueError(f"{source}: a loss configuration is a mapping, got "
                             f"{type(config).__name__}")
        if "class_path" in config:
            if config["class_path"] not in cls.CLASS_PATHS:
                raise ValueError(f"{source}: class_path {config['class_path']!r} is not a known "
                                 f"loss; expected one of {cls.CLASS_PATHS}")
            config = config.get("init_args") or {}
            if not isinstance(config, dict):
                raise ValueError(f"{source}: init_args is not a mapping")
        known = set(inspect.signature(cls.__init__).parameters) - {"self"}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(f"{source}: unknown loss argument(s) {unknown}; known: {sorted(known)}")
        for key, value in config.items():
            if value is not None and not isinstance(value, (str, int, float)):
                raise ValueError(f"{source}: loss argument {key!r} is {type(value).__name__}, "
                                 "not a plain number or text")
        return cls(**config)

    def set_positives(self, positives) -> None:
        """Give the per-LLM count of train positives (prior for IPW and logit adjustment)."""
        self.positives = torch.as_tensor(positives, dtype=torch.float32,
                                         device=self.positives.device).clone()

    def _prior_terms(self, n_llms: int, device) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        if self.ipw_clip is None and self.logit_adjust == 0:
            return None, None
        if self.positives.numel() != n_llms:
            raise RuntimeError(f"the loss needs each LLM's train positives for IPW / logit "
                               f"adjustment ({n_llms} LLMs); got {self.positives.numel()} values: "
                               f"train through a RoutingDataModule or call set_positives()")
        pos = self.positives.to(device)
        w = popularity_weights(pos, self.ipw_clip) if self.ipw_clip is not None else None
        adj = None
        if self.logit_adjust:
            prior = (pos + 1.0) / (pos + 1.0).sum()
            adj = self.logit_adjust * torch.log(prior)
        return w, adj

    def forward(self, out: dict, batch: dict) -> torch.Tensor:
        """Loss of a batch.

        ``batch`` is a list batch (``y``, ``mask``, ``sel``, optional ``cost``), a cell batch
        (``llm``, ``y``) or a pair batch (``pos``, ``neg``, optional ``tie``); ``out`` holds
        ``logits`` ((B, L) for lists, (B,) for cells), or ``pos``/``neg`` logits for pairs,
        and ``all_logits`` (B, L) when :attr:`needs_all_logits`.
        """
        if "w" in batch:  # logged feedback (see logged_feedback_loss)
            loss = logged_feedback_loss(out["logits"], batch["y"].float(), batch["mask"],
                                        batch["w"], self.kind, "self_normalise" in batch)
        elif "pos" in batch:
            loss = self._pairs(out, batch)
        elif "llm" in batch:
            loss = self._cells(out, batch)
        else:
            loss = self._lists(out, batch)
        if self.entropy_weight > 0:
            all_logits = out["logits"] if out.get("logits") is not None and out["logits"].dim() == 2 \
                else out["all_logits"]
            loss = loss - self.entropy_weight * soft_selection_entropy(all_logits, batch.get("mask"))
        return loss

    def _cells(self, out, batch):
        logits, y, llm = out["logits"], batch["y"].float(), batch["llm"]
        n_llms = out["all_logits"].shape[1] if "all_logits" in out else int(self.positives.numel())
        w, adj = self._prior_terms(n_llms, logits.device)
        if adj is not None:
            logits = logits + adj[llm]
        if self.kind == "mse":
            return pointwise_mse(logits, y)
        if self.kind != "bce":
            raise ValueError(f"loss kind {self.kind!r} needs listwise or pairwise batches; the data "
                             f"module yields pointwise cells (set data mode to 'listwise')")
        pw = None if w is None else w[llm]
        return pointwise_bce(logits, y, pos_weight=pw)

    def _pairs(self, out, batch):
        if self.kind != "bpr":
            raise ValueError(f"pairwise batches need loss kind 'bpr', got {self.kind!r}")
        s_pos, s_neg, pos, neg = out["pos"], out["neg"], batch["pos"], batch["neg"]
        n_llms = out["all_logits"].shape[1] if "all_logits" in out else int(self.positives.numel())
        w, adj = self._prior_terms(n_llms, s_pos.device)
        if adj is not None:
            s_pos, s_neg = s_pos + adj[pos], s_neg + adj[neg]
        return pairwise_bpr(s_pos, s_neg, batch.get("tie"), None if w is None else w[pos])

    def _lists(self, out, batch):
        logits, y, mask = out["logits"], batch["y"].float(), batch["mask"]
        w, adj = self._prior_terms(logits.shape[1], logits.device)
        if adj is not None:
            logits = logits + adj
        if self.kind in ("bce", "mse"):
            m = mask.float()
            if self.kind == "mse":
                return pointwise_mse(logits, y, weight=m)
            pw = None if w is None else w.expand_as(logits)
            return pointwise_bce(logits, y * m, weight=m, pos_weight=pw)
        if self.kind == "listwise":
            return listwise_softmax_ce(logits, batch["sel"], mask, w)
        if self.kind == "utility":
            if batch.get("cost") is None:
                raise ValueError("loss kind 'utility' needs costs; this dataset has none")
            sel = utility_selection(y, batch["cost"].float(), mask, self.wtp, self.temperature)
            return listwise_softmax_ce(logits, sel, mask, w)
        trip = pairs_from_lists(y, mask)
        r, b, c = trip[:, 0], trip[:, 1], trip[:, 2]
        s_pos, s_neg = logits[r, b], logits[r, c]
        return pairwise_bpr(s_pos, s_neg, weight=None if w is None else w[b])
