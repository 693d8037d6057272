"""``recsys-router serve`` refuses limits that would make the service refuse every request
(zero or negative batch, body and text limits, a NaN batch wait, a zero or infinite body
deadline or graceful timeout, no connection allowed) when it starts, before the artifact is
even read; ``judge serve`` takes the same connection and timing limits."""

from __future__ import annotations

import pytest

from recsys_router.cli import build_parser, main


@pytest.mark.parametrize("flag,value,msg", [
    ("--max-batch", "0", "expected a whole number >= 1"), ("--max-batch", "-3", "expected a whole number >= 1"),
    ("--max-body-bytes", "-1", "expected a whole number >= 1"),
    ("--max-text-chars", "0", "expected a whole number >= 1"),
    ("--batch-wait-ms", "nan", "expected a finite number"), ("--batch-wait-ms", "-1", "expected a finite number >= 0"),
    ("--log-batch", "0", "expected a whole number >= 1"), ("--log-flush-ms", "0", "expected a finite number > 0"),
    ("--body-timeout-s", "0", "expected a finite number > 0"), ("--body-timeout-s", "inf", "expected a finite"),
    ("--graceful-timeout-s", "nan", "expected a finite"), ("--keep-alive-s", "-1", "expected a finite number > 0"),
    ("--limit-concurrency", "0", "expected a whole number >= 1"),
    ("--log-timeout-s", "0", "expected a finite number > 0"), ("--log-timeout-s", "inf", "expected a finite")])
def test_serve_limits_checked_at_start(tmp_path, capsys, flag, value, msg):
    with pytest.raises(SystemExit) as ei:
        main(["serve", str(tmp_path / "no-artifact"), flag, value])
    assert ei.value.code == 2
    assert f"argument {flag}: {msg}" in capsys.readouterr().err


def test_serve_defaults_still_parse():
    a = build_parser().parse_args(["serve", "art"])
    assert (a.max_batch, a.max_body_bytes, a.max_text_chars, a.batch_wait_ms, a.log_batch, a.log_flush_ms) \
        == (256, 1_000_000, 100_000, 2.0, 256, 200.0)
    assert (a.log_timeout_s, a.instance) == (5.0, None)
    a = build_parser().parse_args(["serve", "art", "--batch-wait-ms", "0", "--max-batch", "1"])
    assert (a.batch_wait_ms, a.max_batch) == (0.0, 1)


def test_server_limits_default_and_reach_uvicorn():
    from recsys_router.cli.serve import uvicorn_limits
    for argv in (["serve", "art"], ["judge", "serve", "--data", "d", "--routers", "a,b", "--db", "j.db"]):
        a = build_parser().parse_args(argv)
        assert a.body_timeout_s == 30.0
        assert uvicorn_limits(a) == {"limit_concurrency": 1000, "timeout_keep_alive": 5.0,
                                     "timeout_graceful_shutdown": 30.0}
    a = build_parser().parse_args(["serve", "art", "--body-timeout-s", "0.5", "--limit-concurrency", "7",
                                   "--keep-alive-s", "2.5", "--graceful-timeout-s", "1"])
    assert a.body_timeout_s == 0.5
    assert uvicorn_limits(a) == {"limit_concurrency": 7, "timeout_keep_alive": 2.5,
                                 "timeout_graceful_shutdown": 1.0}


def test_judge_serve_limits_checked_at_start(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["judge", "serve", "--data", "d", "--routers", "a,b", "--db", "j.db", "--body-timeout-s", "0"])
    assert ei.value.code == 2 and "argument --body-timeout-s: expected a finite number > 0" in capsys.readouterr().err
