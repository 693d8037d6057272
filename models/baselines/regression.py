"""Embedding -> score predictors: LinearR, MLPR (regression) and MLC (multi-label).

References
----------
Huang et al., "RouterEval", arXiv:2503.10657 (2025), baselines ``router/MLPR_LinearR``
and ``router/RoBERTa-MLC``:

- LinearR: a linear map from the query embedding to every LLM's score. RouterEval
  (``router/MLPR_LinearR/train.py``) trains it with ``BCEWithLogitsLoss`` and Adam, i.e. a
  per-LLM logistic regression on the 0/1 scores. The default here, ``loss="squared"``, is a
  *different* model: one ridge (squared-error) regression per LLM, fitted in closed form
  (the package's quoted ``linearr`` results use it). ``loss="logistic"`` is RouterEval's
  form, fitted to convergence by full-batch L-BFGS with the same ridge penalty instead of a
  few Adam epochs.
- MLPR: ``Linear-ReLU-Linear-ReLU-Linear`` with hidden width 256, binary cross-entropy on
  logits, Adam with a cosine learning-rate schedule, 100 epochs (``test_router.py``).
  RouterEval steps on single queries at lr 1e-4; the defaults here use batches of 64 at
  lr 1e-3 to keep CPU training fast (documented deviation; both are parameters).
- MLC: a multi-label classifier trained with BCE on RouterEval selection vectors
  (LLM correct / within ``ratio`` of the best). RouterEval fine-tunes RoBERTa-base with a
  one-hidden-layer head for 10 epochs, batch 10, weight decay 0.01; here the head (hidden
  256) is trained on the configured encoder's embeddings with those epoch/batch/decay
  settings.

Unobserved (NaN) scores are masked out of every loss.
"""

from __future__ import annotations

import numpy as np

from recsys_router.errors import DataValidationError
from recsys_router.hyperparams import check_number
from recsys_router.router import Router
from recsys_router.state import INT, STR, Arr, Part, StateError, check_state

from ._common import TextEmbeddingMixin, safe_llm_means
from ._logistic import fit_logistic, logit
from ._torch import build_mlp, fit_mlp, predict_mlp

__all__ = ["LinearRRouter", "MLPRRouter", "MLCRouter"]


def _standardiser(x: np.ndarray, on: bool) -> tuple[np.ndarray, np.ndarray]:
    if not on:
        return np.zeros(x.shape[1]), np.ones(x.shape[1])
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    return mu, np.where(sd > 1e-8, sd, 1.0)


_LINEAR_LOSSES = ("squared", "logistic")
class LinearRRouter(TextEmbeddingMixin, Router):
    """LinearR: a linear map per LLM from the query embedding to its score.

    ``loss="squared"`` (default): ridge regression in closed form. Fully observed LLMs share
    one multi-output solve; the others are fitted on their own observed rows. This is not
    RouterEval's training loss (see the module docstring); the README's ``linearr`` numbers
    use it. ``loss="logistic"``: RouterEval's form, a logistic regression per LLM (BCE on
    logits) on scores in [0, 1], fitted by :func:`fit_logistic`; predicted scores are the
    sigmoid probabilities. An LLM with fewer than two observed scores, or (logistic) whose
    observed scores are all 0 or all 1, predicts its mean score.

    Parameters
    ----------
    alpha : float
        L2 penalty on the weights (not the intercept): ``alpha * ||w||^2`` added to the summed
        squared errors (scikit-learn ``Ridge``), or ``alpha / 2 * ||w||^2`` added to the summed
        BCE (``LogisticRegression(C=1/alpha)``; each is the negative log-likelihood plus
        ``alpha / 2 * ||w||^2``). The logistic form needs ``alpha > 0``.
    encoder : str or Encoder
        Query encoder.
    loss : {"squared", "logistic"}
        See above.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(80, 3, 2, seed=0)
    >>> LinearRRouter().fit(d).predict_scores(d).shape
    (80, 3)
    """

    cheap_fit = True      # fits in seconds: the safe fallback's 5 inner folds
    _state_ = {"coef_": Arr("float64", ("n_llms", "dim")), "intercept_": Arr("float64", ("n_llms",))}

    def __init__(self, alpha: float = 1.0, encoder="hashing", loss: str = "squared"):
        self.alpha = alpha
        self.encoder = encoder
        self.loss = loss

    @classmethod
    def _check_stored_params(cls, params: dict, where: str) -> None:
        if params.get("loss", "squared") not in _LINEAR_LOSSES:
            raise StateError(f"{where}.params.loss: {str(params.get('loss'))[:40]!r}, expected "
                             f"one of {list(_LINEAR_LOSSES)}")

    @classmethod
    def _from_state(cls, params, fields, arrays):
        router = super()._from_state(params, fields, arrays)
        router._check_embedding_dim(router.coef_.shape[1], "coef_")
        router._sigmoid = router.loss == "logistic"
        return router

    def _fit(self, train, val):
        if self.loss not in _LINEAR_LOSSES:
            raise ValueError(f"loss must be one of {_LINEAR_LOSSES}, got {self.loss!r}")
        if self.loss == "logistic":
            self._fit_logistic(train)
        else:
            self._fit_squared(train)
        self._sigmoid = self.loss == "logistic"  # fixed at fit: set_params cannot change it

    def _fit_logistic(self, train):
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        alpha = check_number(self.alpha, "alpha", low=0, low_open=True)
        obs = train.observed
        y = train.scores.astype(np.float64)
        v = y[obs]
        if v.size and (v.min() < 0 or v.max() > 1):
            raise DataValidationError(
                f"LinearR with loss='logistic' needs scores in [0, 1] but {train.name!r} has scores "
                f"in [{v.min():g}, {v.max():g}]; use loss='squared'", source=train.source,
                column="score")
        x = self._fit_encoder(train)
        means = safe_llm_means(train.scores)
        seen = obs.any(axis=0)
        logits = logit(means)
        if seen.any():  # never-observed LLMs rank last, as in the squared form
            logits = np.where(seen, logits, logits[seen].min() - 1.0)
        self.coef_ = np.zeros((train.n_llms, x.shape[1]))
        self.intercept_ = logits
        lo = np.where(obs, y, np.inf).min(axis=0)
        hi = np.where(obs, y, -np.inf).max(axis=0)
        fit = np.flatnonzero((obs.sum(axis=0) >= 2) & (lo < 1) & (hi > 0))
        if len(fit):
            w, b, ok = fit_logistic(x, y[:, fit], obs[:, fit], alpha)
            self.coef_[fit], self.intercept_[fit] = w, b
            if not ok:
                warnings.warn("LinearRRouter(loss='logistic'): L-BFGS stopped before converging; "
                              "the fit may be poor (raise alpha)", ConvergenceWarning, stacklevel=4)

    def _fit_squared(self, train):
        from sklearn.linear_model import Ridge
        x = self._fit_encoder(train)
        obs = train.observed
        y = train.scores.astype(np.float64)
        n_llms = train.n_llms
        self.coef_ = np.zeros((n_llms, x.shape[1]))
        self.intercept_ = safe_llm_means(train.scores).copy()
        full = np.flatnonzero(obs.all(axis=0))
        if len(full):
            m = Ridge(alpha=float(self.alpha)).fit(x, y[:, full])
            self.coef_[full] = m.coef_.reshape(len(full), -1)
            self.intercept_[full] = m.intercept_
        for j in np.flatnonzero(~obs.all(axis=0)):
            ok = obs[:, j]
            if ok.sum() < 2:
                continue
            m = Ridge(alpha=float(self.alpha)).fit(x[ok], y[ok, j])
            self.coef_[j] = m.coef_
            self.intercept_[j] = m.intercept_

    def _predict_scores(self, data):
        z = self._embed(data) @ self.coef_.T + self.intercept_[None, :]
        return 0.5 * (1.0 + np.tanh(0.5 * z)) if self._sigmoid else z


class _MLPBase(TextEmbeddingMixin, Router):
    """Shared fit/predict of the torch MLP routers (targets and loss set by subclasses)."""

    #: the network is stored as its sizes (JSON) and ``state_dict`` arrays (``model_/...``)
    _state_ = {"x_mean_": Arr("float64", ("dim",)), "x_scale_": Arr("float64", ("dim",)),
               "loss_": STR, "model_": Part()}
    _NET = {"in_dim": INT, "out_dim": INT, "hidden_size": INT, "n_hidden": INT}

    def _get_state(self):
        import torch

        from recsys_router.state.nets import module_arrays
        fields, arrays = super()._get_state()
        lin = [m for m in self.model_.modules() if isinstance(m, torch.nn.Linear)]
        # sizes read off the fitted network, never off the parameters (set_params after fit
        # must not change what is stored): hidden width 0 for a linear model
        fields["model_"] = {"in_dim": int(lin[0].in_features), "out_dim": int(lin[-1].out_features),
                            "hidden_size": int(lin[0].out_features) if len(lin) > 1 else 0,
                            "n_hidden": len(lin) - 1}
        arrays.update({f"model_/{k}": v for k, v in module_arrays(self.model_).items()})
        return fields, arrays

    @classmethod
    def _from_state(cls, params, fields, arrays):
        from recsys_router.state.nets import load_module_arrays
        router = super()._from_state(params, fields, arrays)
        net = check_state(cls._NET, fields["model_"], {}, {}, "model_.")
        if not all(0 <= v <= 100_000 for v in net.values()) or net["n_hidden"] > 64 \
                or router.loss_ not in ("bce", "mse"):
            raise ValueError(f"{cls.__name__}: network sizes {net} or loss {router.loss_!r} "
                             "out of range")
        # the sizes that bind the state together: embedding width = network input width,
        # network output width = the fitted LLM columns, scales usable as divisors
        n_llms = len(router.core_llms_ or router.llm_names_)
        router._check_embedding_dim(len(router.x_mean_), "x_mean_")
        if net["in_dim"] != len(router.x_mean_) or net["out_dim"] != n_llms:
            raise StateError(f"model_: network of {net['in_dim']} inputs and {net['out_dim']} "
                             f"outputs, expected {len(router.x_mean_)} (x_mean_) and {n_llms} "
                             "(the LLM columns)")
        if not (router.x_scale_ > 0).all():
            raise StateError("x_scale_: feature scales must be > 0")
        router.model_ = load_module_arrays(
            lambda: build_mlp(net["in_dim"], net["out_dim"], net["hidden_size"], net["n_hidden"]),
            {k[len("model_/"):]: v for k, v in arrays.items() if k.startswith("model_/")},
            f"{cls.__name__}.model_")
        router.model_.eval()
        return router

    def _targets(self, train) -> tuple[np.ndarray, np.ndarray, str]:
        raise TypeError("subclasses define _targets")  # pragma: no cover

    def _fit(self, train, val):
        x = self._fit_encoder(train)
        y, mask, loss = self._targets(train)
        keep = mask.any(axis=1)
        if not keep.any():
            raise ValueError(f"{type(self).__name__}: no training query has an observed score")
        self.x_mean_, self.x_scale_ = _standardiser(x[keep], bool(self.standardize))
        self.loss_ = loss
        self.model_ = fit_mlp((x[keep] - self.x_mean_) / self.x_scale_, y[keep], mask[keep],
                              hidden_size=self.hidden_size, n_hidden=self.n_hidden, loss=loss,
                              lr=self.lr, epochs=self.epochs, batch_size=self.batch_size,
                              weight_decay=self.weight_decay, seed=self.seed)

    def _outputs(self, data) -> np.ndarray:
        """The network's raw outputs (logits for ``"bce"``), shape (n_queries, n_llms)."""
        self._check_fitted()
        self._check_llms(data)
        x = (self._embed(data) - self.x_mean_) / self.x_scale_
        return predict_mlp(self.model_, x, sigmoid=False)

    def _predict_scores(self, data):
        x = (self._embed(data) - self.x_mean_) / self.x_scale_
        return predict_mlp(self.model_, x, sigmoid=self.loss_ == "bce")


class MLPRRouter(_MLPBase):
    """MLPR (RouterEval): an MLP predicting every LLM's score from the query embedding.

    Parameters
    ----------
    hidden_size : int
        Hidden width (RouterEval: 256).
    n_hidden : int
        Hidden layers (RouterEval FNN: 2).
    loss : {"bce", "mse"}
        ``"bce"`` (RouterEval; scores must lie in [0, 1], predictions are sigmoid outputs)
        or ``"mse"`` for unbounded scores.
    lr, epochs, batch_size, weight_decay : float, int, int, float
        Adam + cosine schedule settings (RouterEval: 1e-4, 100, 1, 0).
    standardize : bool
        Standardise embedding features with train mean/std before the MLP. Off by default,
        as in RouterEval (raw embeddings); on RouterBench 0-shot with hashed features it
        overfits (mean test score 0.74 vs 0.88 without).
    seed : int
        Seed of initialisation and shuffling.
    encoder : str or Encoder
        Query encoder.
    """

    def __init__(self, hidden_size: int = 256, n_hidden: int = 2, loss: str = "bce",
                 lr: float = 1e-3, epochs: int = 100, batch_size: int = 64,
                 weight_decay: float = 0.0, standardize: bool = False, seed: int = 0,
                 encoder="hashing"):
        self.hidden_size = hidden_size
        self.n_hidden = n_hidden
        self.loss = loss
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.weight_decay = weight_decay
        self.standardize = standardize
        self.seed = seed
        self.encoder = encoder

    def _targets(self, train):
        mask = train.observed
        y = train.scores.astype(np.float64)
        if self.loss == "bce":
            v = y[mask]
            if v.size and (v.min() < 0 or v.max() > 1):
                raise DataValidationError(
                    f"MLPR with loss='bce' needs scores in [0, 1] but {train.name!r} has scores in "
                    f"[{v.min():g}, {v.max():g}]; use loss='mse'", source=train.source, column="score")
        return y, mask, self.loss

    def _selection_probs(self, data):
        """Softmax of the network's raw outputs (RouterEval's routing distribution for MLPR,
        ``train.py``): the logits with ``loss="bce"``, not the sigmoid scores, whose softmax
        would sit near uniform."""
        z = self._outputs(data)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)


class MLCRouter(_MLPBase):
    """MLC (RouterEval): multi-label classifier of which LLMs get a query right.

    Targets are :meth:`RoutingData.selection_vectors` (1 = correct, or within ``ratio`` of
    the query's best score for continuous scores); unobserved cells are masked out.
    Predicted scores are the sigmoid probabilities; ``selection_probs`` is RouterEval's
    ``max(logit, 0)`` normalised per query (uniform where every logit is <= 0).

    Parameters
    ----------
    ratio : float
        Selection-vector ratio for continuous scores (RouterEval: 0.95).
    hidden_size, n_hidden : int
        Classification head (RouterEval's RoBERTa head: one hidden layer).
    lr, epochs, batch_size, weight_decay : float, int, int, float
        Adam + cosine schedule (RouterEval: 10 epochs, batch 10, weight decay 0.01).
    standardize : bool
        Standardise embedding features with train mean/std.
    seed : int
        Seed.
    encoder : str or Encoder
        Query encoder.
    """

    def __init__(self, ratio: float = 0.95, hidden_size: int = 256, n_hidden: int = 1,
                 lr: float = 1e-3, epochs: int = 10, batch_size: int = 10,
                 weight_decay: float = 0.01, standardize: bool = False, seed: int = 0,
                 encoder="hashing"):
        self.ratio = ratio
        self.hidden_size = hidden_size
        self.n_hidden = n_hidden
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.weight_decay = weight_decay
        self.standardize = standardize
        self.seed = seed
        self.encoder = encoder

    def _targets(self, train):
        return train.selection_vectors(float(self.ratio)).astype(np.float64), train.observed, "bce"

    def _selection_probs(self, data):
        """RouterEval's MLC distribution (``roberta_MLC.py``): the positive parts of the
        logits, ``max(z, 0)``, normalised to sum to one per query. A query whose logits are
        all <= 0 (no LLM predicted more likely right than wrong) gets the uniform
        distribution, where RouterEval's division would give NaN."""
        p = np.maximum(self._outputs(data), 0.0)
        tot = p.sum(axis=1, keepdims=True)
        return np.where(tot > 0, p / np.where(tot > 0, tot, 1.0), 1.0 / p.shape[1])
