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


@pytest.fixture(scope="module")
def word_artifact(tmp_path_factory, sim_split):
    from recsys_router.export import export_router
    from toy_routers import WordRouter
    tr = sim_split["train"]
    out = tmp_path_factory.mktemp("art") / "word"
    export_router(WordRouter().fit(tr), out, train_data=tr)
    return out


@pytest.mark.parametrize("flag,value,msg", [
    ("--log-level", "foo", "invalid choice: 'foo' (choose from 'critical', 'error', 'warning', "
                           "'info', 'debug', 'trace')"),
    ("--log-level", "WARNING", "invalid choice: 'WARNING'"),   # uvicorn reads lower case only
    ("--log-batch", "20000", "expected a whole number from 1 to 10000 (the decision log queues at "
                             "most 10000 rows), got '20000'"),
    ("--log-batch", "10001", "expected a whole number from 1 to 10000"),
])
def test_log_flags_refused_at_parse_time_before_anything_happens(word_artifact, tmp_path, capsys,
                                                                 monkeypatch, flag, value, msg):
    """--log-level foo loaded the artifact, printed "serving ... on http://..." and then failed
    inside uvicorn with "error: foo"; --log-batch 20000 failed with an error about
    max_pending (no flag) after the --log-db file was made. Both now stop at parsing."""
    import uvicorn
    started = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: started.append(kw))
    db = tmp_path / "decisions.db"
    with pytest.raises(SystemExit) as ei:
        main(["serve", str(word_artifact), "--log-db", str(db), flag, value])
    out, err = capsys.readouterr()
    assert ei.value.code == 2
    assert f"argument {flag}: {msg}" in err
    assert "serving" not in err and out == ""
    assert not started and list(tmp_path.iterdir()) == []   # no log file made


def test_the_largest_log_batch_and_every_log_level_still_start(word_artifact, tmp_path, monkeypatch):
    import uvicorn
    from uvicorn.config import LOG_LEVELS as UVICORN_LEVELS

    from recsys_router.cli.serve import LOG_LEVELS, MAX_LOG_BATCH
    from recsys_router.feedback.writer import MAX_PENDING
    assert set(LOG_LEVELS) == set(UVICORN_LEVELS) and MAX_LOG_BATCH == MAX_PENDING == 10_000
    started = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.append((app, kw)))
    for level in LOG_LEVELS:
        assert main(["serve", str(word_artifact), "--log-level", level]) == 0
    assert [kw["log_level"] for _, kw in started] == list(LOG_LEVELS)
    db = tmp_path / "d.db"
    assert main(["serve", str(word_artifact), "--log-db", str(db), "--log-batch", "10000"]) == 0
    app = started[-1][0]
    assert app.state.feedback_loop.writer.batch_size == 10_000
    app.state.feedback_loop.close()


def test_service_config_names_a_log_batch_over_the_queue_bound():
    import pydantic

    from recsys_router.serving import ServiceConfig
    assert ServiceConfig(log_batch=10_000).log_batch == 10_000
    with pytest.raises(pydantic.ValidationError, match="log_batch"):
        ServiceConfig(log_batch=10_001)
