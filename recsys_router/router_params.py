"""The hyperparameter methods every router shares (scikit-learn's conventions):
:class:`ParamsMixin`, a base of :class:`~recsys_router.router.Router`.

The constructor stores each hyperparameter as an attribute of the same name;
``get_params`` / ``set_params`` read and write them; what prediction reads is fixed at
``fit`` by ``_freeze_params``, and the parameters as of ``fit`` are kept for an export
(``params_at_fit``).
"""

from __future__ import annotations

import inspect

__all__ = ["ParamsMixin"]


class ParamsMixin:
    """``get_params``, ``set_params``, ``__repr__``, ``params_at_fit`` and the
    ``_freeze_params`` hook.

    Example
    -------
    >>> from recsys_router.models.baselines import RandomRouter
    >>> RandomRouter(seed=3).set_params(seed=4).get_params(deep=False)
    {'seed': 4}
    """

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values()
                if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]

    def get_params(self, deep: bool = True) -> dict:
        """Constructor arguments as a dict (every one is stored as an attribute).

        ``deep`` is scikit-learn's (so ``sklearn.base.clone`` works) and ignored: a nested
        router or encoder stays an object, never expanded into ``name__param`` keys, since
        :meth:`set_params`, stored artifact parameters and ``type(r)(**r.get_params())``
        take constructor arguments only."""
        return {k: getattr(self, k) for k in self._param_names()}

    def set_params(self, **params) -> "ParamsMixin":
        """Set constructor arguments by name (an unknown name is a ``ValueError``); a fitted
        router keeps what ``_freeze_params`` fixed until its next ``fit``. Returns ``self``."""
        valid = set(self._param_names())
        for k, v in params.items():
            if k not in valid:
                raise ValueError(f"{type(self).__name__} has no parameter {k!r}; valid: {sorted(valid)}")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def params_at_fit(self) -> dict:
        """The constructor arguments as they were at the last ``fit`` (or when the router
        was rebuilt from stored state): what an export stores, so that the loaded router
        fixes what this one fixed even after a later :meth:`set_params`. Before the first
        fit, :meth:`get_params`."""
        fixed = getattr(self, "fit_params_", None)
        return dict(fixed) if fixed is not None else self.get_params()

    def _fix_params(self) -> None:
        """Record the parameters as of now (``fit_params_``, read by :meth:`params_at_fit`)
        and run :meth:`_freeze_params`. Run by ``fit`` and on a router rebuilt from stored
        state."""
        self._freeze_params()
        self.fit_params_ = self.get_params()

    def _freeze_params(self) -> None:
        """Check the hyperparameters prediction reads and fix them as state (``mode_``,
        ``seed_``): :meth:`set_params` after ``fit`` then changes nothing until the next
        ``fit``. Run by :meth:`fit` and on a router rebuilt from stored state."""
