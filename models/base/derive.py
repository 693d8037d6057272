"""Registry routers derived from one Lightning module: flat hyperparameters, one set of defaults.

Reference: scikit-learn's estimator conventions (Buitinck et al., "API design for machine
learning software: experiences from the scikit-learn project", 2013): every hyperparameter
is a constructor argument stored under its own name, so ``get_params``/``set_params`` and
search spaces see flat names such as ``dim`` or ``lr``.

:func:`for_module` turns a :class:`~recsys_router.models.base.lightning_router.LightningRouter`
subclass into the router of one module class. Its constructor's parameters and defaults are
read from the module's signature (the one source of a model's defaults, mirrored by
``configs/models/*.yaml``) plus the trainer and encoder settings of
:data:`~recsys_router.models.base.lightning_router.TRAINER_SETTINGS`. A module that takes a
``loss`` (and sets ``router_loss_options``) is configured by the flat loss options
``loss`` (its kind, default the module's ``default_loss``), ``wtp``, ``temperature`` (of
the ``utility`` loss), ``ipw_clip``, ``logit_adjust`` and ``entropy_weight`` (defaults from
:class:`~recsys_router.models.losses.RoutingLoss`).
"""

from __future__ import annotations

import inspect

from .lightning_router import TRAINER_SETTINGS, LightningRouter

__all__ = ["for_module", "router_signature", "LOSS_OPTIONS"]

#: RoutingLoss arguments a derived router exposes besides the loss kind (named ``loss``)
LOSS_OPTIONS = ("wtp", "temperature", "ipw_clip", "logit_adjust", "entropy_weight")
_LINKED = ("self", "n_llms", "embed_dim")


def _param(name: str, default) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)


def router_signature(module_cls: type) -> inspect.Signature:
    """The constructor signature of the router of ``module_cls``.

    Module parameters in order (``loss`` expanded into the loss options), then the trainer
    and encoder settings (``batch_size``, ``max_epochs`` and ``max_steps`` default to None:
    scaled to the data at fit time); a module's own ``seed`` is the router's ``seed``; a module with a
    ``fixed_mode`` takes no ``mode``.

    Example
    -------
    >>> from recsys_router.models.mf_module import MFModule
    >>> sig = router_signature(MFModule)
    >>> sig.parameters["dim"].default, sig.parameters["loss"].default, sig.parameters["lr"].default
    (64, 'bce', 0.01)
    """
    from recsys_router.models.losses import RoutingLoss
    loss_defaults = {k: p.default for k, p in
                     inspect.signature(RoutingLoss.__init__).parameters.items()}
    params = [_param("self", inspect.Parameter.empty)]
    for name, p in inspect.signature(module_cls.__init__).parameters.items():
        if name in _LINKED or name in TRAINER_SETTINGS:
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is p.empty:
            raise TypeError(f"{module_cls.__name__}.{name}: a derived router needs every module "
                            "argument (except n_llms, embed_dim) to have a default")
        if name == "loss":
            if module_cls.router_loss_options:
                params.append(_param("loss", module_cls.default_loss))
                params.extend(_param(k, loss_defaults[k]) for k in LOSS_OPTIONS)
            continue
        params.append(_param(name, p.default))
    for name, default in TRAINER_SETTINGS.items():
        if name == "mode" and module_cls.fixed_mode is not None:
            continue
        params.append(_param(name, default))
    return inspect.Signature(params)


def for_module(module_cls: type):
    """Class decorator: make a LightningRouter subclass the router of ``module_cls``.

    The class gets a constructor with :func:`router_signature` (it stores each argument
    under its own name and nothing else) and builds its module from those attributes.

    Example
    -------
    >>> from recsys_router.models.mf_module import MFModule
    >>> @for_module(MFModule)
    ... class TinyMF(LightningRouter):
    ...     '''MF router.'''
    >>> TinyMF(dim=4).get_params()["dim"], TinyMF().max_epochs, TinyMF().val_fraction
    (4, None, 0.1)
    """
    sig = router_signature(module_cls)
    names = [n for n in sig.parameters if n != "self"]

    def decorate(cls: type) -> type:
        if not issubclass(cls, LightningRouter):
            raise TypeError(f"{cls.__name__} must subclass LightningRouter")

        def __init__(self, *args, **kwargs):
            bound = sig.bind(self, *args, **kwargs)
            bound.apply_defaults()
            for name in names:
                setattr(self, name, bound.arguments[name])

        __init__.__signature__ = sig
        __init__.__qualname__ = f"{cls.__qualname__}.__init__"
        __init__.__doc__ = f"Store the hyperparameters of a {module_cls.__name__} router."
        cls.__init__ = __init__
        cls._module_cls = module_cls
        cls.module_class = lambda self: module_cls
        cls.module_kwargs = _module_kwargs
        cls.module = property(lambda self: f"{module_cls.__module__}:{module_cls.__name__}")
        cls.module_options = property(lambda self: {k: v for k, v in self.module_kwargs().items()
                                                    if k != "loss"})
        return cls
    return decorate


def _module_kwargs(self) -> dict:
    """The module's constructor arguments from this router's flat hyperparameters."""
    from recsys_router.models.losses import RoutingLoss
    cls = self._module_cls
    out = {}
    for name in inspect.signature(cls.__init__).parameters:
        if name in _LINKED:
            continue
        if name == "loss":
            if cls.router_loss_options:
                out["loss"] = RoutingLoss(self.loss, **{k: getattr(self, k) for k in LOSS_OPTIONS})
            continue
        value = getattr(self, name)
        out[name] = tuple(value) if isinstance(value, list) else value
    return out
