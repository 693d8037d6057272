"""Linear SVM router on query embeddings.

References
----------
- Hu et al., "RouterBench: A Benchmark for Multi-LLM Routing System", arXiv:2403.12031
  (2024): SVM router, one ``LinearSVR(random_state=1234)`` per LLM regressing its score on
  the query embedding (``routers/svm_router.py``) -- ``mode="regress"`` here.
- The classification form (``mode="classify"``, default) trains a one-vs-rest
  ``LinearSVC`` on the best LLM of each training query, as in the SVM routers of LLMRouter
  (Feng et al., "FusionFactory", arXiv:2507.10540).
"""

from __future__ import annotations

import warnings

import numpy as np

from recsys_router.hyperparams import check_number, check_seed
from recsys_router.router import Router
from recsys_router.state import Arr

from ._common import TextEmbeddingMixin, best_llm_labels, safe_llm_means, tie_cost_order

__all__ = ["SVMRouter"]

_MODES = ("classify", "regress")
_TIES = ("score", "cost")


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


class SVMRouter(TextEmbeddingMixin, Router):
    """Linear SVM router.

    ``mode="classify"``: label each training query with its best LLM (highest observed
    score, ties per ``tie_break``; queries with no observed score, or where every
    observed LLM scores the same, are skipped), fit a
    one-vs-rest ``LinearSVC`` and use its decision values as predicted scores. LLMs that
    are never the best get a score one below the query's lowest decision value.
    ``mode="regress"``: one ``LinearSVR`` per LLM on its observed scores (RouterBench).
    ``selection_probs`` is the softmax of the predicted scores.

    Parameters
    ----------
    C : float
        Regularisation (scikit-learn default 1.0, as in both references).
    mode : {"classify", "regress"}
        See above.
    tie_break : {"score", "cost"}
        Label among LLMs tied on a query (e.g. several correct ones): ``"score"`` takes the
        best mean train score (then the cheapest), ``"cost"`` the cheapest. ``"score"``
        gives markedly cleaner labels on binary data.
    max_iter : int
        Solver iterations, an integer >= 1 (scikit-learn default 1000). When liblinear
        stops at this limit before converging, fit warns (a ``ConvergenceWarning`` naming
        the router, the mode and ``max_iter``) instead of keeping quiet.
    seed : int
        ``random_state`` of the solver (RouterBench: 1234).
    encoder : str or Encoder
        Query encoder.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(80, 3, 2, seed=0)
    >>> SVMRouter().fit(d).selection_probs(d).sum(axis=1).round(6).tolist()[:2]
    [1.0, 1.0]
    """

    #: fitted numbers only: the linear models' coefficients (prediction is x @ coef.T + b)
    _state_ = {"llm_means_": Arr("float64", ("n_llms",)),
               "classes_": Arr("int64", ("n_classes",), optional=True, index_of="n_llms"),
               "svc_coef_": Arr("float64", ("n_rows", "dim"), optional=True),
               "svc_intercept_": Arr("float64", ("n_rows",), optional=True),
               "svr_coef_": Arr("float64", ("n_llms", "dim"), optional=True),
               "svr_intercept_": Arr("float64", ("n_llms",), optional=True),
               "svr_fitted_": Arr("bool", ("n_llms",), optional=True)}

    def __init__(self, C: float = 1.0, mode: str = "classify", tie_break: str = "score",
                 max_iter: int = 1000, seed: int = 1234, encoder="hashing"):
        self.C = C
        self.mode = mode
        self.tie_break = tie_break
        self.max_iter = max_iter
        self.seed = seed
        self.encoder = encoder

    def _freeze_params(self):
        if self.mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {self.mode!r}")
        self.mode_ = self.mode  # fixed at fit: set_params cannot change it

    def _fit(self, train, val):
        from sklearn.exceptions import ConvergenceWarning
        if self.tie_break not in _TIES:
            raise ValueError(f"tie_break must be one of {_TIES}, got {self.tie_break!r}")
        max_iter = check_number(self.max_iter, "max_iter", low=1, integer=True)
        seed = check_seed(self.seed)
        x = self._fit_encoder(train)
        self.llm_means_ = safe_llm_means(train.scores)
        self.classes_ = self.svc_coef_ = self.svc_intercept_ = None
        self.svr_coef_ = self.svr_intercept_ = self.svr_fitted_ = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self._fit_models(train, x, max_iter, seed)
        unconverged = 0
        for w in caught:  # liblinear's own message names neither the router nor the model
            if issubclass(w.category, ConvergenceWarning):
                unconverged += 1
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if unconverged:
            warnings.warn(f"SVMRouter(mode={self.mode!r}): liblinear stopped at max_iter="
                          f"{max_iter} before converging in {unconverged} of its fits; its "
                          "scores may be poor (raise max_iter, or scale the features)",
                          ConvergenceWarning, stacklevel=3)

    def _fit_models(self, train, x, max_iter: int, seed: int) -> None:
        """Fit the LinearSVC (classify) or the per-LLM LinearSVRs (regress)."""
        from sklearn.svm import LinearSVC, LinearSVR
        n_llms = train.n_llms
        if self.mode_ == "classify":
            labels = best_llm_labels(train.scores, self.mean_costs_, self._tie_rank(train))
            s = train.scores
            spread = np.nanmax(np.where(train.observed, s, -np.inf), axis=1) - \
                np.nanmin(np.where(train.observed, s, np.inf), axis=1)
            keep = (labels >= 0) & (spread > 0)  # all-equal queries carry no label signal
            if not keep.any():
                keep = labels >= 0
            if not keep.any():
                raise ValueError("SVM router: no training query has an observed score")
            self.classes_ = np.unique(labels[keep]).astype(np.int64)
            if len(self.classes_) > 1:
                svc = LinearSVC(C=float(self.C), max_iter=max_iter,
                                random_state=seed).fit(x[keep], labels[keep])
                self.svc_coef_ = np.asarray(svc.coef_, dtype=np.float64)
                self.svc_intercept_ = np.asarray(svc.intercept_, dtype=np.float64)
        else:
            self.svr_coef_ = np.zeros((n_llms, x.shape[1]))
            self.svr_intercept_ = np.zeros(n_llms)
            self.svr_fitted_ = np.zeros(n_llms, dtype=bool)
            for j in range(n_llms):
                ok = train.observed[:, j]
                if ok.sum() < 2:
                    continue
                m = LinearSVR(C=float(self.C), max_iter=max_iter,
                              random_state=seed).fit(
                                  x[ok], train.scores[ok, j].astype(np.float64))
                self.svr_coef_[j] = np.ravel(m.coef_)
                self.svr_intercept_[j] = float(np.ravel(m.intercept_)[0])
                self.svr_fitted_[j] = True

    def _tie_rank(self, train) -> np.ndarray:
        """Order among LLMs tied on a query: cheapest first, or best train mean first."""
        n = train.n_llms
        cost = tie_cost_order(self.mean_costs_, n)
        if self.tie_break == "cost":
            return cost
        means = safe_llm_means(train.scores)
        order = np.lexsort((cost, -means))
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)
        return rank

    def _predict_scores(self, data):
        x = self._embed(data)
        n, n_llms = data.n_queries, data.n_llms
        if self.mode_ == "regress":
            pred = x @ self.svr_coef_.T + self.svr_intercept_[None, :]
            return np.where(self.svr_fitted_[None, :], pred, self.llm_means_[None, :])
        if self.svc_coef_ is None:
            out = np.zeros((n, n_llms))
            out[:, self.classes_[0]] = 1.0
            return out
        dec = x @ self.svc_coef_.T + self.svc_intercept_[None, :]
        if dec.shape[1] == 1:  # two classes: positive = classes_[1]
            dec = dec[:, 0]
            dec = np.stack([-dec, dec], axis=1)
        out = np.empty((n, n_llms))
        out[:] = (dec.min(axis=1) - 1.0)[:, None]
        out[:, self.classes_] = dec
        return out

    def _selection_probs(self, data):
        """Softmax of the predicted scores over LLMs."""
        return _softmax(self.predict_scores(data))
