"""The JSON depth pre-scan of artifact files (``safe_io.json_depth``): exact depths on
hand-computed texts, chunk boundaries that split an escape or a string, and crafted texts
that made the old regex scan quadratic (they must now finish like any other text)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from recsys_router.export.safe_io import LimitError, json_depth, json_scan, read_json

CASES = [
    (b"", 0),
    (b"1", 0),
    (b"[]", 1),
    (b'{"a": [[1], "[[["]}', 3),              # brackets inside a string do not count
    (rb'["a\\", [2]]', 2),                     # an escaped backslash closes the string
    (rb'["a\"[[[", 1]', 1),                    # an escaped quote does not close it
    (rb'["\\\"[[", [[[]]]]', 4),               # \\ then \" : still inside the string
    (rb'["\\\\", [[]]]', 3),                   # four backslashes: two escapes, string ends
    (b'[[]][[[]]]', 3),                        # siblings: depth resets between them
    (b'"[[[[', 0),                             # an unterminated string hides the rest
    (b']]][', 0),                              # unbalanced: the parser stops at the first ]
]


@pytest.mark.parametrize("raw,depth", CASES)
def test_depth_of_hand_computed_texts(raw, depth):
    assert json_depth(raw) == depth


@pytest.mark.parametrize("raw,depth", CASES)
@pytest.mark.parametrize("chunk", [1, 2, 3, 5])
def test_chunk_boundaries_do_not_change_the_depth(raw, depth, chunk):
    """Tiny chunks split backslash runs and strings across boundaries."""
    assert json_depth(raw, chunk=chunk) == depth


def _reference(raw: bytes) -> tuple[int, bool]:
    """A plain byte loop: strings skipped, escapes honoured; it stops where a parser stops
    too, at a backslash outside a string. Returns ``(depth, whether it read every byte)``."""
    depth = best = 0
    inside = escaped = False
    for c in raw:
        if not inside and c == 0x5C:
            return best, False
        if inside:
            if escaped:
                escaped = False
            elif c == 0x5C:
                escaped = True
            elif c == 0x22:
                inside = False
        elif c == 0x22:
            inside = True
        elif c in b"[{":
            depth += 1
            best = max(best, depth)
        elif c in b"]}":
            depth -= 1
    return best, True


def test_random_texts_match_the_byte_loop():
    """Equal where every byte is readable JSON lexically; never less before a parse error."""
    rng = np.random.default_rng(0)
    alphabet = np.frombuffer(b'[]{}"\\a, ', dtype=np.uint8)
    for _ in range(300):
        raw = rng.choice(alphabet, size=int(rng.integers(0, 60))).tobytes()
        want, whole = _reference(raw)
        got = json_depth(raw)
        assert got == want if whole else got >= want, raw
        assert json_depth(raw, chunk=int(rng.integers(1, 8))) == got, raw


def test_real_documents_match_the_parser_depth():
    doc = {"a": [{"b": [[1, "x\\\"]]"], {}]}], "c": "\\", "d": [[[[[]]]]]}
    assert json_depth(json.dumps(doc).encode()) == 6
    assert json_depth(json.dumps(doc, indent=1).encode(), chunk=7) == 6


@pytest.mark.parametrize("n", [32_000, 200_000])
def test_crafted_escaped_quotes_finish(n):
    """'"' then n escaped quotes: the old regex restarted at every quote (64 KB: 29 s).
    Here a 400 KB text is one pass; the whole string is one unterminated string."""
    raw = b'"' + b'\\"' * n
    assert json_depth(raw) == 0
    assert json_depth(raw + b"[[") == 0                     # still inside the string
    assert json_depth(b"[" + raw + b'"' + b"[[") == 3      # closed by the last quote


def test_crafted_manifest_is_refused_as_invalid_json(tmp_path):
    p = tmp_path / "manifest.json"
    p.write_bytes(b'"' + b'\\"' * 32_000)  # 64 KB
    with pytest.raises(LimitError, match="manifest.json: not valid JSON"):
        read_json(p, max_bytes=1 << 20, max_depth=16)


def test_too_deep_is_refused_with_the_file_name(tmp_path):
    p = tmp_path / "state.json"
    p.write_bytes(b'{"a": ' + b"[" * 20 + b"]" * 20 + b', "s": "' + b"[" * 100 + b'"}')
    with pytest.raises(LimitError, match=r"state.json: JSON nested 21 deep"):
        read_json(p, max_bytes=1 << 20, max_depth=16)
    assert read_json(p, max_bytes=1 << 20, max_depth=21)["s"] == "[" * 100


def _reference_items(raw: bytes) -> int:
    """Count ``{ [ , :`` outside strings with a plain byte loop (escapes honoured)."""
    count, inside, escaped = 0, False, False
    for c in raw:
        if inside:
            if escaped:
                escaped = False
            elif c == 0x5C:
                escaped = True
            elif c == 0x22:
                inside = False
        elif c == 0x22:
            inside = True
        elif c in b"{[,:":
            count += 1
    return count


@pytest.mark.parametrize("raw, items", [
    (b"", 0), (b"1", 0), (b"[]", 1), (b"[1, 2, 3]", 3), (b'{"a": 1, "b": [{}]}', 6),
    (b'["{,:[", ":"]', 2),                 # marks inside strings do not count
    (rb'["a\", [", 1]', 2),                # an escaped quote keeps the string open
])
def test_item_count_of_hand_computed_texts(raw, items):
    assert json_scan(raw)[1] == items
    assert all(json_scan(raw, chunk=c)[1] == items for c in range(1, 6))


def test_item_count_matches_the_byte_loop_on_valid_json():
    rng = np.random.default_rng(1)
    for _ in range(200):
        doc = [{"k%d" % i: [int(rng.integers(9))] * int(rng.integers(3)), "s": '",:\\[{'[:i]}
               for i in range(int(rng.integers(0, 6)))]
        raw = json.dumps(doc).encode()
        assert json_scan(raw) == (json_depth(raw), _reference_items(raw)), raw
        assert json_scan(raw, chunk=int(rng.integers(1, 8)))[1] == _reference_items(raw), raw
