"""The in-memory LRU charges each entry its vector's bytes, so an entry must hold only that
vector: never a row view that keeps a whole disk shard or computed batch alive."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.encoders import HashingEncoder
from recsys_router.encoders import cache as cache_mod
from recsys_router.encoders.cache import DiskCache, MemoryLRU, text_key


pytestmark = pytest.mark.usefixtures("isolated_embedding_cache")


def _owns_only_itself(vec: np.ndarray, dim: int) -> bool:
    return vec.base is None and vec.flags.owndata and vec.nbytes == dim * 4


def test_rows_read_from_a_shard_do_not_share_the_shard(tmp_path):
    n, dim = 500, 16
    keys = [f"{i:040x}" for i in range(n)]
    DiskCache("t", dim, root=tmp_path).put(keys, np.arange(n * dim, dtype=np.float32)
                                           .reshape(n, dim))
    got = DiskCache("t", dim, root=tmp_path).get([keys[1], keys[7]])
    np.testing.assert_array_equal(got[keys[7]], np.arange(7 * dim, 8 * dim, dtype=np.float32))
    assert all(_owns_only_itself(v, dim) for v in got.values())
    assert not np.shares_memory(got[keys[1]], got[keys[7]])


def test_lru_copies_a_view_it_is_given():
    shard = np.ones((1000, 8), np.float32)
    lru = MemoryLRU(max_bytes=1 << 20)
    lru.put(("e", "k"), shard[3])
    kept = lru.get(("e", "k"))
    assert not np.shares_memory(kept, shard) and _owns_only_itself(kept, 8)
    assert lru.nbytes == 8 * 4 + lru.entry_overhead
    own = np.zeros(8, np.float32)
    lru.put(("e", "own"), own)        # an array that is already its own is kept as it is
    assert lru.get(("e", "own")) is own


@pytest.mark.parametrize("source", ["computed", "disk"])
def test_encoder_caches_rows_not_batches(source):
    enc = HashingEncoder(dim=32, cache=True)   # hashing skips the cache unless asked
    texts = [f"text number {i}" for i in range(50)]
    first = enc.encode(texts)
    if source == "disk":      # memory emptied: the rows come back from the disk shard
        cache_mod.MEMORY_CACHE.clear()
        np.testing.assert_array_equal(HashingEncoder(dim=32, cache=True).encode(texts), first)
    for i, t in enumerate(texts):
        kept = cache_mod.MEMORY_CACHE.get((enc.identity, text_key(t)))
        assert kept is not None and _owns_only_itself(kept, 32)
        np.testing.assert_array_equal(kept, first[i])
