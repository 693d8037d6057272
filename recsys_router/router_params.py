"""The hyperparameter methods every router shares (scikit-learn's conventions):
:class:`ParamsMixin`, a base of :class:`~recsys_router.router.Router`.

The constructor stores each hyperparameter as an attribute of the same name;
``get_params`` / ``set_params`` read and write them; what prediction reads is fixed at
``fit`` by ``_freeze_params``.
"""

from __future__ import annotations

import inspect

__all__ = ["ParamsMixin"]


class ParamsMixin:
    """``get_params``, ``set_params``, ``__repr__`` and the ``_freeze_params`` hook.

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

    def _freeze_params(self) -> None:
        """Check the hyperparameters prediction reads and fix them as state (``mode_``,
        ``seed_``): :meth:`set_params` after ``fit`` then changes nothing until the next
        ``fit``. Run by :meth:`fit` and on a router rebuilt from stored state."""
