"""``recsys-router serve`` refuses limits that would make the service refuse every request
(zero or negative batch, body and text limits, a NaN batch wait) when it starts, before the
artifact is even read."""

from __future__ import annotations

import pytest

from recsys_router.cli import build_parser, main


@pytest.mark.parametrize("flag,value,msg", [
    ("--max-batch", "0", "expected a whole number >= 1"), ("--max-batch", "-3", "expected a whole number >= 1"),
    ("--max-body-bytes", "-1", "expected a whole number >= 1"),
    ("--max-text-chars", "0", "expected a whole number >= 1"),
    ("--batch-wait-ms", "nan", "expected a finite number"), ("--batch-wait-ms", "-1", "expected a finite number >= 0"),
    ("--log-batch", "0", "expected a whole number >= 1"), ("--log-flush-ms", "0", "expected a finite number > 0")])
def test_serve_limits_checked_at_start(tmp_path, capsys, flag, value, msg):
    with pytest.raises(SystemExit) as ei:
        main(["serve", str(tmp_path / "no-artifact"), flag, value])
    assert ei.value.code == 2
    assert f"argument {flag}: {msg}" in capsys.readouterr().err


def test_serve_defaults_still_parse():
    a = build_parser().parse_args(["serve", "art"])
    assert (a.max_batch, a.max_body_bytes, a.max_text_chars, a.batch_wait_ms, a.log_batch, a.log_flush_ms) \
        == (256, 1_000_000, 100_000, 2.0, 256, 200.0)
    a = build_parser().parse_args(["serve", "art", "--batch-wait-ms", "0", "--max-batch", "1"])
    assert (a.batch_wait_ms, a.max_batch) == (0.0, 1)
