"""Exported routers that read task labels (task-best, task-residual, a safe fallback deciding
per task) route texts by their task when given ``tasks=``, agree with the fitted router, record
``uses_tasks`` in the manifest and warn at load and serve that a text without a task is routed
as a task-less query."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import export_router, load_router
from recsys_router.fallback import SafeFallbackRouter
from recsys_router.registry import make_router


@pytest.fixture(scope="module")
def parts():
    d = make_synthetic(400, 6, 4, seed=0, specialisation=4.0, binary=False)
    return d.subset(np.arange(300)), d.subset(np.arange(300, 400))


def _export(router, train, tmp_path, name):
    out = tmp_path / name
    export_router(router, out, train_data=train)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        art = load_router(out)
    return art, out, [str(w.message) for w in caught]


@pytest.mark.parametrize("name,params", [("task-best", {}),
                                         ("task-residual", {"base": "knn", "alpha": 0.5,
                                                            "encoder": "hashing"})])
def test_exported_task_router_given_tasks_agrees_with_the_fitted_one(parts, tmp_path, name,
                                                                     params):
    tr, te = parts
    r = make_router(name, **params).fit(tr)
    art, out, warned = _export(r, tr, tmp_path, name)
    assert json.loads((out / "manifest.json").read_text())["uses_tasks"] is True
    assert art.uses_tasks and any("task label" in w for w in warned)
    got = [x["llm"] for x in art.route(list(te.texts), tasks=list(te.tasks))]
    want = r.route(te).tolist()
    assert got == want
    # the tasks really matter here: routed without them, task-best picks one LLM for all
    assert len(set(want)) > 1
    if name == "task-best":
        assert {x["llm"] for x in art.route(list(te.texts))} == {r.llm_names_[
            int(r.mean_scores_.argmax())]}


def test_same_text_under_two_tasks_is_two_queries(parts, tmp_path):
    tr, _ = parts
    r = make_router("task-best").fit(tr)
    art, _, _ = _export(r, tr, tmp_path, "tb")
    tasks = [r.tasks_[i] for i in range(len(r.tasks_))]
    out = art.route(["same text"] * len(tasks), tasks=tasks)
    best = [r.llm_names_[int(i)] for i in r.task_means_.argmax(axis=1)]
    assert [x["llm"] for x in out] == best


def test_fallback_deciding_per_task_records_uses_tasks(parts, tmp_path):
    tr, te = parts
    r = SafeFallbackRouter(make_router("best-single")).fit(tr)
    r.fallback_["default"] = "task-best"         # its decisions read the task
    assert r.uses_tasks
    art, out, _ = _export(r, tr, tmp_path, "fb")
    assert art.manifest["uses_tasks"] is True
    got = [x["llm"] for x in art.route(list(te.texts), tasks=list(te.tasks))]
    assert got == r.route(te).tolist()


def test_a_router_without_tasks_records_false_and_does_not_warn(parts, tmp_path):
    tr, te = parts
    r = make_router("best-single").fit(tr)
    art, _, warned = _export(r, tr, tmp_path, "bs")
    assert art.manifest["uses_tasks"] is False and not art.uses_tasks
    assert not any("task label" in w for w in warned)


@pytest.mark.parametrize("tasks,message", [
    (["a"], "1 labels for 2 queries"),
    ("ab", "expected a list"),
    ([1, None], r"tasks\[0\]: expected a string or None"),
    ([None, "x" * 1001], r"tasks\[1\]: 1001 characters"),
])
def test_bad_tasks_are_refused_naming_the_entry(parts, tmp_path, tasks, message):
    tr, _ = parts
    art, _, _ = _export(make_router("task-best").fit(tr), tr, tmp_path, "tb")
    with pytest.raises(ValueError, match=message):
        art.route(["q one", "q two"], tasks=tasks)


def test_tasks_with_a_routing_data_are_refused(parts, tmp_path):
    tr, te = parts
    art, _, _ = _export(make_router("task-best").fit(tr), tr, tmp_path, "tb")
    with pytest.raises(ValueError, match="own 'task' column"):
        art.route(te, tasks=list(te.tasks))


def test_serving_a_task_router_warns(parts, tmp_path):
    from recsys_router.serving import create_app
    tr, _ = parts
    art, _, _ = _export(make_router("task-best").fit(tr), tr, tmp_path, "tb")
    with pytest.warns(UserWarning, match="clients send it as .task. / .tasks. in POST /route"):
        create_app(art)


def test_tasks_as_a_column_with_missing_values(parts, tmp_path):
    """``route(df.text, tasks=df.task)``: a Series or array of labels is taken, NaN (pandas'
    missing value) counts as no task, as in training; a 2-d array is refused."""
    import pandas as pd
    tr, te = parts
    art, _, _ = _export(make_router("task-best").fit(tr), tr, tmp_path, "tbs")
    texts, labels = list(te.texts[:8]), list(te.tasks[:8])
    with_nan = pd.Series(labels[:5] + [float("nan")] * 3)
    with_na = pd.Series(labels[:5] + [None] * 3, dtype="string")  # missing as pd.NA
    assert [x["llm"] for x in art.route(texts, tasks=with_na)] == \
        [x["llm"] for x in art.route(texts, tasks=labels[:5] + [None] * 3)]
    want = [x["llm"] for x in art.route(texts, tasks=labels[:5] + [None] * 3)]
    assert [x["llm"] for x in art.route(texts, tasks=with_nan)] == want
    assert [x["llm"] for x in art.route(texts, tasks=np.array(labels, dtype=object))] == \
        [x["llm"] for x in art.route(texts, tasks=labels)]
    with pytest.raises(ValueError, match=r"tasks: expected one task label per query, got an "
                                         r"array of shape \(4, 2\)"):
        art.route(texts, tasks=np.array(labels, dtype=object).reshape(4, 2))


def test_an_artifact_used_as_a_router_spec_does_not_warn_about_tasks(parts, tmp_path):
    """Through router_spec the artifact's router routes RoutingData, which carries its own tasks:
    the advice to pass tasks= to route() would mislead."""
    from recsys_router.router_spec import resolve_router
    tr, te = parts
    r = make_router("task-best").fit(tr)
    _, out, warned = _export(r, tr, tmp_path, "tb-spec")
    assert any("task label" in w for w in warned)  # a direct load still warns
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inner, _ = resolve_router(str(out))
    assert not [w for w in caught if "task label" in str(w.message)]
    assert inner.route(te).tolist() == r.route(te).tolist()
