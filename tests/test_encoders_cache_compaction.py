"""Single-text writes merge only the small shards; a large shard is never rewritten."""

from __future__ import annotations

import numpy as np

from recsys_router.encoders.cache import DiskCache


def test_small_writes_leave_the_big_shard_alone(tmp_path):
    c = DiskCache("t", 4, root=tmp_path, max_shards=3, small_bytes=2000)
    big_keys = [f"big{i}" for i in range(200)]
    c.put(big_keys, np.arange(800, dtype=np.float32).reshape(200, 4))
    big = c._shards()
    assert len(big) == 1 and big[0].stat().st_size >= 2000
    for i in range(10):
        c.put([f"s{i}"], np.full((1, 4), i, np.float32))
    shards = c._shards()
    assert big[0] in shards                       # the big shard was not merged or rewritten
    assert len(c._small_shards()) <= 3           # small ones were merged along the way
    fresh = DiskCache("t", 4, root=tmp_path)     # everything is still readable, values intact
    got = fresh.get(["big7", "s0", "s9", "nope"])
    assert sorted(got) == ["big7", "s0", "s9"]
    np.testing.assert_array_equal(got["big7"], [28, 29, 30, 31])
    np.testing.assert_array_equal(got["s9"], [9, 9, 9, 9])
    c.compact()                                   # an explicit compact still merges everything
    assert len(c._shards()) == 1 and len(DiskCache("t", 4, root=tmp_path)) == 210
