"""How an artifact's files are read: a file swapped after its checksum is computed cannot be
loaded, and numbers or sizes no float or machine can hold are refused with an ArtifactError
naming the file and field (never an OverflowError, TypeError or EOFError)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

import recsys_router.export.verify as verify_mod
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import ArtifactError, export_router, load_router
from recsys_router.registry import make_router
from test_artifact_probes import _man, _put_man, refix

KEY = "s3cret-key"


@pytest.fixture(scope="module")
def data():
    return make_synthetic(40, 3, 2, seed=0)


@pytest.fixture(scope="module")
def goods(data, tmp_path_factory):
    root = tmp_path_factory.mktemp("good")
    return {
        "signed": export_router(make_router("best-single").fit(data), root / "signed",
                                train_data=data, sign_key=KEY),
        "cascade": export_router(make_router("cascade").fit(data), root / "cascade",
                                 train_data=data),
    }


@pytest.fixture
def signed(goods, tmp_path):
    return Path(shutil.copytree(goods["signed"], tmp_path / "signed"))


@pytest.fixture
def cascade(goods, tmp_path):
    return Path(shutil.copytree(goods["cascade"], tmp_path / "cascade"))




# ------------------------------------------------------------------ swapped after hashing
def _evil_files(d: Path) -> dict:
    """Replacements for both files that load cleanly on their own and name another LLM."""
    doc = json.loads((d / "state.json").read_text())
    names = [r["name"] for r in _man(d)["llms"]]
    with np.load(d / "weights.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    other = (doc["state"]["best_index_"] + 1) % len(names)
    doc["state"]["best_index_"], doc["state"]["best_llm_"] = other, names[other]
    evil_state = json.dumps(doc).encode()
    arrays["mean_scores_"] = arrays["mean_scores_"][::-1].copy()
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return {"state.json": evil_state, "weights.npz": buf.getvalue()}


class _SwapAfterDigest:
    """Stands in for ``hashlib`` in the verifier: once a file's digest equals its recorded
    checksum, that file is replaced on disk (an attacker winning the race between the
    check and the read)."""

    def __init__(self, d: Path, evil: dict):
        self.d, self.evil, self.swapped = d, evil, []
        self.want = {v: k for k, v in _man(d)["files"].items()}

    def __getattr__(self, name):
        return getattr(hashlib, name)

    def sha256(self, *args):
        real, outer = hashlib.sha256(*args), self

        class _H:
            def __getattr__(self, name):
                return getattr(real, name)

            def hexdigest(self):
                value = real.hexdigest()
                name = outer.want.get(value)
                if name is not None and name not in outer.swapped:
                    (outer.d / ".swap").write_bytes(outer.evil[name])
                    (outer.d / ".swap").replace(outer.d / name)
                    outer.swapped.append(name)
                return value

        return _H()


@pytest.mark.parametrize("key", [KEY, None], ids=["signed", "unsigned"])
def test_file_swapped_after_its_checksum_is_not_loaded(signed, data, monkeypatch, key):
    original = load_router(signed, sign_key=KEY)
    want_best = original.router.best_llm_
    want_scores = original.router.mean_scores_.copy()
    evil = _evil_files(signed)
    swap = _SwapAfterDigest(signed, evil)
    monkeypatch.setattr(verify_mod, "hashlib", swap)
    try:
        loaded = load_router(signed, sign_key=key)
    except ArtifactError:
        loaded = None
    monkeypatch.undo()
    assert sorted(swap.swapped) == ["state.json", "weights.npz"]  # the race was run
    if loaded is not None:  # what loads is what was checked, never the swapped-in files
        assert loaded.router.best_llm_ == want_best
        np.testing.assert_array_equal(loaded.router.mean_scores_, want_scores)
    # the swapped files on their own are a valid artifact naming another LLM: only the
    # checksum keeps them out
    assert (signed / "state.json").read_bytes() == evil["state.json"]
    with pytest.raises(ArtifactError, match="state.json: checksum mismatch"):
        load_router(signed)
    refix(signed)
    assert load_router(signed).router.best_llm_ != want_best


def test_weights_larger_than_the_declared_arrays_are_not_read(signed):
    """weights.npz is read whole, so its size is capped by what the manifest declares."""
    with open(signed / "weights.npz", "ab") as fh:
        fh.write(b"\0" * (1 << 20))
    refix(signed)
    with pytest.raises(ArtifactError, match=r"weights.npz: 1,0\d\d,\d\d\d bytes, more than the "
                                            r"\d\d,\d\d\d allowed"):
        load_router(signed)


# ------------------------------------------------------------------ numbers beyond a float
HUGE = 10**400   # valid JSON, an int no float can hold


def _set_manifest(d: Path, **fields) -> None:
    _put_man(d, {**_man(d), **fields})


@pytest.mark.parametrize("field, value, match", [
    ("metrics", {"x": HUGE}, r"manifest.json: metrics.x: expected a float, got an integer of "
                             r"401 digits"),
    ("default_policy", {"name": "wtp", "value": HUGE},
     r"manifest.json: policy 'wtp' needs a finite value >= 0, got an integer of 401 digits"),
    ("default_policy", {"name": "budget", "value": -HUGE},
     r"manifest.json: policy 'budget' needs a finite value >= 0, got an integer of 401 digits"),
])
def test_huge_integer_in_a_manifest_number_is_refused(signed, field, value, match):
    _set_manifest(signed, **{field: value})
    with pytest.raises(ArtifactError, match=match):
        load_router(signed)


def test_huge_integer_in_a_state_float_is_refused(cascade):
    doc = json.loads((cascade / "state.json").read_text())
    assert isinstance(doc["state"]["threshold_"], float)
    doc["state"]["threshold_"] = HUGE
    (cascade / "state.json").write_text(json.dumps(doc))
    refix(cascade)
    with pytest.raises(ArtifactError, match=r"state.json.*threshold_: expected a float, got an "
                                            r"integer of 401 digits, beyond the range of a float"):
        load_router(cascade)


def test_huge_integers_in_checked_values():
    from recsys_router.state import FLOAT, NUM, StateError, check_value
    with pytest.raises(StateError, match=r"^x: expected a finite number, got an integer of 401"):
        check_value(NUM, HUGE, "x")
    with pytest.raises(StateError, match=r"^x: expected a float, got an integer of 1234 digits"):
        check_value(FLOAT, 10**1233, "x")
    assert check_value(NUM, 10**300, "x") == 10**300 and check_value(FLOAT, 2, "x") == 2.0


# ------------------------------------------------------------------ truncated zip member
def _truncated_npz(n: int, present: int) -> bytes:
    """A zip of one stored member ``x.npy`` (float64, shape ``(n,)``) whose directory entries
    claim the whole member while only ``present`` data bytes follow its header."""
    import struct
    head = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d,), }" % n
    head += " " * (64 - (10 + len(head) + 1) % 64) + "\n"
    npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode()
    size = len(npy) + 8 * n
    npy += b"\0" * present
    name = b"x.npy"
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, 0, size, size, len(name),
                        0) + name
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, 0, size, size,
                          len(name), 0, 0, 0, 0, 0, 0) + name
    body = local + npy
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), len(body), 0)
    return body + central + end


@pytest.mark.parametrize("present", [80, 4200], ids=["in-header-read", "in-data-read"])
def test_truncated_npz_member_is_refused(signed, present):
    raw = _truncated_npz(1000, present)
    with zipfile.ZipFile(io.BytesIO(raw)) as z:    # the archive itself opens: only the
        with pytest.raises(EOFError):              # member's bytes run out
            z.read("x.npy")
    (signed / "weights.npz").write_bytes(raw)
    _set_manifest(signed, arrays={"x": {"dtype": "float64", "shape": [1000]}})
    refix(signed)
    with pytest.raises(ArtifactError, match=r"weights.npz: array 'x' is unreadable \(truncated: "
                                            r"the archive ends inside it\)"):
        load_router(signed)


# ------------------------------------------------------------------ absurd sizes
@pytest.mark.parametrize("shape", [[10**4000, 10**4000], [10**4000, 0], [2**62 + 1]],
                         ids=["product-over-4300-digits", "times-zero", "just-over-2**62"])
def test_absurd_declared_size_is_refused(signed, shape):
    man = _man(signed)
    man["arrays"]["mean_scores_"]["shape"] = shape
    (signed / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ArtifactError, match=r"manifest.json: arrays.mean_scores_.shape: a size "
                                            r"over 2\*\*62"):
        load_router(signed)


def test_absurd_npy_header_size_is_refused(tmp_path):
    """A header's shape is read with ast.literal_eval, which takes hexadecimal: 3,900 hex
    digits fit the 4 KiB header and make a size of about 4,700 decimal digits, more than Python
    formats."""
    from recsys_router.export.safe_io import LimitError, NpzReader
    head = "{'descr': '<f8', 'fortran_order': False, 'shape': (0x%s,), }" % ("f" * 3900)
    head += " " * (64 - (10 + len(head) + 1) % 64) + "\n"
    npy = b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head.encode()
    p = tmp_path / "w.npz"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("x.npy", npy)
    with NpzReader(p) as npz, pytest.raises(LimitError, match=r"w.npz:x: .npy header declares "
                                                              r"a dimension over 2\*\*62"):
        npz.header("x")


# ------------------------------------------------------------------ 1e400
@pytest.mark.parametrize("number", ["1e400", "-1e400", "1" + "0" * 400 + ".0"],
                         ids=["1e400", "-1e400", "401-digit-float"])
def test_json_number_that_overflows_a_float_is_refused(tmp_path, number):
    from recsys_router.export.safe_io import LimitError, read_json
    assert json.loads('{"x": %s}' % number)["x"] in (float("inf"), float("-inf"))
    p = tmp_path / "x.json"
    p.write_text('{"x": %s}' % number)
    with pytest.raises(LimitError, match=r"x.json: not valid JSON \(number .* is beyond the "
                                         r"range of a float\)"):
        read_json(p, max_bytes=1000, max_depth=4)
    p.write_text('{"x": 1e308, "y": -2.5e-320}')   # large and subnormal floats still read
    assert read_json(p, max_bytes=1000, max_depth=4) == {"x": 1e308, "y": -2.5e-320}


def test_state_float_written_as_1e400_is_refused(cascade):
    doc = json.loads((cascade / "state.json").read_text())
    text = json.dumps(doc).replace('"threshold_": %s' % json.dumps(doc["state"]["threshold_"]),
                                   '"threshold_": 1e400')
    assert "1e400" in text
    (cascade / "state.json").write_text(text)
    refix(cascade)
    with pytest.raises(ArtifactError, match=r"cascade/state.json: not valid JSON \(number 1e400"):
        load_router(cascade)


# ------------------------------------------------------------------ zip flag bits
def _set_zip_flags(path: Path, bit: int, headers=(b"PK\x03\x04", b"PK\x01\x02")) -> None:
    """OR ``bit`` into the general-purpose flags of every local (offset 6) and/or central
    directory (offset 8) header of the zip at ``path``."""
    import struct
    raw = bytearray(path.read_bytes())
    for sig in headers:
        off = 6 if sig == b"PK\x03\x04" else 8
        i = raw.find(sig)
        while i >= 0:
            struct.pack_into("<H", raw, i + off, struct.unpack_from("<H", raw, i + off)[0] | bit)
            i = raw.find(sig, i + 4)
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("bit, headers", [
    (0x1, (b"PK\x03\x04", b"PK\x01\x02")), (0x20, (b"PK\x03\x04", b"PK\x01\x02")),
    (0x40, (b"PK\x03\x04", b"PK\x01\x02")), (0x1, (b"PK\x03\x04",))],
    ids=["encrypted", "patched-data", "strong-encryption", "encrypted-local-header-only"])
def test_encrypted_or_patched_zip_member_is_refused(signed, bit, headers):
    """zipfile raises RuntimeError (bit 0) or NotImplementedError (bits 5, 6) for these; the
    loader names the file and the array instead, and never reads a flagged member."""
    _set_zip_flags(signed / "weights.npz", bit, headers)
    refix(signed)
    with pytest.raises(ArtifactError, match=r"weights.npz: array 'mean_\w+' is encrypted or "
                                            r"patched \(zip flag bits"):
        load_router(signed)


# ------------------------------------------------------------------ empty but unindexable
def _npy_header(descr: str, shape) -> bytes:
    head = repr({"descr": descr, "fortran_order": False, "shape": tuple(shape)})
    head += " " * (64 - (10 + len(head) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head.encode()


@pytest.mark.parametrize("shape", [[2**62, 2**62, 0], [2**31] * 4 + [0], [2**60, 0]],
                         ids=["2**62-squared-times-0", "2**124-times-0", "2**63-bytes-times-0"])
def test_empty_array_with_unindexable_shape_is_refused(signed, shape):
    """0 bytes, every size <= 2**62, manifest and .npy header agreeing: numpy still cannot
    make the shape (its non-zero sizes x 8 bytes pass 2**63) and raised a bare ValueError."""
    with np.load(signed / "weights.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    with zipfile.ZipFile(signed / "weights.npz", "w", zipfile.ZIP_STORED) as z:
        for k, v in arrays.items():
            buf = io.BytesIO()
            np.save(buf, v)
            z.writestr(k + ".npy", buf.getvalue())
        z.writestr("z_.npy", _npy_header("<f8", shape))
    man = _man(signed)
    man["arrays"]["z_"] = {"dtype": "float64", "shape": shape}
    _put_man(signed, man)
    refix(signed)
    with pytest.raises(ArtifactError, match=r"manifest.json: arrays.z_.shape: .* its sizes other "
                                            r"than 0 times the 8-byte item exceed 2\*\*62"):
        load_router(signed)


def test_npy_header_with_unindexable_empty_shape_is_refused(tmp_path):
    from recsys_router.export.safe_io import LimitError, NpzReader
    p = tmp_path / "w.npz"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("x.npy", _npy_header("<f8", (2**60, 0)))
        z.writestr("y.npy", _npy_header("<f8", (2**59, 0)))   # 2**59 x 8 = 2**62: the bound
        z.writestr("b.npy", _npy_header("|b1", (2**62, 1, 0)))
    with NpzReader(p) as npz:
        with pytest.raises(LimitError, match=r"w.npz:x: .npy header declares shape "
                                             r"\(1152921504606846976, 0\), whose sizes other "
                                             r"than 0 times the 8-byte item exceed 2\*\*62"):
            npz.header("x")
        assert npz.read("y", 0).shape == (2**59, 0)
        assert npz.read("b", 0).shape == (2**62, 1, 0)


# ------------------------------------------------------------------ state.json amplification
def _state_with_junk(d: Path, n: int) -> None:
    """Keep state.json's class, add ``"junk": [{}, {}, ...]`` (n empty objects: 3 bytes
    each in the file, a 64-byte dict each once parsed)."""
    cls = json.loads((d / "state.json").read_text())["class"]
    (d / "state.json").write_text('{"class": %s, "params": {}, "tuple_params": [], "state": '
                                  '{"junk": [%s]}}' % (json.dumps(cls), ",".join(["{}"] * n)))
    refix(d)


def test_state_json_of_empty_objects_over_the_item_cap_is_refused_before_parsing(cascade):
    import time
    cap = 500_000
    _state_with_junk(cascade, cap // 2 + 10)   # 2 items per "{}," plus the document's own
    assert (cascade / "state.json").stat().st_size < verify_mod.LIMITS["state_bytes"]
    t = time.perf_counter()
    with pytest.raises(ArtifactError, match=r"cascade/state.json: 500,0\d\d JSON items \(brackets, "
                                            r"commas and colons\), more than the 500,000 allowed"):
        load_router(cascade)
    assert time.perf_counter() - t < 10   # a linear scan, no parse (about 0.5 s)
    assert verify_mod.LIMITS["state_items"] == cap


def test_state_json_over_the_byte_cap_is_refused_before_reading(cascade):
    cap = verify_mod.LIMITS["state_bytes"]
    assert cap == 16 << 20
    cls = json.loads((cascade / "state.json").read_text())["class"]
    head = '{"class": %s, "params": {}, "tuple_params": [], "state": {"junk": "' % json.dumps(cls)
    (cascade / "state.json").write_text(head + "x" * (cap + 1 - len(head) - 3) + '"}}')
    assert (cascade / "state.json").stat().st_size == cap + 1
    refix(cascade)
    with pytest.raises(ArtifactError, match=r"cascade/state.json: 16,777,217 bytes, more than "
                                            r"the 16,777,216 allowed"):
        load_router(cascade)


def test_item_cap_is_exact():
    """``[{}, ... n]`` holds 1 + n + (n - 1) = 2n items: n = 500 is at a cap of 1,000."""
    from recsys_router.export.safe_io import LimitError, parse_json
    text = lambda n: ("[" + ", ".join(["{}"] * n) + "]").encode()  # noqa: E731
    assert len(parse_json(text(500), "x.json", max_depth=4, max_items=1000)) == 500
    with pytest.raises(LimitError, match=r"x.json: 1,002 JSON items .* more than the 1,000"):
        parse_json(text(501), "x.json", max_depth=4, max_items=1000)


def test_genuine_large_pool_artifact_still_loads(tmp_path):
    """8,500 LLMs named with 200 characters (RouterEval-scale pool, long names): a 1.8 MB
    state.json, far inside the caps, loads."""
    from recsys_router.data import RoutingData
    d = make_synthetic(30, 8500, 3, seed=0, with_text=False)
    llms = d.llms.copy()
    llms["name"] = [f"org-{i:05d}/" + "x" * 190 for i in range(8500)]
    d = RoutingData(d.queries, llms, d.scores, d.costs)
    out = export_router(make_router("best-single").fit(d), tmp_path / "big", train_data=d)
    assert (out / "state.json").stat().st_size > 8500 * 200
    assert list(load_router(out).router.llm_names_) == list(llms["name"])
