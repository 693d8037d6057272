"""Contract check that prediction reads no hyperparameter after ``fit``.

Every constructor parameter a router's prediction needs is fixed at ``fit`` (by
``_freeze_params`` or as learned state) and, on a router rebuilt from an artifact, by
``_freeze_params`` from the stored parameters: ``set_params`` after ``fit`` changes nothing
until the next ``fit``. :class:`ParamsFixedContract` (mixed into
:class:`router_contract.RouterContract`) checks this for every router generically: it sets
*every* constructor parameter of a fitted copy to an :class:`Unreadable` value, which fails
loudly on any use (comparison, truth value, number conversion, attribute, iteration, call),
and expects the same scores, costs, choices and selection probabilities, and the same
predictions after ``add_llm`` (an onboarded LLM is placed with what ``fit`` fixed too).

:func:`assert_params_fixed` is the same check for any fitted router (the export contract runs
it on a router loaded from an artifact).
"""

from __future__ import annotations

import copy

import numpy as np

__all__ = ["Unreadable", "unreadable_params", "assert_params_fixed", "ParamsFixedContract"]


class Unreadable:
    """A parameter value that raises ``AssertionError`` naming the parameter on any use.

    Only identity checks (``is None``, ``isinstance``), ``repr`` and copying pass: a router
    that reads the parameter to decide anything fails, and one that branches on
    ``is None`` / ``isinstance`` goes on to use it and fails then.

    Example
    -------
    >>> u = Unreadable("k")
    >>> try:
    ...     int(u)
    ... except AssertionError as exc:
    ...     print(exc)
    parameter 'k' was read after fit (prediction must use what fit fixed)
    """

    def __init__(self, name: str):
        object.__setattr__(self, "_name", name)

    def _fail(self, *args, **kwargs):
        raise AssertionError(f"parameter {object.__getattribute__(self, '_name')!r} was read "
                             "after fit (prediction must use what fit fixed)")

    def __repr__(self) -> str:
        return f"Unreadable({object.__getattribute__(self, '_name')!r})"

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __getattr__(self, attr):
        self._fail()

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _fail
    __bool__ = __int__ = __float__ = __index__ = __complex__ = _fail
    __len__ = __iter__ = __contains__ = __getitem__ = __call__ = _fail
    __str__ = __format__ = __array__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __pow__ = __rpow__ = _fail
    __neg__ = __abs__ = __round__ = _fail
    __hash__ = None


def unreadable_params(router) -> dict:
    """``{name: Unreadable(name)}`` for every constructor parameter of ``router``."""
    return {k: Unreadable(k) for k in type(router)._param_names()}


def _outputs(router, data) -> dict:
    """Everything a router predicts for ``data``: scores, costs, choices, probabilities."""
    costs = router.predict_costs(data)
    probs = router.selection_probs(data)
    return {"scores": router.predict_scores(data),
            "costs": None if costs is None else np.asarray(costs),
            "route": np.asarray(router.route(data)),
            "probs": None if probs is None else np.asarray(probs)}


def _assert_same(now: dict, before: dict, where: str) -> None:
    for key, old in before.items():
        if old is None:
            assert now[key] is None, f"{where}: {key} None before, not after"
        else:
            np.testing.assert_array_equal(now[key], old, err_msg=f"{where}: {key} changed")


def _culprits(router, data, before: dict) -> list[str]:
    """The parameters whose unreadable value alone breaks or changes a prediction."""
    found = []
    for name in type(router)._param_names():
        r = copy.deepcopy(router).set_params(**{name: Unreadable(name)})
        try:
            _assert_same(_outputs(r, data), before, name)
        except Exception:  # noqa: BLE001 (a read may surface as another error type)
            found.append(name)
    return found


def assert_params_fixed(router, data) -> None:
    """Assert that a fitted ``router`` predicts the same for ``data`` after every constructor
    parameter is set to an :class:`Unreadable` value (``router`` itself is not changed); the
    failure names the parameters prediction still reads."""
    before = _outputs(router, data)
    poisoned = copy.deepcopy(router).set_params(**unreadable_params(router))
    try:
        _assert_same(_outputs(poisoned, data), before, "all parameters unreadable")
    except Exception as exc:  # noqa: BLE001 (a read may surface as another error type)
        names = _culprits(router, data, before)
        raise AssertionError(f"{type(router).__name__} reads {names or 'its parameters'} at "
                             f"prediction instead of what fit fixed: {exc}") from exc


class ParamsFixedContract:
    """Mixin: :meth:`test_params_fixed_at_fit` (see the module docstring). Expects the
    ``fitted`` and ``data`` fixtures and the ``_probes`` / ``_levels`` helpers of
    :class:`router_contract.RouterContract`."""

    def test_params_fixed_at_fit(self, fitted, data):
        """No constructor parameter is read at prediction: every one set to a value that
        fails on use leaves scores, costs, choices and probabilities as they were."""
        assert_params_fixed(fitted, data["test"])

    def test_add_llm_uses_params_fixed_at_fit(self, fitted, data):
        """``add_llm`` places the new LLM with what ``fit`` fixed, not with parameters set
        afterwards: the same predictions as on a copy whose parameters were left alone."""
        from router_contract import with_new_llm  # noqa: PLC0415 (that module imports this one)
        hi, _ = self._levels(data)
        scores, costs, cost = self._probes(data, hi)
        test = with_new_llm(data["test"], "onboarded", hi, cost)
        plain = copy.deepcopy(fitted).add_llm("onboarded", scores, costs)
        poisoned = copy.deepcopy(fitted).set_params(**unreadable_params(fitted))
        poisoned.add_llm("onboarded", scores, costs)
        _assert_same(_outputs(poisoned, test), _outputs(plain, test), "add_llm after set_params")
