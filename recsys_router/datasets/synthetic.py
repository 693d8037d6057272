"""Seeded routing-data simulator (labelled as simulated everywhere it is shown).

Queries belong to topics; each topic has its own vocabulary, so query texts carry the
topic signal a text-based router can learn. LLMs have a general ability, per-topic
strengths and a price. Scores follow an IRT-style model::

    p[i, j] = sigmoid(a_i * (theta_j + delta[j, topic_i]) - b_i)

with query discrimination ``a_i > 0`` and difficulty ``b_i``. Binary scores are Bernoulli
draws of ``p`` (or ``p`` itself with ``binary=False``). Per-topic strengths make the best
LLM differ by topic, so a good router beats the best single LLM. Costs are price x a
query-length proxy, so dearer LLMs cost more on longer queries.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..hyperparams import check_number
from .registry import register

__all__ = ["make_synthetic", "load_synthetic", "load_synthetic_many", "load_synthetic_routereval",
           "PRESETS"]

#: named simulator settings; ``many-llms``: a 40-LLM x 20,000-query pool with 12 tasks whose
#: best LLM differs, tasks of different mean difficulty and a spread of difficulty within each;
#: ``routereval-scale``: the same with 2,000 LLMs (40M cells, RouterEval-sized pools)
PRESETS = {
    "many-llms": {"n_queries": 20_000, "n_llms": 40, "n_topics": 12, "specialisation": 1.0,
                  "task_difficulty": 0.8},
    "routereval-scale": {"n_queries": 20_000, "n_llms": 2_000, "n_topics": 12,
                         "specialisation": 1.0, "task_difficulty": 0.8},
}

_SYLLABLES = ["ka", "lo", "mi", "ra", "ten", "su", "vo", "pe", "dri", "zan", "qu", "fel", "om",
              "bri", "cas", "nu", "yor", "gel", "tas", "wim"]


def _vocab(rng, n_words: int) -> list[str]:
    words = set()
    while len(words) < n_words:
        words.add("".join(rng.choice(_SYLLABLES, size=rng.integers(2, 4))))
    return sorted(words)


def make_synthetic(n_queries: int = 2000, n_llms: int = 8, n_topics: int = 6, *, seed: int = 0,
                   binary: bool = True, words_per_query: int = 12, topic_vocab: int = 40,
                   shared_vocab: int = 60, specialisation: float = 1.5,
                   task_difficulty: float = 0.0, with_text: bool = True) -> RoutingData:
    """Generate a simulated routing dataset.

    Parameters
    ----------
    n_queries, n_llms, n_topics : int
        Sizes. Any size works, including RouterEval scale (thousands of LLMs).
    seed : int
        Random seed; the same seed gives the same dataset.
    binary : bool
        0/1 scores (Bernoulli) if True, else the success probability itself.
    words_per_query : int
        Query text length in words (topic words mixed with shared words).
    topic_vocab, shared_vocab : int
        Vocabulary sizes per topic and shared across topics.
    specialisation : float
        Scale of per-topic LLM strengths; 0 makes one LLM best everywhere.
    task_difficulty : float
        Spread (sd) of the per-topic mean difficulty added to every query's own difficulty
        ``b_i`` (0: all topics equally hard on average; within a topic ``b_i`` still varies).
    with_text : bool
        Generate query texts (skip for very large matrices to save memory).

    Returns
    -------
    RoutingData
        With ``meta["simulated"] = True``, tasks ``topic_k``, USD-like costs and LLM prices.

    Raises
    ------
    ArgumentValueError
        A size that is no integer >= 1, or a ``specialisation`` / ``task_difficulty`` that is
        no finite number >= 0.

    Example
    -------
    >>> d = make_synthetic(100, 4, 3, seed=1)
    >>> d.shape, d.meta["simulated"]
    ((100, 4), True)
    """
    for name, value in (("n_queries", n_queries), ("n_llms", n_llms), ("n_topics", n_topics)):
        check_number(value, name, low=1, integer=True)
    for name, value in (("specialisation", specialisation), ("task_difficulty", task_difficulty)):
        check_number(value, name, low=0)
    rng = np.random.default_rng(seed)
    topic = rng.integers(0, n_topics, size=n_queries)
    # LLMs: ability grows with price (log-uniform), plus topic-specific strengths
    log_price = rng.uniform(np.log(0.1), np.log(30.0), size=n_llms)
    price = np.exp(log_price)
    theta = 0.6 * (log_price - log_price.mean()) / (log_price.std() + 1e-9) + rng.normal(0, 0.3, n_llms)
    delta = rng.normal(0.0, specialisation, size=(n_llms, n_topics))
    a = rng.lognormal(0.0, 0.3, size=n_queries)
    b = rng.normal(-0.3, 1.0, size=n_queries)
    if task_difficulty:     # drawn after everything else so that 0 keeps older data identical
        b = b + np.random.default_rng([seed, 1]).normal(0.0, task_difficulty, n_topics)[topic]
    logits = a[:, None] * (theta[None, :] + delta[:, topic].T) - b[:, None]
    p = 1.0 / (1.0 + np.exp(-logits))
    scores = (rng.random(p.shape) < p).astype(np.float32) if binary else p.astype(np.float32)
    n_tokens = rng.integers(50, 800, size=n_queries)
    costs = (n_tokens[:, None] * price[None, :] / 1e6 * rng.uniform(0.9, 1.1, size=p.shape))
    texts = None
    if with_text:
        shared = _vocab(rng, shared_vocab)
        vocabs = [_vocab(rng, topic_vocab) for _ in range(n_topics)]
        n_topic_words = max(1, words_per_query // 2)
        tw = rng.integers(0, topic_vocab, size=(n_queries, n_topic_words))
        sw = rng.integers(0, shared_vocab, size=(n_queries, words_per_query - n_topic_words))
        texts = [" ".join([vocabs[topic[i]][k] for k in tw[i]] + [shared[k] for k in sw[i]])
                 for i in range(n_queries)]
    width = len(str(n_queries - 1))
    queries = pd.DataFrame({"query_id": [f"sim-{i:0{width}d}" for i in range(n_queries)],
                            "text": texts, "task": [f"topic_{t}" for t in topic]})
    lw = len(str(n_llms - 1))
    llms = pd.DataFrame({"name": [f"sim-llm-{j:0{lw}d}" for j in range(n_llms)],
                         "input_price": price, "output_price": price * 2,
                         "size": np.round(np.exp(1.5 * log_price / np.log(30) * np.log(70)), 1),
                         "description": [f"simulated LLM {j} priced {price[j]:.2f} USD per 1M tokens"
                                         for j in range(n_llms)]})
    return RoutingData(queries, llms, scores, costs.astype(np.float32), name="synthetic",
                       source="simulated", meta={"simulated": True, "seed": seed})


@register("synthetic", aliases=("simulated",), needs_path=False,
          description="SIMULATED: seeded topic/IRT simulator (the built-in default)")
def load_synthetic(_path=None, **options) -> RoutingData:
    """Registry entry: ``load_dataset("synthetic", n_queries=..., n_llms=..., seed=...)``."""
    return make_synthetic(**options)


@register("synthetic-many", aliases=("simulated-many",), needs_path=False,
          description="SIMULATED: 40 LLMs x 20,000 queries, 12 tasks, task and within-task "
                      "difficulty (preset many-llms)")
def load_synthetic_many(_path=None, **options) -> RoutingData:
    """The ``many-llms`` preset (:data:`PRESETS`); options override its values.

    Example
    -------
    >>> d = load_synthetic_many(n_queries=300, with_text=False)
    >>> d.shape, len(set(d.tasks))
    ((300, 40), 12)
    """
    data = make_synthetic(**{**PRESETS["many-llms"], **options})
    data.name = "synthetic-many"
    return data


@register("synthetic-routereval", aliases=("simulated-routereval",), needs_path=False,
          description="SIMULATED: 2,000 LLMs x 20,000 queries (40M cells), 12 tasks "
                      "(preset routereval-scale)")
def load_synthetic_routereval(_path=None, **options) -> RoutingData:
    """The ``routereval-scale`` preset (:data:`PRESETS`); options override its values.

    Example
    -------
    >>> d = load_synthetic_routereval(n_queries=50, n_llms=300, with_text=False)
    >>> d.shape, d.name
    ((50, 300), 'synthetic-routereval')
    """
    data = make_synthetic(**{**PRESETS["routereval-scale"], **options})
    data.name = "synthetic-routereval"
    return data


# their **options are make_synthetic's (read by registry.coerce_options)
for _loader in (load_synthetic, load_synthetic_many, load_synthetic_routereval):
    _loader.options_target = make_synthetic
del _loader
