"""Decision-log probes (``recsys-router ope --log``): a hostile JSON cell (``costs``,
``candidates``, ``probs``) is refused with one error naming the file, the row, the decision
and the column, never a bare AttributeError, RecursionError or JSONDecodeError; a decision-log
file (``.csv``, ``.csv.gz``, ``.parquet``) is read under the long-table loader's read limits."""

from __future__ import annotations

import decimal
import json
import re

import pandas as pd
import pytest

from recsys_router.cli import main
from recsys_router.datasets._limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_RECORDS, ReadLimits
from recsys_router.errors import DataValidationError
from recsys_router.feedback.log_cells import MAX_CELL_CHARS
from recsys_router.feedback.logged import log_to_data
from recsys_router.feedback.workflow import load_log


def _log(**cells) -> pd.DataFrame:
    """Three decisions with feedback; ``cells`` sets row 1 of the named columns."""
    frame = pd.DataFrame({"decision_id": ["d0", "d1", "d2"], "chosen": ["a", "b", "a"],
                          "propensity": [0.5, 0.5, 0.5],
                          "candidates": [json.dumps(["a", "b"])] * 3,
                          "probs": [json.dumps({"a": 0.5, "b": 0.5})] * 3,
                          "feedback_score": [1.0, 0.0, 0.5],
                          "costs": [json.dumps({"a": 0.1, "b": 0.2})] * 3}, dtype=object)
    for col, value in cells.items():
        frame.loc[1, col] = value
    return frame


DEEP = "[" * 50_000 + "]" * 50_000

COSTS = {
    "a JSON list": (json.dumps([0.1, 0.2]), "costs '[0.1, 0.2]' is not a JSON object"),
    "100,000-deep JSON": (DEEP, "costs is JSON nested too deeply to read"),
    "deep object": ('{"b": ' * 50_000 + "1" + "}" * 50_000, "costs is JSON nested too deeply"),
    "not JSON": ("cheap", "costs 'cheap' is not a JSON object"),
    "a text cost": (json.dumps({"a": 0.1, "b": "cheap"}), "is not a JSON object of LLM names to costs"),
    "a nested cost": (json.dumps({"a": 0.1, "b": {"x": 1}}), "is not a JSON object of LLM names to costs"),
    "a boolean cost": (json.dumps({"a": 0.1, "b": True}), "is not a JSON object of LLM names to costs"),
    "a key given twice": ('{"b": 0.1, "b": 9.0}', "names the key 'b' twice"),
    "an infinite cost": ('{"a": 0.1, "b": Infinity}', "the chosen LLM 'b' the cost inf"),
    "a JSON string": (json.dumps("0.2"), "is not a JSON object of LLM names to costs"),
    "an oversized cell": ('{"b": 0.1, "x": "' + "y" * MAX_CELL_CHARS + '"}',
                          f"more than the {MAX_CELL_CHARS:,} a cell may hold"),
}


@pytest.mark.parametrize("label", list(COSTS))
def test_hostile_costs_cell_names_file_row_decision_and_column(label, tmp_path):
    bad, msg = COSTS[label]
    path = tmp_path / "log.csv"
    _log(costs=bad).to_csv(path, index=False)
    with pytest.raises(ValueError) as info:
        load_log(path)
    text = str(info.value)
    assert text.startswith(f"{path}: row 1 (decision_id 'd1'): costs"), text[:200]
    assert msg in text and len(text) < 600


OTHER = {
    "candidates 100,000-deep": ("candidates", DEEP, "candidates is JSON nested too deeply"),
    "candidates oversized": ("candidates", json.dumps(["a", "b", "c" * MAX_CELL_CHARS]),
                             "a cell may hold"),
    "probs 100,000-deep": ("probs", DEEP, "probs is JSON nested too deeply"),
    "probs with a key twice": ("probs", '{"a": 0.5, "b": 0.5, "b": 0.5}', "names the key 'b' twice"),
}


@pytest.mark.parametrize("label", list(OTHER))
def test_hostile_candidates_and_probs_cells_are_refused_by_row(label):
    col, bad, msg = OTHER[label]
    with pytest.raises(ValueError, match=r"^f\.csv: row 1 \(decision_id 'd1'\): ") as info:
        log_to_data(_log(**{col: bad}), source="f.csv")
    assert msg in str(info.value)


def test_costs_that_are_well_formed_still_read():
    # null costs, an empty object, a null or missing chosen LLM: the cost is unknown (NaN);
    # a number for the chosen LLM is its predicted cost
    frame = _log()
    frame["costs"] = ['{"a": 0.25, "b": 0.5}', '{"a": 0.1, "b": null}', None]
    d = log_to_data(frame)
    assert d.costs[0, 0] == pytest.approx(0.25)
    assert d.costs[1, 1] != d.costs[1, 1] and d.costs[2, 0] != d.costs[2, 0]  # NaN
    frame["costs"] = ["null", "{}", '{"b": 0.3}']
    assert log_to_data(frame).costs is None  # no known cost at all


def test_ope_cli_refuses_a_hostile_costs_cell_in_one_line(tmp_path, capsys):
    path = tmp_path / "log.csv"
    _log(costs=DEEP).to_csv(path, index=False)
    out = tmp_path / "o"
    assert main(["ope", "--log", str(path), "--router", "mf", "--n-boot", "0",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "row 1 (decision_id 'd1'): costs is JSON nested too deeply" in err
    assert "Traceback" not in err and "RecursionError" not in err and not out.exists()


def _big_log(n: int = 40) -> pd.DataFrame:
    return pd.DataFrame({"decision_id": [f"d{i}" for i in range(n)], "chosen": ["a", "b"] * (n // 2),
                         "propensity": [0.5] * n, "candidates": [json.dumps(["a", "b"])] * n,
                         "feedback_score": [1.0, 0.0] * (n // 2)})


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
def test_decision_log_files_are_read_under_max_records(suffix, tmp_path):
    path = tmp_path / f"log{suffix}"
    (_big_log().to_parquet if suffix == ".parquet" else _big_log().to_csv)(path, index=False)
    assert load_log(path, max_records=40).n_queries == 40
    with pytest.raises(DataValidationError, match=r"max_records read limit") as info:
        load_log(path, max_records=39)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("suffix", [".csv.gz", ".parquet"])
def test_decision_log_files_are_read_under_max_bytes(suffix, tmp_path):
    """A .csv.gz is gunzipped through the counter; a parquet footer's uncompressed size is
    checked before its data."""
    path = tmp_path / f"log{suffix}"
    big = _big_log(2000)
    (big.to_parquet if suffix == ".parquet" else big.to_csv)(path, index=False)
    assert path.stat().st_size < 20_000
    with pytest.raises(DataValidationError, match=r"max_bytes") as info:
        load_log(path, max_bytes=20_000)
    assert str(path) in str(info.value)


def test_decision_logs_get_the_long_tables_default_limits(tmp_path, monkeypatch):
    import recsys_router.datasets._common as common
    seen = []
    real = common.read_csv

    def spy(path, limits=None, **kw):
        seen.append(limits)
        return real(path, limits=limits, **kw)
    monkeypatch.setattr(common, "read_csv", spy)
    path = tmp_path / "log.csv.gz"
    _big_log(4).to_csv(path, index=False)
    load_log(path)
    assert seen == [ReadLimits(DEFAULT_MAX_BYTES, DEFAULT_MAX_RECORDS)]


@pytest.mark.parametrize("cost", ["cheap", "0.2", -0.5, float("inf"), True, decimal.Decimal("sNaN"),
                                  decimal.Decimal("-0.25"), decimal.Decimal("Infinity")],
                         ids=["text", "numeric-text", "negative", "infinite", "boolean",
                              "decimal-signalling-nan", "decimal-negative", "decimal-infinite"])
def test_a_bad_feedback_cost_is_named_not_read_as_no_cost(cost):
    """``pd.to_numeric(errors="coerce")`` read a text cost as "no cost" (the predicted cost was
    used instead, silently) and kept a negative one; POST /feedback accepts neither."""
    with pytest.raises(ValueError) as err:
        log_to_data(_log(feedback_cost=cost), source="log.csv")
    assert str(err.value) == ("log.csv: row 1 (decision_id 'd1'): column 'feedback_cost': expected a "
                              f"finite number >= 0, got {str(cost)!r}")


@pytest.mark.parametrize("cells", [[0.0, None, 2.5], [decimal.Decimal("0.000"), None, decimal.Decimal("2.50")]],
                         ids=["float", "decimal"])
def test_feedback_costs_that_keep_the_rule_are_read(cells):
    """A DECIMAL column (a parquet file re-saved from a warehouse) gives ``Decimal`` cells."""
    frame = _log()
    frame["feedback_cost"] = cells
    d = log_to_data(frame, source="log.csv")
    # row 1 has no reported cost: its predicted cost for the chosen LLM 'b' (0.2) stands
    assert [round(float(c), 6) for c in d.costs[[0, 1, 2], [0, 1, 0]]] == [0.0, 0.2, 2.5]


def _three_decisions(url: str) -> None:
    from recsys_router.feedback.store import DecisionLog, decision_row
    log = DecisionLog(url)
    log.insert_decisions([decision_row(
        decision_id=f"d{i}", instance="i", artifact_sha=None, policy="argmax", policy_value=None,
        explore="none", candidates=["a", "b"], chosen="a", propensity=1.0, probs={"a": 1.0},
        scores={"a": 0.5, "b": 0.1}, costs=None, text=f"q{i}", log_text="hash") for i in range(3)])
    for i in range(3):
        log.add_feedback(f"d{i}", score=1.0)
    log.dispose()


def test_a_database_log_past_max_records_is_refused_before_it_is_read(tmp_path):
    """A file log was read under max_records; a database log was read whole, however large."""
    url = f"sqlite:///{tmp_path / 'log.db'}"
    _three_decisions(url)
    with pytest.raises(DataValidationError, match=r"log\.db: 3 records; at most 2 are read \(the "
                                                   r"max_records read limit\)"):
        load_log(url, max_records=2)
    assert load_log(url, max_records=3).n_queries == 3


@pytest.mark.parametrize("argv", [
    ["ope", "--log", "postgresql://me:Wr0ngPa55@127.0.0.1:1/x?sslpassword=K3yPa55", "--router", "best-single",
     "--out", "OUT"],
    ["serve", "ARTIFACT", "--log-db", "postgresql://me:Wr0ngPa55@127.0.0.1:1/x?sslpassword=K3yPa55"],
], ids=["ope", "serve"])
def test_a_decision_log_url_is_never_shown_with_its_password(tmp_path, capsys, argv):
    """``--log-db`` / ``ope --log`` errors printed the URL as given, password included."""
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.export import export_router
    from recsys_router.registry import make_router
    d = make_synthetic(40, 3, 2, seed=0)
    art = export_router(make_router("best-single").fit(d), tmp_path / "bs", train_data=d)
    argv = [str(art) if a == "ARTIFACT" else str(tmp_path / "o") if a == "OUT" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "cannot open the database" in err and "postgresql+psycopg://me:***@127.0.0.1:1/x" in err, err
    assert "Wr0ngPa55" not in err and "K3yPa55" not in err, err


LOG_COMMANDS = [
    pytest.param(["ope", "--log", "URL", "--router", "best-single", "--out", "OUT"], "--log", id="ope"),
    pytest.param(["serve", "ARTIFACT", "--log-db", "URL"], "--log-db", id="serve"),
    pytest.param(["log", "export", "--db", "URL", "--out", "OUT.csv"], "--db", id="log-export"),
]
"""Each command that takes a decision-log URL, with the option that names it (``URL``,
``ARTIFACT``, ``OUT`` and ``OUT.csv`` are filled in by :func:`_refused_before_connecting`)."""


@pytest.fixture(scope="module")
def best_single_artifact(tmp_path_factory):
    """One exported ``best-single`` router, shared by the module (only ``serve`` reads it)."""
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.export import export_router
    from recsys_router.registry import make_router
    d = make_synthetic(40, 3, 2, seed=0)
    return export_router(make_router("best-single").fit(d), tmp_path_factory.mktemp("art") / "bs",
                         train_data=d)


def _refused_before_connecting(argv, url, artifact, tmp_path, capsys, monkeypatch) -> str:
    """Run ``argv`` with ``url`` filled in, check it exits 2 without creating an engine, and
    return what it printed on stderr."""
    import sqlalchemy as sa

    def connect(*_a, **_k):  # never reached: the URL is refused first
        raise AssertionError("an engine was created")
    monkeypatch.setattr(sa, "create_engine", connect)
    subst = {"URL": url, "ARTIFACT": str(artifact), "OUT": str(tmp_path / "o"),
             "OUT.csv": str(tmp_path / "o.csv")}
    assert main([subst.get(a, a) for a in argv]) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("argv,flag", LOG_COMMANDS)
@pytest.mark.parametrize("url", [
    "postgresql://me:Sup3r@S3cret@127.0.0.1:1/x",
    "postgresql://me:Sup3r@S3cret/Zq9x@127.0.0.1:1/x",
    "postgresql://admin@srv:Sup3r@S3cret@127.0.0.1:1/x",
], ids=["two-ats", "then-slash", "user-at"])
def test_a_log_url_whose_password_holds_an_unescaped_at_is_refused_before_connecting(
        tmp_path, capsys, monkeypatch, best_single_artifact, argv, flag, url):
    """SQLAlchemy ends a password at its first '@': the driver then tried the rest of the
    password as the host and printed it (``failed to resolve host 'S3cret@127.0.0.1'``), and
    the error named ``--log-db`` whatever the option was."""
    err = _refused_before_connecting(argv, url, best_single_artifact, tmp_path, capsys, monkeypatch)
    assert f"{flag} \"postgresql+psycopg://... (a database URL of" in err, err
    assert "more than one '@', so where the password ends is ambiguous" in err and "%40" in err, err
    for form in ("Sup3r", "S3cret", "Zq9x"):
        assert form not in err, err
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("argv,flag", LOG_COMMANDS)
@pytest.mark.parametrize("url", [
    "postgresql://dom/me:Sup3rS3cret@127.0.0.1:1/x",
    "postgresql://dom/me?x=a:Sup3r&S3cret=1@127.0.0.1:1/x",   # a piece of the password as a query key
], ids=["slash", "slash-question-mark-ampersand"])
def test_a_log_url_whose_user_name_holds_a_slash_is_refused_before_connecting(
        tmp_path, capsys, monkeypatch, best_single_artifact, argv, flag, url):
    """SQLAlchemy's user name stops at '/': ``dom/me:PASSWORD@host/x`` was read as host ``dom``
    and database ``me:PASSWORD@host/x``, with no password to mask, so every error showed it
    (and ``dom/me?x=a:PASS&WORD=1@host`` showed ``WORD`` as a query key)."""
    err = _refused_before_connecting(argv, url, best_single_artifact, tmp_path, capsys, monkeypatch)
    assert f"{flag} 'postgresql+psycopg://... (a database URL of" in err, err
    assert "user name or password may be read as its host, database or query" in err and "%2F" in err, err
    assert "Sup3r" not in err and "S3cret" not in err, err


def _propensity_file(kind: str, value, tmp_path):
    """A decision log (``log``) or long table (``long``) file whose record 1 has propensity
    ``value`` (every record, for a boolean: a parquet column holds one type)."""
    if kind.startswith("log"):
        frame = _log()
        frame = frame.drop(columns=["probs"])
    else:
        frame = pd.DataFrame({"query_id": ["q0", "q1", "q2"], "model": ["a", "b", "a"],
                              "score": [1.0, 0.0, 0.5]})
    frame["propensity"] = [value] * 3 if isinstance(value, bool) else [0.5, value, 0.5]
    path = tmp_path / (kind.replace(" ", "_") + (".parquet" if kind.endswith("parquet") else ".csv"))
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)
    return path


PROPENSITIES = {   # kind, value, the error after the file name
    "decision log csv, subnormal": ("log csv", 1e-320,
                                    r": row 1 \(decision_id 'd1'\): propensity 1e-320 is below 1e-12"),
    "decision log csv, 1e-13": ("log csv", 1e-13,
                                r": row 1 \(decision_id 'd1'\): propensity 1e-13 is below 1e-12"),
    "decision log parquet, boolean": ("log parquet", True,
                                      r": row 0 \(decision_id 'd0'\): propensity True is a boolean"),
    "long table csv, subnormal": ("long csv", 1e-320,
                                  r", row 3, column 'propensity': propensity 1e-320 is below 1e-12"),
    "long table parquet, boolean": ("long parquet", True,
                                    r", row 1, column 'propensity': propensity True is a boolean"),
}


@pytest.mark.parametrize("label", list(PROPENSITIES))
def test_a_boolean_or_sub_floor_propensity_in_a_log_file_is_refused_by_row(label, tmp_path):
    """A propensity whose inverse (or its square) overflows float64 made every off-policy
    estimate inf/NaN with exit 0; a boolean one was read as 1 (a deterministic logger)."""
    kind, value, msg = PROPENSITIES[label]
    path = _propensity_file(kind, value, tmp_path)
    with pytest.raises(ValueError, match="^" + re.escape(str(path)) + msg):
        load_log(path)


def test_ope_cli_refuses_a_subnormal_propensity_with_nothing_written(tmp_path, capsys):
    path = _propensity_file("long csv", 1e-320, tmp_path)
    out = tmp_path / "o"
    assert main(["ope", "--log", str(path), "--router", "mf", "--n-boot", "0",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "row 3, column 'propensity': propensity 1e-320 is below 1e-12" in err
    assert "Traceback" not in err and "RuntimeWarning" not in err and not out.exists()
