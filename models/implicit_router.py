"""Implicit-feedback matrix factorisation routers: ALS and BPR (the ``implicit`` library).

References
----------
Hu, Koren & Volinsky, "Collaborative Filtering for Implicit Feedback Datasets", ICDM 2008 (ALS).
Rendle et al., "BPR: Bayesian Personalized Ranking from Implicit Feedback", UAI 2009 (BPR).
Frederickson, ``implicit`` (https://github.com/benfred/implicit), the solvers used here.

Queries are users and LLMs are items. How the interaction matrix is built
--------------------------------------------------------------------------
Train scores are first put on ``[0, 1]`` (min-max over the observed train cells; binary
scores are unchanged). A cell is *positive* when its scaled score ``s`` is > 0 and at least
the query's mean observed scaled score; for binary scores this is exactly "the LLM answered
correctly". The CSR matrix (queries x LLMs) stores positive cells with confidence
``1 + alpha * s``; every other cell (failures, below-average scores, unobserved) is left out,
i.e. preference 0 with confidence 1 for ALS and a candidate negative for BPR. (Storing *every*
observed cell as ``1 + alpha * s`` would mark failures as "liked" too and, on a dense
benchmark matrix, leave ALS nothing to separate.)

How a new query is scored
-------------------------
A new query has no row in the matrix, so its factor is folded in from its text embedding:

* ``fold_in="ridge"``: a ridge regression (closed form, with intercept) from train text
  embeddings (standardised) to the train queries' learned factors, applied to the new
  embedding. Its penalty ``ridge_alpha`` defaults to ``"auto"``: the value of
  :data:`~recsys_router.models.components.ridge.LOO_GRID` (``1e-2 ... 1e7``) with the lowest
  exact leave-one-out error of the predicted factors on the train queries (stored as
  ``ridge_alpha_``);
* ``fold_in="knn"``: the mean factor of the ``k`` train queries nearest by embedding cosine.

The raw prediction is ``query_factor . llm_factor``. With ``calibrate=True`` a per-LLM linear
fit ``score ~ w_j * raw + c_j`` (``w_j >= 0``) maps it to the score scale, fitted on the train
queries' *leave-one-out* folded-in factors (exact for the ridge; for kNN the query is left out
of its own neighbours), i.e. on what a new query gets: where the embedding predicts nothing,
``w_j`` is near 0 and the router falls back to each LLM's mean score. (With the former
in-sample calibration and ``ridge_alpha=100``, ``bpr`` was 0.048 mu_o below ``best-single`` on
cruxeval even with the safe fallback: benchmarks/README.md, "Why no CF router beats
task-best".) ``calibrate=False`` returns the raw dot product.

Logged feedback (the ``logged`` router): all four losses; what ``ips``, ``snips`` and ``dr``
mean for ALS and for BPR is in :mod:`recsys_router.models.implicit_feedback`.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np

from recsys_router.data import RoutingData
from recsys_router.errors import DataValidationError
from recsys_router.hyperparams import check_number, check_seed
from recsys_router.router import Router
from recsys_router.state import FLOAT, Arr, Opt, Part, StateError, TupleOf

from .components.implicit_data import encode_queries, gpu_available, interaction_matrix
from .components.item_prior import MAX_NOISE_VAR, MIN_NOISE_VAR, noise_variance
from .components.ridge import LOO_GRID, ridge, ridge_loo, unit_rows
from .implicit_coldstart import ImplicitColdStartMixin
from .implicit_feedback import logged_training
from .implicit_feedback import per_column_linear as _per_column_linear

__all__ = ["ImplicitRouter", "ALSRouter", "BPRRouter", "interaction_matrix", "encode_queries",
           "gpu_available"]

_FOLD_INS = ("ridge", "knn")


class ImplicitRouter(ImplicitColdStartMixin, Router):
    """Router from an ``implicit`` ALS or BPR factorisation plus a text fold-in.

    Parameters
    ----------
    model : {"als", "bpr"}
        Factorisation algorithm.
    factors : int
        Latent dimension.
    regularization : float
        L2 penalty of the factorisation.
    iterations : int
        ALS sweeps or BPR epochs.
    alpha : float
        Confidence slope: a positive cell weighs ``1 + alpha * s`` in ALS. ``implicit``'s BPR
        samples positives without weights, so for ``bpr`` it does not change training; there
        it only sets the confidence of an LLM added with ``add_llm``, whose factor is solved
        in closed form over its probes.
    learning_rate : float
        BPR step size (ignored by ALS).
    fold_in : {"ridge", "knn"}
        How a new query's factor is obtained from its text embedding.
    ridge_alpha : float or "auto"
        Ridge penalty of the embedding -> factor map (on standardised embeddings), or
        ``"auto"`` (default): chosen by exact leave-one-out error on the train queries.
    k : int
        Neighbours for the kNN fold-in.
    calibrate : bool
        Map raw dot products to the score scale with a per-LLM linear fit on train.
    encoder : str or encoder object
        Text encoder name for ``recsys_router.encoders.get_encoder``, or an object with
        ``encode(texts, query_ids=None)`` (and optionally ``fit``/``needs_fit``).
    encoder_kwargs : dict, optional
        Extra encoder arguments.
    use_gpu : bool
        Use ``implicit.gpu`` when CUDA is available; warns and uses the CPU otherwise.
    num_threads : int
        Solver threads (1 keeps BPR's SGD deterministic).
    seed : int
        Random state of the factorisation.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> parts = make_synthetic(300, 5, 4, seed=0).split((0.8, 0.2), seed=0)
    >>> r = ImplicitRouter("als", factors=8).fit(parts["train"])
    >>> r.route(parts["test"]).shape
    (60,)
    """

    cheap_fit = True      # fits in seconds: the safe fallback's 5 inner folds
    uses_text = True
    #: logged-feedback losses (``recsys_router.models.implicit_feedback``)
    feedback_losses = ("naive", "ips", "snips", "dr")
    #: fitted numbers (factors, fold-in map, calibration as rows w and c) and the encoder
    _state_ = {"score_range_": TupleOf(FLOAT, FLOAT),
               "query_factors_": Arr("float64", ("n_train", "factors")),
               "llm_factors_": Arr("float64", ("n_llms", "factors")),
               "emb_mean_": Arr("float64", ("dim",)), "emb_scale_": Arr("float64", ("dim",)),
               "ridge_coef_": Arr("float64", ("dim_plus_1", "factors")),
               "ridge_alpha_": Opt(FLOAT), "noise_var_": Opt(FLOAT),
               "train_unit_emb_": Arr("float64", ("n_train", "dim")),
               "calib_": Arr("float64", (2, "n_llms"), optional=True), "encoder_": Part()}

    def _get_state(self):
        from recsys_router.encoders.state import save_encoder_part
        fields, arrays = super()._get_state()
        if self.calib_ is not None:
            arrays["calib_"] = np.stack([np.asarray(v, np.float64) for v in self.calib_])
        info, enc_arrays = save_encoder_part("encoder_", self.encoder_)
        return {**fields, **info}, {**arrays, **enc_arrays}

    @classmethod
    def _check_state(cls, fields, headers, dims):
        # artifacts exported before the leave-one-out penalty carry no ``ridge_alpha_``;
        # they were fitted with a fixed ``ridge_alpha`` (restored in ``_from_state``)
        if isinstance(fields, dict) and "ridge_alpha_" not in fields:
            fields = {**fields, "ridge_alpha_": None}
        # nor, before the fold-in prior, ``noise_var_`` (then 1: ALS's own unit noise)
        if isinstance(fields, dict) and "noise_var_" not in fields:
            fields = {**fields, "noise_var_": None}
        checked = super()._check_state(fields, headers, dims)
        low, high = checked["score_range_"]
        # the clip of onboarded columns and the fold-in's score scale: a reversed range
        # pins every onboarded score to one value
        if not (np.isfinite(low) and np.isfinite(high) and low <= high):
            raise StateError(f"score_range_: expected finite [lowest, highest], got "
                             f"[{low!r}, {high!r}]")
        noise = checked["noise_var_"]
        # the fit keeps it in [MIN_NOISE_VAR, MAX_NOISE_VAR] (0/1 preferences' residuals)
        if noise is not None and not (np.isfinite(noise)
                                      and MIN_NOISE_VAR <= noise <= MAX_NOISE_VAR):
            raise StateError(f"noise_var_: {noise!r}, expected a finite variance in "
                             f"[{MIN_NOISE_VAR:g}, {MAX_NOISE_VAR:g}]")
        return checked

    @classmethod
    def _from_state(cls, params, fields, arrays):
        from recsys_router.encoders.state import load_encoder_part
        router = super()._from_state(params, fields, arrays)
        if router.ridge_alpha_ is None:
            fixed = params.get("ridge_alpha")
            router.ridge_alpha_ = float(fixed) if isinstance(fixed, (int, float)) else None
        if router.calib_ is not None:
            router.calib_ = (router.calib_[0].copy(), router.calib_[1].copy())
        if router.ridge_coef_.shape[0] != router.emb_mean_.shape[0] + 1:
            raise ValueError("ridge_coef_ must have one row per embedding dimension plus one")
        router.encoder_ = load_encoder_part("encoder_", fields, arrays, cls.__name__)
        return router

    def __init__(self, model: str = "als", factors: int = 16, regularization: float = 0.05,
                 iterations: int = 15, alpha: float = 10.0, learning_rate: float = 0.05,
                 fold_in: str = "ridge", ridge_alpha="auto", k: int = 10,
                 calibrate: bool = True, encoder: str = "hashing", encoder_kwargs: dict | None = None,
                 use_gpu: bool = False, num_threads: int = 1, seed: int = 0):
        self.model = model
        self.factors = factors
        self.regularization = regularization
        self.iterations = iterations
        self.alpha = alpha
        self.learning_rate = learning_rate
        self.fold_in = fold_in
        self.ridge_alpha = ridge_alpha
        self.k = k
        self.calibrate = calibrate
        self.encoder = encoder
        self.encoder_kwargs = encoder_kwargs
        self.use_gpu = use_gpu
        self.num_threads = num_threads
        self.seed = seed

    # ------------------------------------------------------------------ fitting
    def _freeze_params(self) -> None:
        """Fix what prediction and ``add_llm`` read: the fold-in (``fold_in_``), its
        neighbour count (``k_``) and the confidence slope of an added LLM's probes
        (``alpha_``); ``set_params`` after ``fit`` changes none of them until the next
        ``fit`` (a router loaded from an artifact gets them from its stored parameters)."""
        if self.fold_in not in _FOLD_INS:
            raise ValueError(f"fold_in must be one of {_FOLD_INS}, got {self.fold_in!r}")
        if int(self.k) < 1:
            raise ValueError(f"k must be >= 1, got {self.k!r}")
        if self.alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {self.alpha!r}")
        self.fold_in_, self.k_, self.alpha_ = self.fold_in, int(self.k), float(self.alpha)

    def _check_params(self) -> None:
        if self.model not in ("als", "bpr"):
            raise ValueError(f"model must be 'als' or 'bpr', got {self.model!r}")
        if int(self.factors) < 1 or int(self.iterations) < 1:
            raise ValueError("factors and iterations must be >= 1")
        if not (self.ridge_alpha == "auto" or (isinstance(self.ridge_alpha, (int, float))
                                               and np.isfinite(self.ridge_alpha)
                                               and self.ridge_alpha >= 0)):
            raise ValueError(f"ridge_alpha must be 'auto' or a finite number >= 0, "
                             f"got {self.ridge_alpha!r}")
        if self.regularization < 0:
            raise ValueError("regularization must be >= 0")
        check_seed(self.seed)
        if self.model == "bpr":
            check_number(self.learning_rate, "learning_rate", low=0, low_open=True)

    def _make_model(self):
        gpu = bool(self.use_gpu)
        if gpu and not gpu_available():
            warnings.warn("use_gpu=True but implicit has no CUDA backend here; using the CPU solver",
                          RuntimeWarning, stacklevel=3)
            gpu = False
        common = dict(factors=int(self.factors), regularization=float(self.regularization),
                      iterations=int(self.iterations), random_state=int(self.seed))
        if gpu:  # pragma: no cover - needs a CUDA build of implicit
            import implicit.gpu.als as gals  # noqa: PLC0415
            import implicit.gpu.bpr as gbpr  # noqa: PLC0415
            if self.model == "als":
                return gals.AlternatingLeastSquares(**common), True
            return gbpr.BayesianPersonalizedRanking(learning_rate=float(self.learning_rate),
                                                    **common), True
        from implicit.cpu.als import AlternatingLeastSquares  # noqa: PLC0415
        from implicit.cpu.bpr import BayesianPersonalizedRanking  # noqa: PLC0415
        if self.model == "als":
            return AlternatingLeastSquares(num_threads=int(self.num_threads), **common), False
        return BayesianPersonalizedRanking(learning_rate=float(self.learning_rate),
                                           num_threads=int(self.num_threads), **common), False

    def _fit(self, train: RoutingData, val: RoutingData | None) -> None:
        from recsys_router.encoders import get_encoder  # noqa: PLC0415 (optional heavy deps)

        self._check_params()
        if self.score_range_ is None:  # Router.fit set it: (min, max) of the observed scores
            raise DataValidationError("train data has no observed score", source=train.source)
        # text side first (the dr loss's reward model reads the embeddings)
        if isinstance(self.encoder, str):
            enc = get_encoder(self.encoder, **(self.encoder_kwargs or {}))
        else:  # an encoder object: never mutate the user's hyperparameter
            enc = copy.deepcopy(self.encoder) if getattr(self.encoder, "needs_fit", False) \
                else self.encoder
        if getattr(enc, "needs_fit", False):
            if getattr(enc, "needs_text", True) and not train.has_text:
                encode_queries(enc, train)  # raises naming the row without text
            enc.fit(train.texts)
        self.encoder_ = enc
        emb = encode_queries(enc, train)
        fb = getattr(self, "_feedback", None)  # set by LoggedFeedbackRouter for one fit
        if fb is None:
            mat, calib_target, calib_weight = (interaction_matrix(train, self.alpha_,
                                                                  *self.score_range_),
                                               train.scores, None)
        else:
            t = logged_training(train, emb, fb["feedback"], fb["propensity_clip"], self.model,
                                self.alpha_, *self.score_range_, seed=int(self.seed))
            mat, calib_target, calib_weight = t["matrix"], t["calib_target"], t["calib_weight"]
        if mat.nnz == 0:
            raise DataValidationError("no positive cell in the train matrix (every observed score "
                                      "is at the minimum); nothing to factorise",
                                      source=train.source)
        model, on_gpu = self._make_model()
        model.fit(mat, show_progress=False)
        if on_gpu:  # pragma: no cover
            model = model.to_cpu()
        self.query_factors_ = np.asarray(model.user_factors, dtype=np.float64)
        self.llm_factors_ = np.asarray(model.item_factors, dtype=np.float64)
        self.emb_mean_ = emb.mean(axis=0)
        self.emb_scale_ = emb.std(axis=0) + 1e-8
        z = (emb - self.emb_mean_) / self.emb_scale_
        self.train_unit_emb_ = unit_rows(emb)
        grid = LOO_GRID if self.ridge_alpha == "auto" else (float(self.ridge_alpha),)
        if len(z) >= 3 and min(grid) > 0:
            self.ridge_coef_, self.ridge_alpha_, loo = ridge_loo(z, self.query_factors_, grid)
        else:  # too few rows for leave-one-out, or an explicit penalty of 0: in-sample
            self.ridge_alpha_ = float(grid[0]) if len(grid) == 1 else 1.0
            self.ridge_coef_ = ridge(z, self.query_factors_, self.ridge_alpha_)
            loo = self._fold(emb)
        # calibration on leave-one-out folded-in train factors (what a new query gets)
        if self.fold_in_ == "knn":
            loo = self._fold(emb, leave_out_self=True)
        # the preferences' noise seen from folded-in factors: weighs an added LLM's probes
        self.noise_var_ = noise_variance(mat, loo, self.llm_factors_)
        self.calib_ = None
        if self.calibrate:
            self.calib_ = _per_column_linear(loo @ self.llm_factors_.T, calib_target,
                                             calib_weight)

    # ------------------------------------------------------------------ prediction
    def _fold(self, emb: np.ndarray, leave_out_self: bool = False) -> np.ndarray:
        if self.fold_in_ == "ridge":
            z = (emb - self.emb_mean_) / self.emb_scale_
            return np.hstack([z, np.ones((len(z), 1))]) @ self.ridge_coef_
        sims = unit_rows(emb) @ self.train_unit_emb_.T
        if leave_out_self and sims.shape[1] > 1:  # emb are the train rows themselves
            np.fill_diagonal(sims, -np.inf)
        k = min(self.k_, sims.shape[1] - int(leave_out_self and sims.shape[1] > 1))
        nn = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        return self.query_factors_[nn].mean(axis=1)

    def query_factors(self, data: RoutingData) -> np.ndarray:
        """Folded-in factors of ``data``'s queries, shape (n_queries, n_factors)."""
        self._check_fitted()
        return self._fold(encode_queries(self.encoder_, data))

    def _predict_scores(self, data: RoutingData) -> np.ndarray:
        raw = self.query_factors(data) @ self.llm_factors_.T
        if self.calib_ is None:
            return raw
        w, c = self.calib_
        out = raw * w + c
        added = [j for j, n in enumerate(self.llm_names_) if n in (getattr(self, "llm_info_", None) or {})]
        if added:  # an onboarded LLM's line, fitted on a few probes, is held to the score scale
            out[:, added] = np.clip(out[:, added], *self.score_range_)
        return out


class ALSRouter(ImplicitRouter):
    """:class:`ImplicitRouter` with ``model="als"`` (weighted ALS, Hu et al. 2008).

    Parameters are those of :class:`ImplicitRouter` less ``model`` and ``learning_rate``.
    """

    model = "als"
    learning_rate = 0.0

    def __init__(self, factors: int = 16, regularization: float = 0.05, iterations: int = 15,
                 alpha: float = 10.0, fold_in: str = "ridge", ridge_alpha="auto",
                 k: int = 10, calibrate: bool = True, encoder: str = "hashing",
                 encoder_kwargs: dict | None = None, use_gpu: bool = False, num_threads: int = 1,
                 seed: int = 0):
        self.factors = factors
        self.regularization = regularization
        self.iterations = iterations
        self.alpha = alpha
        self.fold_in = fold_in
        self.ridge_alpha = ridge_alpha
        self.k = k
        self.calibrate = calibrate
        self.encoder = encoder
        self.encoder_kwargs = encoder_kwargs
        self.use_gpu = use_gpu
        self.num_threads = num_threads
        self.seed = seed


class BPRRouter(ImplicitRouter):
    """:class:`ImplicitRouter` with ``model="bpr"`` (pairwise ranking, Rendle et al. 2009).

    Parameters are those of :class:`ImplicitRouter` less ``model``.
    """

    model = "bpr"

    def __init__(self, factors: int = 16, regularization: float = 0.01, iterations: int = 100,
                 alpha: float = 10.0, learning_rate: float = 0.05, fold_in: str = "ridge",
                 ridge_alpha="auto", k: int = 10, calibrate: bool = True,
                 encoder: str = "hashing", encoder_kwargs: dict | None = None,
                 use_gpu: bool = False, num_threads: int = 1, seed: int = 0):
        self.factors = factors
        self.regularization = regularization
        self.iterations = iterations
        self.alpha = alpha
        self.learning_rate = learning_rate
        self.fold_in = fold_in
        self.ridge_alpha = ridge_alpha
        self.k = k
        self.calibrate = calibrate
        self.encoder = encoder
        self.encoder_kwargs = encoder_kwargs
        self.use_gpu = use_gpu
        self.num_threads = num_threads
        self.seed = seed
