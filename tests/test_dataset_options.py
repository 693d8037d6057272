"""Dataset options given as text (``--data.init_args.dataset_options.X=...``) and the
argument checks of ``make_synthetic``: a refused value is one ``ArgumentValueError`` naming
the option, never a silent dataset built from NaN or infinity."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.datasets import load_dataset
from recsys_router.datasets.registry import coerce_options
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.errors import ArgumentValueError


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e400", " NaN "])
def test_a_float_option_given_as_non_finite_text_is_refused(text):
    """'nan' / 'inf' / '1e400' read as floats made make_synthetic train on all-zero scores."""
    with pytest.raises(ArgumentValueError,
                       match=rf"^dataset option 'specialisation' must be a finite float, "
                             rf"got {text!r}$"):
        coerce_options(make_synthetic, {"specialisation": text})


def test_a_finite_float_option_given_as_text_is_still_read():
    assert coerce_options(make_synthetic, {"task_difficulty": " 0.25 ", "n_queries": "7"}) == {
        "task_difficulty": 0.25, "n_queries": 7}


@pytest.mark.parametrize("option,value,says", [
    ("specialisation", float("nan"), "specialisation must be a finite number >= 0, got nan"),
    ("specialisation", -0.5, "specialisation must be a finite number >= 0, got -0.5"),
    ("task_difficulty", float("inf"), "task_difficulty must be a finite number >= 0, got inf"),
    ("n_queries", 0, "n_queries must be an integer >= 1, got 0"),
    ("n_llms", -5, "n_llms must be an integer >= 1, got -5"),
    ("n_topics", 2.5, "n_topics must be an integer >= 1, got 2.5"),
])
def test_make_synthetic_refuses_a_bad_size_or_spread(option, value, says):
    kwargs = {"n_queries": 20, "n_llms": 3, "n_topics": 2, option: value}
    with pytest.raises(ArgumentValueError) as info:
        make_synthetic(**kwargs)
    assert str(info.value) == says


def test_a_non_finite_option_through_load_dataset_is_refused():
    with pytest.raises(ArgumentValueError, match="^dataset option 'task_difficulty'"):
        load_dataset("synthetic", n_queries="30", n_llms="3", task_difficulty="nan")


@pytest.mark.parametrize("text,expected", [("false", False), (" FALSE ", False), ("0", False),
                                           ("True", True), ("1", True)])
def test_a_bool_option_given_as_text_is_read_as_a_bool(text, expected):
    """``binary=false`` stayed the string 'false', which is truthy: 0/1 scores were made."""
    assert coerce_options(make_synthetic, {"binary": text, "with_text": text}) == {
        "binary": expected, "with_text": expected}


def test_binary_false_as_text_gives_probability_scores():
    by_text = load_dataset("synthetic", n_queries="40", n_llms="3", binary="false")
    scores = by_text.scores[~np.isnan(by_text.scores)]
    assert not np.isin(scores, [0.0, 1.0]).all()       # success probabilities, not 0/1 draws
    assert np.array_equal(by_text.scores, make_synthetic(40, 3, binary=False).scores)


@pytest.mark.parametrize("text", ["yes", "no", "", "2", "flase"])
def test_other_text_for_a_bool_option_is_refused(text):
    with pytest.raises(ArgumentValueError) as info:
        coerce_options(make_synthetic, {"with_text": text})
    assert str(info.value) == (f"dataset option 'with_text' must be a bool (true, false, 1 or 0), "
                               f"got {text!r}")
