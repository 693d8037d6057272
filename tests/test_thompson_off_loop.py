"""``--explore thompson`` draws run off the event loop: the N posterior passes of one request
(seconds for a large batch) used to run on the loop itself, so every other request, even
``GET /health``, waited for them. Checked without timing: where the draws run, and that a
request is answered while a draw is held. The draws stay those of a direct call in the same
order (same seed and instance, same choices and propensities)."""

from __future__ import annotations

import asyncio
import threading

import httpx
import numpy as np
import pytest

import recsys_router.feedback.service as service
from recsys_router.encoders.cache import disk_cache_enabled
from recsys_router.export import export_router, load_router
from recsys_router.feedback.service import FeedbackLoop
from recsys_router.serving import ServiceConfig, create_app
from toy_routers import NoisyWordRouter

TEXTS = ["a question about lists", "one two", "three words here", "x"]


@pytest.fixture(scope="module")
def noisy(tmp_path_factory, sim_split):
    tr = sim_split["train"]
    out = tmp_path_factory.mktemp("art") / "noisy"
    export_router(NoisyWordRouter().fit(tr), out, train_data=tr)
    return load_router(out)


def _watch_draws(monkeypatch, hold=None):
    """Wrap the service's ``sample_scores``: each call records its thread, whether that thread
    runs an event loop, and whether the disk cache was on; with ``hold`` (started, release
    events), the call signals ``started`` and waits for ``release`` (at most 20 s)."""
    seen = []
    real = service.sample_scores

    def watched(*args, **kwargs):
        if kwargs.get("check_only"):   # the start-up check, no draw
            return real(*args, **kwargs)
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        rec = {"thread": threading.current_thread().name, "on_loop": on_loop,
               "disk_cache": disk_cache_enabled()}
        seen.append(rec)
        if hold is not None:
            started, release = hold
            started.set()
            rec["released"] = release.wait(20)
        return real(*args, **kwargs)
    monkeypatch.setattr(service, "sample_scores", watched)
    return seen


async def _client(app):
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


def test_thompson_draws_run_in_a_sampling_thread_not_on_the_event_loop(noisy, monkeypatch):
    seen = _watch_draws(monkeypatch)
    app = create_app(noisy, ServiceConfig(explore="thompson:8"))

    async def main():
        async with app.router.lifespan_context(app):
            async with await _client(app) as c:
                r = await c.post("/route", json={"queries": TEXTS})
                assert r.status_code == 200, r.text
    asyncio.run(main())
    assert len(seen) == 1
    assert seen[0]["on_loop"] is False and seen[0]["thread"].startswith("thompson")
    assert seen[0]["disk_cache"] is False   # the in-memory cache only, as the model call


def test_health_is_answered_while_a_thompson_draw_is_held(noisy, monkeypatch):
    """The draw waits until /health has been answered; on the event loop it froze the loop,
    so /health could not run until the wait gave up (``released`` False)."""
    started, release = threading.Event(), threading.Event()
    seen = _watch_draws(monkeypatch, hold=(started, release))
    app = create_app(noisy, ServiceConfig(explore="thompson:8"))

    async def main():
        async with app.router.lifespan_context(app):
            async with await _client(app) as c:
                big = asyncio.ensure_future(c.post("/route", json={"queries": TEXTS}))
                while not started.is_set() and not big.done():
                    await asyncio.sleep(0.01)
                health = await c.get("/health")
                release.set()
                return health, await big
    health, big = asyncio.run(main())
    assert health.status_code == 200 and big.status_code == 200
    assert seen[0]["released"] is True


def _explore_args(art, texts):
    scores, costs, _ = art.predict(texts)
    choice, policy, value = art.decide(texts, scores, costs)
    return texts, scores, costs, choice, policy, value, None


def test_off_loop_draws_match_direct_calls_in_the_same_order(noisy):
    """Five requests gathered at once get, in order, what five direct explore calls of a loop
    with the same seed and instance get."""
    batches = [TEXTS, TEXTS[:2], ["only one"], TEXTS[::-1], ["x", "x", "y z"]]
    direct = FeedbackLoop(noisy, "thompson:16", seed=3, instance="replay")
    expect = [direct.explore(*_explore_args(noisy, b)) for b in batches]
    loop = FeedbackLoop(noisy, "thompson:16", seed=3, instance="replay")

    async def main():
        return await asyncio.gather(*(loop.explore_async(*_explore_args(noisy, b)) for b in batches))
    got = asyncio.run(main())
    loop.close()
    for (ch, prop, probs), (ch2, prop2, probs2) in zip(expect, got):
        assert np.array_equal(ch, ch2) and np.array_equal(prop, prop2)
        assert np.array_equal(probs, probs2)
    # the draws did differ between LLMs somewhere (the comparison is not of point masses)
    assert any(((p > 0) & (p < 1)).any() for _, _, p in expect)


def test_a_restarted_app_makes_a_new_sampling_thread(noisy):
    loop = FeedbackLoop(noisy, "thompson:4", seed=0, instance="i")
    for _ in range(2):   # close() between the two, as an app's shutdown does
        out = asyncio.run(loop.explore_async(*_explore_args(noisy, ["a b"])))
        assert out[1].shape == (1,)
        loop.close()
