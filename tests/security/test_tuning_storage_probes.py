"""A ``tune --storage`` URL holds a database password: no error line, log record or file of
``tune`` may show it. Each probe runs the CLI (or ``open_study``) with a URL whose password is
known and looks for it, as written and URL-decoded, in everything the run printed, logged
and wrote. PostgreSQL probes use a throw-away database (``pg_util``; skipped with a reason
when no server answers) and uniquely named studies, deleted afterwards."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.distributions import IntDistribution

from pg_util import pg_url  # noqa: F401 - fixture
from recsys_router.cli import main
from recsys_router.tuning.study import open_study, redact_url
from tuning_data import synthetic_data_config

SEARCH = Path(__file__).resolve().parents[2] / "configs" / "search"
SECRET = "Sup3r-S3cret"


@pytest.fixture
def data_cfg(tmp_path):
    return synthetic_data_config(tmp_path / "data.yaml", dim=16, n_queries=120, n_llms=3, n_topics=2)


def _tune(data_cfg, out, url, name, *extra):
    return main(["tune", "--router", "knn", "-c", str(data_cfg), "--search",
                 str(SEARCH / "knn.yaml"), "--n-trials", "1", "--no-plots", "--no-progress",
                 "--storage", url, "--study-name", name, "--out", str(out), *extra])


def _refused(capsys, rc):
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert rc == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    return err, captured.out


def _password(url: str) -> str:
    return url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]


@pytest.mark.parametrize("extra, expect", [
    (["--metric", "val/e_p"], "optimises val/mu_o, not val/e_p"),
    (["--search", "OTHER"], "search space (hash)"),
    (["--router", "svm", "--search", str(SEARCH / "svm.yaml")], "router knn, not svm"),
], ids=["metric", "search-space", "router"])
def test_refusals_of_a_postgres_study_mask_the_password(tmp_path, data_cfg, capsys, pg_url,  # noqa: F811
                                                        extra, expect):
    password = _password(pg_url)
    name = f"sec-storage-{uuid.uuid4().hex[:10]}"
    other = tmp_path / "other.yaml"   # another knn search space
    other.write_text("params.k: {type: int, low: 1, high: 5}\n")
    extra = [str(other) if e == "OTHER" else e for e in extra]
    try:
        assert _tune(data_cfg, tmp_path / "first", pg_url, name) == 0
        capsys.readouterr()
        err, out = _refused(capsys, _tune(data_cfg, tmp_path / "second", pg_url, name, *extra))
        assert expect in err
        user = pg_url.split("://", 1)[1].split(":", 1)[0]
        assert f"{user}:***@" in err and f":{password}@" not in err and f":{password}@" not in out
        assert not (tmp_path / "second").exists()
        written = [p for p in (tmp_path / "first").rglob("*") if p.is_file()]
        assert written and not any(f":{password}@".encode() in p.read_bytes() for p in written)
    finally:
        optuna.delete_study(study_name=name, storage=pg_url)


def test_the_older_study_warning_masks_the_password(pg_url, caplog):  # noqa: F811
    password = _password(pg_url)
    name = f"sec-storage-{uuid.uuid4().hex[:10]}"
    old = optuna.create_study(study_name=name, storage=pg_url, direction="maximize")
    try:
        old.add_trial(optuna.trial.create_trial(   # a trial as an older recsys-router wrote it
            params={"params.k": 3}, distributions={"params.k": IntDistribution(1, 9)}, value=0.5,
            user_attrs={"overrides": ["--params.k=3"], "config": "router: knn\n"}))
        with caplog.at_level(logging.WARNING, logger="recsys_router.tuning.study"):
            open_study(name, pg_url, identity={"router": "knn", "search_space_hash": "a",
                                               "config_hash": "b"}, search_keys=["params.k"])
        assert "made by an older recsys-router" in caplog.text
        assert f":{password}@" not in caplog.text and ":***@" in caplog.text
    finally:
        optuna.delete_study(study_name=name, storage=pg_url)


UNOPENABLE = [
    f"postgresql+psycopg://me:{SECRET}@127.0.0.1:abc/db",    # a port SQLAlchemy cannot parse
    f"me:{SECRET}@127.0.0.1/db",                             # no scheme
    f"nosuch://me:{SECRET}@127.0.0.1/db",                    # no such dialect
    f"postgresql+psycopg://me:{SECRET}@127.0.0.1:1/db",      # nothing listens on port 1
    f"postgresql+psycopg://127.0.0.1:1/db?user=me&password={SECRET}",  # password as a query value
    "postgresql+psycopg://me:Sup3r%40S3cret@127.0.0.1:1/db",  # URL-encoded password
    f"pg:/me:{SECRET}@h//x://",                              # '://' but not parsable
]


@pytest.mark.parametrize("url", UNOPENABLE, ids=["port", "no-scheme", "dialect", "refused",
                                                 "query", "encoded", "unparsable"])
def test_a_storage_that_cannot_be_opened_is_named_without_its_password(tmp_path, data_cfg, capsys,
                                                                       monkeypatch, url):
    monkeypatch.setattr("recsys_router.tuning.storage.time.sleep", lambda s: None)  # no retry waits
    err, out = _refused(capsys, _tune(data_cfg, tmp_path / "o", url, "s"))
    assert "--storage" in err
    for form in (SECRET, "Sup3r%40S3cret", "Sup3r@S3cret"):
        assert form not in err and form not in out, err
    assert not (tmp_path / "o").exists()


def test_a_driver_error_quoting_the_connection_string_is_scrubbed(tmp_path, data_cfg, capsys,
                                                                 monkeypatch):
    """A database driver's message may repeat the URL or its password: both are masked."""
    import sqlalchemy.exc

    url = "postgresql+psycopg://me:Sup3r%40S3cret@db.invalid/x?sslpassword=K3y-Pass"

    def refuse(given, **_kwargs):
        raise sqlalchemy.exc.OperationalError(
            "connect", {}, Exception(f"bad conninfo {given} password=Sup3r@S3cret "
                                     "sslpassword=K3y-Pass"))

    monkeypatch.setattr("recsys_router.tuning.storage.optuna.storages.RDBStorage", refuse)
    monkeypatch.setattr("recsys_router.tuning.storage.time.sleep", lambda s: None)
    err, _ = _refused(capsys, _tune(data_cfg, tmp_path / "o", url, "s"))
    assert "cannot open the database (OperationalError" in err and "bad conninfo" in err
    for form in ("Sup3r", "K3y-Pass"):
        assert form not in err, err
    assert "postgresql+psycopg://me:***@db.invalid/x?sslpassword=***" in err


def test_redacted_urls_keep_what_identifies_the_database():
    assert redact_url("postgresql+psycopg://me:pw@db.example:5433/studies") == \
        "postgresql+psycopg://me:***@db.example:5433/studies"
    assert redact_url("sqlite:////tmp/a b/study.db") == "sqlite:////tmp/a b/study.db"
    assert redact_url("mysql://me@db/studies") == "mysql://me@db/studies"   # no password to hide
    assert redact_url(f"postgresql://h/db?password={SECRET}&sslmode=require") == \
        "postgresql://h/db?password=***&sslmode=***"
    assert redact_url(f"pg:/me:{SECRET}@h//x://") == \
        "<a database URL of 27 characters that cannot be parsed; not shown>"
    assert redact_url(f"postgresql://me:{SECRET}@h:abc/db").startswith("postgresql://... (a database")


@pytest.mark.parametrize("url", [
    "postgresql+psycopg://recsys:Sup3r@S3cret@127.0.0.1/recsys_test",
    "postgresql://recsys:Sup3r@S3cret@x@127.0.0.1:5432/recsys_test?sslmode=require",
    "mysql://me:Sup3r@S3cret@db.invalid/studies",
    "postgresql://me:Sup3r@S3cret/Zq9x@db.invalid/studies",
    "postgresql://me:Sup3r@S3cret?x=Zq9x@db.invalid/studies",
    "postgresql://admin@srv:Sup3r@S3cret@db.invalid/studies",
], ids=["one-at", "two-ats", "mysql", "then-slash", "then-question-mark", "user-at-and-two"])
def test_a_password_with_an_unescaped_at_is_never_shown_in_part(tmp_path, data_cfg, capsys, monkeypatch,
                                                                 url):
    """SQLAlchemy ends a password at its first '@': masking the part it found showed the rest
    (``recsys:***@S3cret@127.0.0.1``), twice, in the connection error. Such a URL is refused
    before connecting, and shown as neither part."""
    def connect(*_a, **_k):  # never reached: the URL is refused first
        raise AssertionError("connected")
    monkeypatch.setattr("recsys_router.tuning.storage.optuna.storages.RDBStorage", connect)
    err, out = _refused(capsys, _tune(data_cfg, tmp_path / "o", url, "s"))
    assert "more than one '@', so where the password ends is ambiguous" in err and "%40" in err, err
    for form in ("Sup3r", "S3cret", "Sup3r@S3cret", "Zq9x"):
        assert form not in err and form not in out, err
    assert redact_url(url).endswith("whose password may hold an unescaped '@'; not shown)")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("url", [
    "sqlite:////tmp/a@b/study@1.db",
    "postgresql://me@db.invalid/stu@dies",            # no password: nothing to hide
    "postgresql://me:Sup3r%40S3cret@db.invalid/studies?application_name=a%40b",
    "postgresql://me:pw@[::1]:5432/studies",
    "postgresql://admin@server:Sup3r@db.invalid/studies",   # Azure's user@server login
])
def test_urls_with_a_legitimate_at_are_not_refused_as_ambiguous(url):
    from recsys_router.db_urls import url_refusal
    assert url_refusal(url) is None
    assert "not shown" not in redact_url(url) and "Sup3r" not in redact_url(url)
    if url.startswith("postgresql://admin@"):  # the user name is shown, as SQLAlchemy reads it
        assert redact_url(url) == "postgresql://admin%40server:***@db.invalid/studies"


def test_a_user_name_with_a_slash_is_refused_and_its_password_never_shown(tmp_path, data_cfg, capsys,
                                                                          monkeypatch):
    """``dom/me:PASSWORD@host/x``: SQLAlchemy reads host ``dom`` and database
    ``me:PASSWORD@host/x`` (no password), so the error showed the password in the database."""
    def connect(*_a, **_k):  # never reached: the URL is refused first
        raise AssertionError("connected")
    monkeypatch.setattr("recsys_router.tuning.storage.optuna.storages.RDBStorage", connect)
    url = "postgresql://dom/me:Sup3rS3cret@db.invalid/studies"
    err, out = _refused(capsys, _tune(data_cfg, tmp_path / "o", url, "s"))
    assert "write each '/' of the user name as %2F" in err, err
    assert "Sup3rS3cret" not in err and "Sup3rS3cret" not in out, err
    assert redact_url(url).endswith("whose user name or password may be read as its host, database or query; not shown)")
    assert "Sup3r" not in redact_url("postgresql://dom%2Fme:Sup3rS3cret@db.invalid/studies")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("url,hidden", [
    ("postgresql://127.0.0.1/db?user=me&password=pw&application_name=etl:job@host1", False),
    ("postgresql:///db?host=/var/run/postgresql&user=me&password=pw:x@y", False),
    ("postgresql://dom/me:pw@db.invalid/x", True),
    ("postgresql://dom/me:pw@db.invalid/x?application_name=a", True),
    ("postgresql://host/my:db@x", True),        # read as such a user name: written my%3Adb%40x it is not
    ("postgresql://host/my%3Adb%40x", False),
    ("postgresql://dom/me:s3c?ret@db.example/x", True),     # a '?' in the password
    ("postgresql://dom/me:s3c?ret=1@db.example/x", True),
    ("postgresql://d?om/me:pw=1@db.example/x", True),       # a '?' in the user name: a query key
    ("postgresql://d?om/me:pw@db.example/x", False),        # read as host 'd' alone: nothing shown
    ("postgresql://corp/alice@srv:s3cretPW@db.example/x", True),   # '/' and '@' in the user name
    ("mysql://corp/alice@srv:s3cretPW@db.example/x", True),
    ("postgresql://alice@corp/x:s3cretPW@db.example/x", True),
    ("postgresql://dom/me?x=a:s3c&ret=1@db.example/x", True),   # '/', '?' in the user, '&', '=' in the password
    ("postgresql://dom/me?x=a:s3c&ret&k=1@db.example/x", True),
    ("postgresql://127.0.0.1/db?application_name=etl:job@host1&sslmode=require", False),
], ids=["query-value", "unix-socket-query", "user-slash", "user-slash-query", "database-name", "database-%40",
        "question-mark-in-password", "question-mark-in-password-with-equals", "question-mark-in-user",
        "question-mark-in-user-dropped", "slash-and-at-in-user", "slash-and-at-in-user-mysql",
        "at-then-slash-in-user", "password-piece-as-query-key", "password-pieces-as-query-keys",
        "query-value-then-another-key"])
def test_only_a_user_name_before_the_query_is_taken_for_a_slash_user(url, hidden):
    """The rule fired on any ':' then '@' after a '/', query values included."""
    from recsys_router.db_urls import SLASH_ADVICE, url_refusal
    assert (url_refusal(url) == SLASH_ADVICE) is hidden
    if hidden:  # and none of it is shown
        assert redact_url(url).endswith("whose user name or password may be read as its host, database or query; not shown)")
    for secret in ("s3c", "ret", "pw:", "me:", "PW"):
        assert secret not in redact_url(url), redact_url(url)
    if not hidden:  # what is shown of a URL that passes: its query keys, never their values
        assert "etl" not in redact_url(url) and "job" not in redact_url(url), redact_url(url)
