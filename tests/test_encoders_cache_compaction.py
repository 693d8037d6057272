"""Disk cache files: single-text writes merge only the small shards (a large shard is never
rewritten), and a killed write leaves no temporary that outlives the next write."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.encoders import base
from recsys_router.encoders.cache import DiskCache, host_tag, text_key


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


def test_a_killed_write_leaves_no_temporary_behind(tmp_path):
    """A writer killed with SIGKILL mid-shard leaves ``.tmp-HOST-PID-*``; the next write removes
    it (its process is gone) and keeps the temporary of a live writer."""
    import os
    import subprocess
    import sys
    import uuid
    child = f"""
import os, signal, numpy as np
from recsys_router.encoders import base
from recsys_router.encoders.cache import DiskCache, host_tag, text_key
def dying(f, **kw):
    f.write(b"PK half a shard"); f.flush(); os.kill(os.getpid(), signal.SIGKILL)
np.savez = dying
DiskCache("t", 4, root={str(tmp_path)!r}).put(["a" * 40], np.ones((1, 4), np.float32))
"""
    assert subprocess.run([sys.executable, "-c", child]).returncode == -9
    c = DiskCache("t", 4, root=tmp_path)
    left = [p.name for p in c.dir.iterdir() if p.name.startswith(".tmp-")]
    # the killed writer's host tag and pid
    assert len(left) == 1 and left[0].split("-")[1] == host_tag() and left[0].split("-")[2].isdigit()
    live = c.dir / f".tmp-{host_tag()}-{os.getpid()}-{uuid.uuid4().hex}"  # a writer still running
    live.write_bytes(b"PK being written")
    c.put(["b" * 40], np.ones((1, 4), np.float32))
    names = sorted(p.name for p in c.dir.iterdir())
    assert left[0] not in names and live.name in names
    assert [n for n in names if n.startswith(".tmp-")] == [live.name]
    assert list(DiskCache("t", 4, root=tmp_path).get(["a" * 40, "b" * 40])) == ["b" * 40]


def test_old_pidless_temporaries_go_after_a_day(tmp_path):
    """Temporaries of versions before the pid tag (``.tmp-HEX``) are removed by the first
    write once older than a day; a young one (its writer may still run), a link and other
    names are kept, and a second write does not list the folder for them again."""
    import os
    import time
    import uuid
    c = DiskCache("t", 4, root=tmp_path)
    c.dir.mkdir(parents=True)
    old, young = c.dir / f".tmp-{uuid.uuid4().hex}", c.dir / f".tmp-{uuid.uuid4().hex}"
    link, other = c.dir / f".tmp-{uuid.uuid4().hex}", c.dir / ".tmp-notes"
    for p in (old, young, other):
        p.write_bytes(b"PK half a shard")
    link.symlink_to(other)
    two_days_ago = time.time() - 2 * 24 * 3600
    for p in (old, other):
        os.utime(p, (two_days_ago, two_days_ago))
    os.utime(link, (two_days_ago, two_days_ago), follow_symlinks=False)
    c.put(["a" * 40], np.ones((1, 4), np.float32))
    names = {p.name for p in c.dir.iterdir()}
    assert old.name not in names
    assert {young.name, link.name, other.name} <= names
    os.utime(young, (two_days_ago, two_days_ago))
    c.put(["b" * 40], np.ones((1, 4), np.float32))   # same object: tidied once already
    assert young.exists()
    DiskCache("t", 4, root=tmp_path).put(["c" * 40], np.ones((1, 4), np.float32))
    assert not young.exists() and link.is_symlink() and other.exists()


def test_another_hosts_temporaries_are_kept_until_a_day_old(tmp_path):
    """A cache folder shared by two hosts (NFS, a mounted volume): the other host's process ids
    mean nothing here, so its temporaries (a shard being written) are kept, whatever their
    pid, until older than a day; so are the host-less ones of the previous version."""
    import os
    import time
    import uuid
    c = DiskCache("t", 4, root=tmp_path)
    c.dir.mkdir(parents=True)
    other = "0123456789ab" if host_tag() != "0123456789ab" else "ba9876543210"
    dead = 2**22 + 12345                           # beyond Linux's pid_max: no process here
    young, old = (c.dir / f".tmp-{other}-{dead}-{uuid.uuid4().hex}" for _ in range(2))
    legacy_young, legacy_old = (c.dir / f".tmp-{dead}-{uuid.uuid4().hex}" for _ in range(2))
    mine = c.dir / f".tmp-{host_tag()}-{dead}-{uuid.uuid4().hex}"
    for p in (young, old, legacy_young, legacy_old, mine):
        p.write_bytes(b"PK being written")
    two_days_ago = time.time() - 2 * 24 * 3600
    for p in (old, legacy_old):
        os.utime(p, (two_days_ago, two_days_ago))
    c.put(["a" * 40], np.ones((1, 4), np.float32))
    left = {p.name for p in c.dir.iterdir() if p.name.startswith(".tmp-")}
    assert left == {young.name, legacy_young.name}


def test_a_writer_whose_temporary_vanished_keeps_its_vectors(tmp_path, monkeypatch):
    """Another host's tidy (or anything else) removes the shard being written: the encoder
    still returns the vectors it computed, with a warning, and later calls work."""
    from recsys_router.encoders import get_encoder
    monkeypatch.setattr(base, "_WARNED", set())
    monkeypatch.setattr(base, "_DISKS", {})
    real = np.savez

    def vanishing(f, **kw):
        real(f, **kw)
        os.unlink(f.name)

    import os
    monkeypatch.setattr(np, "savez", vanishing)
    texts = ["first text", "second text"]
    want = get_encoder("hashing", dim=16, cache=False).encode(texts)
    enc = get_encoder("hashing", dim=16, cache=True, cache_dir=tmp_path)
    with pytest.warns(RuntimeWarning, match="embedding cache .* not cached"):
        got = enc.encode(texts)
    np.testing.assert_array_equal(got, want)
    monkeypatch.setattr(np, "savez", real)
    np.testing.assert_array_equal(enc.encode(["third"]),
                                  get_encoder("hashing", dim=16, cache=False).encode(["third"]))
    assert DiskCache(enc.identity, 16, root=tmp_path).get([text_key("third")])  # cached now
