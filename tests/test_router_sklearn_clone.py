"""scikit-learn's ``clone`` copies every registry router (it called ``get_params(deep=False)``,
which the Router base class did not accept), and the project's own copy still works."""

import pytest
from sklearn.base import clone

from recsys_router.registry import available_routers, make_router


@pytest.mark.parametrize("name", available_routers())
def test_sklearn_clone_copies_every_registry_router(name):
    r = make_router(name)
    c = clone(r)
    assert type(c) is type(r) and c is not r
    assert sorted(c.get_params(deep=False)) == sorted(r.get_params())
    assert repr(c) == repr(r)
    own = type(r)(**r.get_params())           # the project's own copy
    assert repr(own) == repr(r)
    assert r.get_params(deep=True) == r.get_params(deep=False)  # nothing nested is expanded
