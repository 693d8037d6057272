"""How a :class:`~recsys_router.models.base.lightning_router.LightningRouter` names, configures
and builds its :class:`~recsys_router.models.base.router_module.RouterModule`.

:func:`resolve_module_class` turns a class, an import path under ``recsys_router.models.``
or a config's ``class_path`` into the module class (nothing else is imported: the spec may
come from a config or an artifact); :class:`ModuleSpecMixin` holds the router's methods that
read its ``module``, ``module_options`` and trainer settings: the module class, its
constructor arguments (the loss built as a
:class:`~recsys_router.models.losses.RoutingLoss`), an untrained module for a pool, the
training batch layout, the check of the trainer settings and the data-scaled training plan.
:mod:`recsys_router.models.base.lightning_router` re-exports :func:`resolve_module_class`,
its public path.
"""

from __future__ import annotations

import importlib
import inspect

import numpy as np

from recsys_router.hyperparams import check_number, check_seed

from .router_module import RouterModule

__all__ = ["ModuleSpecMixin", "resolve_module_class"]


def resolve_module_class(spec) -> type:
    """The :class:`RouterModule` subclass named by ``spec``.

    Parameters
    ----------
    spec : type or str
        A RouterModule subclass, or ``"package.module:Class"`` / ``"package.module.Class"``
        under ``recsys_router.models.`` (nothing else is imported: the spec may come from a
        config or an artifact).

    Returns
    -------
    type

    Example
    -------
    >>> resolve_module_class("recsys_router.models.mf_module:MFModule").__name__
    'MFModule'
    """
    if isinstance(spec, type):
        if not issubclass(spec, RouterModule):
            raise ValueError(f"{spec.__name__} is not a RouterModule subclass")
        return spec
    if not isinstance(spec, str):
        raise ValueError(f"module must be a RouterModule class or a 'package.module:Class' "
                         f"string, got {type(spec).__name__}")
    path = spec.replace(":", ".")
    mod, _, name = path.rpartition(".")
    if not mod.startswith("recsys_router.models."):
        raise ValueError(f"module must live under recsys_router.models., got {spec!r}")
    cls = getattr(importlib.import_module(mod), name, None)
    if not (isinstance(cls, type) and issubclass(cls, RouterModule)):
        raise ValueError(f"{spec!r} is not a RouterModule subclass")
    return cls


class ModuleSpecMixin:
    """The module side of :class:`~recsys_router.models.base.lightning_router.LightningRouter`:
    methods that read the router's ``module`` (a class, an import path or a
    ``{"class_path", "init_args"}`` config), ``module_options``, ``mode`` and ``seed``, and
    its trainer settings (``batch_size``, ``max_epochs``, ``max_steps``, ``patience``,
    ``val_fraction``; checked by ``_check_settings``, turned into a training plan by ``_plan``).
    """

    def module_class(self) -> type:
        """The RouterModule class this router trains."""
        spec = self.module
        if isinstance(spec, dict):
            if "class_path" not in spec:
                raise ValueError(f"a module config needs 'class_path', got keys {sorted(spec)}")
            spec = spec["class_path"]
        return resolve_module_class(spec)

    def module_kwargs(self) -> dict:
        """Constructor arguments of the module (except ``n_llms``, ``embed_dim``), with the
        loss built."""
        from recsys_router.models.losses import RoutingLoss
        opts = dict(self.module["init_args"] or {}) if isinstance(self.module, dict) \
            and "init_args" in self.module else {}
        opts.update(self.module_options or {})
        if "loss" in opts:  # built here, so the module gets a RoutingLoss it keeps as it is
            opts["loss"] = RoutingLoss.coerce(opts["loss"], "module loss")
        if "seed" in self._module_signature() and "seed" not in opts:
            opts["seed"] = self.seed
        return opts

    def _module_signature(self) -> list[str]:
        return list(inspect.signature(self.module_class().__init__).parameters)

    def build_module(self, n_llms: int, embed_dim: int, score_scale=None) -> RouterModule:
        """Build an untrained module for this pool and embedding width.

        Parameters
        ----------
        n_llms, embed_dim : int
        score_scale : ScoreScale, optional
            The transform of the training targets. A ``minmax`` one,
            ``t = (s - lo) / (hi - lo)``, rescales the ``utility`` loss's willingness to pay
            to target units, ``wtp * (hi - lo)``: ``wtp * t - cost`` then differs from
            ``wtp * s - cost`` by the same constant for every LLM of a query, so the loss's
            targets (argmax, or softmax at any temperature) are those of the data's scores.
            The nonlinear ``rank`` transform has no such conversion: there ``wtp`` stays in
            target units (the share of training cells a score beats, per unit of cost).

        Returns
        -------
        RouterModule
        """
        kwargs = self.module_kwargs()
        loss = kwargs.get("loss")
        if (loss is not None and loss.kind == "utility" and score_scale is not None
                and score_scale.method == "minmax"):
            from recsys_router.models.losses import RoutingLoss
            wtp = loss.wtp * (score_scale.hi - score_scale.lo)
            kwargs["loss"] = RoutingLoss.from_config({**loss.config(), "wtp": wtp}, "module loss")
        return self.module_class()(n_llms=n_llms, embed_dim=embed_dim, **kwargs)

    def trainer_setting(self, name: str):
        """``batch_size``, ``max_epochs`` or ``max_steps`` as given (None: data-scaled); after
        ``fit``, ``batch_size`` is the one used."""
        value = getattr(self, name, None)
        if value is None and name == "batch_size" and getattr(self, "plan_", None):
            return self.plan_["batch_size"]
        return value

    def resolved_mode(self) -> str:
        """Training batch layout: the module's fixed one, ``mode``, or what the loss needs."""
        from recsys_router.models.losses import default_mode
        cls = self.module_class()
        if cls.fixed_mode is not None:
            return cls.fixed_mode
        if getattr(self, "mode", None):
            return self.mode
        loss = self.module_kwargs().get("loss")
        return default_mode(loss.kind if loss is not None else cls.default_loss)

    def _check_settings(self) -> float:
        for name in ("batch_size", "max_epochs", "max_steps"):
            value = getattr(self, name, None)
            if value is not None and (not isinstance(value, (int, np.integer))
                                      or isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be an integer >= 1 or None (data-scaled), "
                                 f"got {value!r}")
        check_number(self.patience, "patience", low=1, integer=True)
        check_seed(self.seed)
        frac = float(self.val_fraction or 0.0)
        if not 0 <= frac < 1:
            raise ValueError(f"val_fraction must be in [0, 1), got {frac!r}")
        return frac

    def _plan(self, n_items: int, batch_size: int | None = None, step_cap: int | None = None):
        """The training plan for ``n_items`` training items and this router's settings
        (``batch_size``, ``step_cap``: a family's own rules, used where the router sets no
        batch size or budget; ``step_cap`` replaces the module's ``plan_options`` one)."""
        import math

        from .schedule import data_scaled_plan
        steps = self.max_steps
        batch = self.batch_size or batch_size
        limits = dict(getattr(self.module_class(), "plan_options", {}) or {})
        if step_cap is not None:
            limits["step_cap"] = int(step_cap)
        if steps is None and self.max_epochs is not None:
            b = batch or data_scaled_plan(n_items, **limits).batch_size
            steps = int(self.max_epochs) * math.ceil(n_items / b)
        return data_scaled_plan(n_items, batch_size=batch, max_steps=steps, **limits)
