"""Hostile data files against every loader and ``recsys-router data``: each is refused with
one line naming the file (and row/column where there is one) and exit status 2; nothing is
written; memory stays bounded."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recsys_router.cli import main
from recsys_router.datasets import load_dataset
from recsys_router.datasets._common import MAX_CSV_COLUMNS
from recsys_router.datasets.embedllm import load_embedllm
from recsys_router.datasets.generic import load_generic
from recsys_router.datasets.routellm import load_routellm_mmlu
from recsys_router.datasets.routerbench import load_routerbench, load_routerbench_zs
from recsys_router.datasets.routereval import load_routereval
from recsys_router.errors import DataValidationError

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _cli_error(capsys, *argv) -> str:
    """Run the CLI, expect exit 2 and exactly one stderr line; return it."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


# ---------------------------------------------------------------- one field too many per row
def test_generic_csv_extra_field_names_the_line(tmp_path, capsys):
    # pandas alone reads this as index=query_id and shifts every column left: silently wrong
    f = tmp_path / "shift.csv"
    f.write_text("query_id,model,score\nq1,a,1,0.5\nq2,b,0,0.25\n")
    with pytest.raises(DataValidationError) as ei:
        load_generic(f)
    assert ei.value.row == 2 and "3 fields but the header has" not in str(ei.value)
    assert "line 2 has 4 fields but the header has 3" in str(ei.value)
    # only a later row is long: still the line that is
    f.write_text("query_id,model,score\nq1,a,1\nq2,b,0\nq3,c,1,9\n")
    with pytest.raises(DataValidationError, match="line 4 has 4 fields"):
        load_generic(f)
    # the first row long, later ones not
    f.write_text("query_id,model,score\nq1,a,1,0.5\nq2,b,0\n")
    err = _cli_error(capsys, "data", "info", str(f))
    assert "shift.csv" in err and "line 2 has 4 fields" in err


def test_routerbench_csv_extra_field(tmp_path):
    (tmp_path / "e_train.csv").write_text(
        ",sample_id,prompt,eval_name,a,a|total_cost\n"
        "0,s1,\"['p1']\",e,1,0.1,EXTRA\n1,s2,\"['p2']\",e,0,0.2,EXTRA\n")
    with pytest.raises(DataValidationError) as ei:
        load_routerbench_zs(tmp_path)
    assert "e_train.csv" in str(ei.value) and ei.value.row == 2
    assert "line 2 has 7 fields but the header has 6" in str(ei.value)


def test_routellm_csv_extra_field(tmp_path):
    (tmp_path / "mmlu").mkdir()
    (tmp_path / "mmlu" / "mmlu_x.csv").write_text("prompt,a,b\nq1,True,False\nq2,True,False,True\n")
    with pytest.raises(DataValidationError) as ei:
        load_routellm_mmlu(tmp_path)
    assert "mmlu_x.csv" in str(ei.value) and ei.value.row == 3


def test_embedllm_csv_extra_field(tmp_path):
    for f in ("model_order.csv", "question_order.csv", "val.csv", "test.csv"):
        (tmp_path / f).write_bytes((FIXTURES / "embedllm" / f).read_bytes())
    (tmp_path / "train.csv").write_text("model_id,prompt_id,label,category,model_name\n"
                                        "0,0,1,asdiv,m0,junk\n")
    with pytest.raises(DataValidationError) as ei:
        load_embedllm(tmp_path)
    assert "train.csv" in str(ei.value) and ei.value.row == 2


def test_extra_field_deep_in_a_file_read_with_usecols(tmp_path):
    """Reading only some columns (as the EmbedLLM loader does) still scans every record."""
    from recsys_router.datasets._common import read_csv
    rows = [f"{i},{i % 7},1,asdiv,m{i % 7}" for i in range(12_000)]
    rows[11_500] += ",junk"
    path = tmp_path / "big.csv"
    path.write_text("model_id,prompt_id,label,category,model_name\n" + "\n".join(rows) + "\n")
    with pytest.raises(DataValidationError) as ei:
        read_csv(path, usecols=["model_id", "prompt_id", "label"])
    assert ei.value.row == 11_502 and "6 fields" in str(ei.value)
    rows[11_500] = rows[11_500][:-len(",junk")]
    path.write_text("model_id,prompt_id,label,category,model_name\n" + "\n".join(rows) + "\n")
    assert len(read_csv(path, usecols=["model_id", "prompt_id", "label"])) == 12_000


# ---------------------------------------------------------------- unreadable or mistyped files
def test_non_utf8_text_is_located(tmp_path, capsys):
    f = tmp_path / "latin.csv"
    f.write_bytes(b"query_id,model,score\nq1,a,1\nq\xe92,b,0\n")
    err = _cli_error(capsys, "data", "info", str(f))
    assert "latin.csv, row 3" in err and "0xe9 is not UTF-8" in err
    j = tmp_path / "latin.jsonl"
    j.write_bytes(b'{"query_id": "q1", "model": "a", "score": 1}\n{"query_id": "q\xe9"}\n')
    with pytest.raises(DataValidationError) as ei:
        load_generic(j)
    assert ei.value.row == 2 and "not UTF-8" in str(ei.value)


def test_corrupt_parquet_is_one_line(tmp_path, capsys):
    good = tmp_path / "ok.parquet"
    pd.DataFrame({"query_id": ["a", "b"], "model": ["x", "x"], "score": [1.0, 0.0]}).to_parquet(good)
    raw = good.read_bytes()
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(raw[: len(raw) // 2])          # truncated: no footer
    err = _cli_error(capsys, "data", "info", str(bad))
    assert "bad.parquet" in err and "not a readable parquet file" in err
    noise = tmp_path / "noise.parquet"
    noise.write_bytes(b"PAR1" + bytes(range(256)) * 4 + b"PAR1")
    assert "noise.parquet" in _cli_error(capsys, "data", "convert", str(noise), "--to",
                                         str(tmp_path / "o.csv"))
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("value", [["a", "b"], {"k": 1}])
def test_list_or_dict_valued_ids_are_refused(tmp_path, capsys, value):
    j = tmp_path / "ids.jsonl"
    j.write_text(json.dumps({"query_id": "q0", "model": "m", "score": 1}) + "\n"
                 + json.dumps({"query_id": value, "model": "m", "score": 1}) + "\n")
    err = _cli_error(capsys, "data", "info", str(j))
    assert "ids.jsonl, row 2, column 'query_id'" in err and "expected a single string" in err
    p = tmp_path / "ids.parquet"
    pd.DataFrame({"query_id": ["q0", "q1"], "model": [["m"], ["n"]], "score": [1.0, 0.0]}).to_parquet(p)
    with pytest.raises(DataValidationError) as ei:
        load_generic(p)
    assert ei.value.row == 1 and ei.value.column == "model"


def test_wrong_column_types(tmp_path, capsys):
    p = tmp_path / "types.parquet"
    pd.DataFrame({"query_id": ["a", "b"], "model": ["x", "x"], "score": ["1", "high"]}).to_parquet(p)
    err = _cli_error(capsys, "data", "info", str(p))
    assert "row 2, column 'score'" in err and "'high'" in err
    j = tmp_path / "task.jsonl"
    j.write_text(json.dumps({"query_id": "a", "model": "x", "score": 1, "task": ["t1", "t2"]}) + "\n")
    with pytest.raises(DataValidationError) as ei:
        load_generic(j)
    assert ei.value.column == "task"


def test_bad_and_deep_json(tmp_path, capsys):
    j = tmp_path / "bad.jsonl"
    j.write_text('{"query_id": "a", "model": "x", "score": 1}\n{"query_id": "b", "model": \n')
    assert "bad.jsonl, row 2" in _cli_error(capsys, "data", "info", str(j))
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"query_id": "a", "model": "x", "score": 1, "x": ' + "[" * 100_000
                    + "]" * 100_000 + "}\n")
    with pytest.raises(DataValidationError, match="nested too deeply"):
        load_generic(deep)
    rdc = tmp_path / "rdc.json"
    rdc.write_bytes(b'[{"question": "q", "scores": {"a": 1}}, \xff]')
    with pytest.raises(DataValidationError, match="not UTF-8"):
        load_dataset(str(rdc))


def test_broken_gzip_and_overflowing_numbers(tmp_path, capsys):
    import gzip
    (tmp_path / "junk.csv.gz").write_bytes(b"not gzip at all\n")
    assert "junk.csv.gz: not a readable gzip file" in _cli_error(capsys, "data", "info",
                                                                  str(tmp_path / "junk.csv.gz"))
    whole = gzip.compress(b"query_id,model,score\n" + b"q,m,1\n" * 2000)
    (tmp_path / "cut.csv.gz").write_bytes(whole[: len(whole) // 2])
    assert "cut.csv.gz: not a readable gzip file" in _cli_error(capsys, "data", "info",
                                                                 str(tmp_path / "cut.csv.gz"))
    (tmp_path / "junk.jsonl.gz").write_bytes(b"garbage")
    with pytest.raises(DataValidationError, match="not a readable gzip file"):
        load_generic(tmp_path / "junk.jsonl.gz")
    (tmp_path / "big.csv").write_text("query_id,model,score\nq1,a,1e999\n")
    err = _cli_error(capsys, "data", "info", str(tmp_path / "big.csv"))
    assert "row 2, column 'score': score inf is not a finite number" in err


@pytest.mark.parametrize("name, body, row, column", [
    ("s.csv", "query_id,model,score\nq0,a,1\nq1,a,1{z}\n", 3, "score"),
    ("c.csv", "query_id,model,score,cost\nq0,a,1,\nq1,a,1,1{z}\n", 3, "cost"),
    ("s.jsonl", '{{"query_id":"q0","model":"a","score":1}}\n'
                '{{"query_id":"q1","model":"a","score":1{z}}}\n', 2, "score"),
    ("c.jsonl", '{{"query_id":"q0","model":"a","score":1}}\n'
                '{{"query_id":"q1","model":"a","score":1,"cost":1{z}}}\n', 2, "cost"),
])
def test_integer_past_float_range_is_located(tmp_path, capsys, name, body, row, column):
    # valid JSON and CSV that no float holds: was a bare OverflowError naming nothing
    f = tmp_path / name
    f.write_text(body.format(z="0" * 400))
    err = _cli_error(capsys, "data", "info", str(f))
    assert f"{name}, row {row}, column '{column}': {column} (an integer of 401 digits)" in err


def test_empty_and_headerless_files(tmp_path, capsys):
    e = tmp_path / "empty.csv"
    e.write_text("")
    assert "empty.csv" in _cli_error(capsys, "data", "info", str(e))
    from recsys_router.datasets._common import read_csv
    with pytest.raises(DataValidationError, match="empty file"):
        read_csv(e)


def test_to_a_folder_is_refused_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    err = _cli_error(capsys, "data", "convert", str(FIXTURES / "embedllm"), "--to", str(out))
    assert "is a folder" in err and str(out) in err
    assert list(out.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    named = tmp_path / "x.parquet"          # a folder whose name looks like a file
    named.mkdir()
    assert "is a folder" in _cli_error(capsys, "data", "convert", str(FIXTURES / "embedllm"),
                                       "--to", str(named))
    assert list(named.iterdir()) == []


def test_debug_flag_shows_the_traceback(tmp_path):
    f = tmp_path / "shift.csv"
    f.write_text("query_id,model,score\nq1,a,1,0.5\n")
    with pytest.raises(DataValidationError):
        main(["--debug", "data", "info", str(f)])


def test_unexpected_errors_are_one_line_too(capsys, monkeypatch):
    import recsys_router.cli.data as cli_data

    def boom(args):
        raise ZeroDivisionError("division by zero")
    monkeypatch.setattr(cli_data, "_cmd_info", boom)
    err = _cli_error(capsys, "data", "info", "synthetic")
    assert err == ("recsys-router data: error: ZeroDivisionError: division by zero (rerun with "
                   "--debug for the traceback)")


# ---------------------------------------------------------------- size limits
def test_too_many_columns_is_refused_before_parsing(tmp_path, capsys):
    n = 20_000
    f = tmp_path / "wide.csv"
    f.write_text(",".join(["query_id", "model", "score"] + [f"c{i}" for i in range(n - 3)]) + "\n"
                 + "q,m,1" + "," * (n - 3) + "\n")
    assert f.stat().st_size > 100_000
    err = _cli_error(capsys, "data", "info", str(f))
    assert f"20,000 columns; at most {MAX_CSV_COLUMNS:,} are read" in err
    ok = tmp_path / "ok.csv"        # just under the limit still loads
    m = MAX_CSV_COLUMNS
    ok.write_text(",".join(["query_id", "model", "score"] + [f"c{i}" for i in range(m - 3)]) + "\n"
                  + "q,m,1," + ",".join(["v"] * (m - 3)) + "\n")
    d = load_generic(ok)
    assert d.shape == (1, 1) and d.queries.shape[1] >= m - 3 and d.queries["c7"].iloc[0] == "v"


def _sparse_ids(path: Path, n: int) -> None:
    # every record names a new query and a new LLM: n records, n x n cells
    path.write_text("query_id,model,score\n" + "".join(f"q{i},m{i},1\n" for i in range(n)))


def test_ids_spanning_a_huge_sparse_matrix_are_refused(tmp_path, capsys, monkeypatch):
    f = tmp_path / "sparse.csv"
    _sparse_ids(f, 8000)
    assert 100_000 < f.stat().st_size < 160_000
    err = _cli_error(capsys, "data", "info", str(f))
    assert "8,000 queries x 8,000 LLMs = 64,000,000 matrix cells" in err and "max_cells" in err
    small = tmp_path / "small.csv"
    _sparse_ids(small, 300)           # 90,000 cells: under the floor, loads
    d = load_generic(small)
    assert d.shape == (300, 300) and int(d.observed.sum()) == 300
    with pytest.raises(DataValidationError, match="limit of 50,000 cells"):
        load_generic(small, max_cells=50_000)
    monkeypatch.setenv("RECSYS_ROUTER_MAX_CELLS", "1000")
    assert main(["data", "info", str(small)]) == 2
    assert "limit of 1,000 cells" in capsys.readouterr().err
    assert main(["data", "info", str(small), "-o", "max_cells=100000"]) == 0


def test_refused_sparse_file_stays_under_300_mb(tmp_path):
    f = tmp_path / "sparse.csv"
    _sparse_ids(f, 8000)
    # VmHWM: this process's own peak (ru_maxrss would carry over the forking parent's peak)
    code = textwrap.dedent(f"""
        import resource, sys
        from recsys_router.datasets.generic import load_generic
        from recsys_router.errors import DataValidationError
        try:
            load_generic({str(f)!r})
        except DataValidationError:
            pass
        else:
            sys.exit("not refused")
        try:
            with open("/proc/self/status") as fh:
                kb = next(int(ln.split()[1]) for ln in fh if ln.startswith("VmHWM:"))
        except OSError:
            kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(kb)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    peak_mb = int(out.stdout.strip().splitlines()[-1]) / 1024
    assert peak_mb < 300, f"peak {peak_mb:.0f} MB"


# ---------------------------------------------------------------- two texts for one id
def test_texts_option(tmp_path, capsys):
    f = tmp_path / "t.csv"
    f.write_text("query_id,model,score,query_text\nq1,a,1,What is 2+2?\nq1,b,0,What is  2+2? \n"
                 "q2,a,1,Hi\nq2,b,1,Hello there\n")
    with pytest.raises(DataValidationError) as ei:
        load_generic(f)
    assert "rows 2 and 3" in str(ei.value) and "2 such query ids" in str(ei.value)
    assert "-o texts=first|longest" in str(ei.value)
    assert "texts=first|longest" in _cli_error(capsys, "data", "info", str(f))
    assert load_generic(f, texts="first").texts == ["What is 2+2?", "Hi"]
    assert load_generic(f, texts="longest").texts == ["What is  2+2? ", "Hello there"]
    assert main(["data", "info", str(f), "-o", "texts=longest", "--json"]) == 0
    with pytest.raises(ValueError, match="texts must be one of"):
        load_generic(f, texts="shortest")


# ---------------------------------------------------------------- pickles need --trust-pickle
def test_pickle_loaders_refuse_without_trust(tmp_path, capsys):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (Path.write_text, (marker, "pwned"))
    (tmp_path / "routerbench_0shot.pkl").write_bytes(pickle.dumps(Evil()))
    with pytest.raises(DataValidationError, match="--trust-pickle"):
        load_routerbench(tmp_path)
    err = _cli_error(capsys, "data", "info", str(tmp_path / "routerbench_0shot.pkl"))
    assert "refusing to unpickle" in err and "--trust-pickle" in err
    rev = tmp_path / "arc_router_dataset.pkl"
    rev.write_bytes(pickle.dumps(Evil()))
    with pytest.raises(DataValidationError, match="refusing to unpickle"):
        load_routereval(rev)
    assert not marker.exists()
    # trusted: it is unpickled (and here runs the file's code: what the flag warns about)
    assert main(["data", "info", str(tmp_path / "routerbench_0shot.pkl"), "--trust-pickle"]) == 2
    assert marker.read_text() == "pwned"
    assert "expected a pandas DataFrame" in capsys.readouterr().err


def test_trust_pickle_is_ignored_by_loaders_that_do_not_unpickle():
    d = load_dataset(str(FIXTURES / "embedllm"), trust_pickle=True)
    assert d.shape == (5, 3)
    np.testing.assert_array_equal(d.scores, load_dataset(str(FIXTURES / "embedllm")).scores)


# ---------------------------------------------------------------- compressed bombs, record caps
def _long_records(n: int) -> list[tuple[str, str, float]]:
    return [(f"q{i // 2}", "ab"[i % 2], float(i % 3 == 0)) for i in range(n)]


def _write_table(path: Path, n: int) -> None:
    recs = _long_records(n)
    name = path.name
    if name.endswith((".csv", ".csv.gz")):
        body = "query_id,model,score\n" + "".join(f"{q},{m},{s}\n" for q, m, s in recs)
        if name.endswith(".gz"):
            import gzip
            with gzip.open(path, "wt") as fh:
                fh.write(body)
        else:
            path.write_text(body)
    elif name.endswith((".jsonl", ".jsonl.gz")):
        body = "".join(json.dumps({"query_id": q, "model": m, "score": s}) + "\n"
                       for q, m, s in recs)
        if name.endswith(".gz"):
            import gzip
            with gzip.open(path, "wt") as fh:
                fh.write(body)
        else:
            path.write_text(body)
    else:
        pd.DataFrame(recs, columns=["query_id", "model", "score"]).to_parquet(path)


@pytest.mark.parametrize("suffix", [".csv.gz", ".jsonl.gz"])
def test_compressed_text_past_max_bytes_is_refused(tmp_path, capsys, suffix):
    f = tmp_path / f"bomb{suffix}"
    _write_table(f, 40_000)
    import gzip
    with gzip.open(f, "rb") as fh:
        size = len(fh.read())           # decompressed bytes, counted independently
    assert f.stat().st_size < size // 4
    with pytest.raises(DataValidationError) as ei:
        load_generic(f, max_bytes=size // 2)
    msg = str(ei.value)
    assert str(f) in msg and f"more than {size // 2:,} bytes once decompressed" in msg
    assert "-o max_bytes=N" in msg
    err = _cli_error(capsys, "data", "info", str(f), "-o", f"max_bytes={size - 1}")
    assert "max_bytes" in err and f"{size - 1:,} bytes" in err
    # exactly at the limit (and by default) it loads
    assert load_generic(f, max_bytes=size).shape == (20_000, 2)
    assert main(["data", "info", str(f), "-o", f"max_bytes={size}"]) == 0


def test_format_detection_reads_under_the_callers_max_bytes(tmp_path, capsys, monkeypatch):
    """load_dataset(path) detects the format before loading: it read a .jsonl.gz's first
    record under the default 4 GiB, so a small file whose first line is huge was expanded into
    memory (300 MB line: +1.1 GB) before the loader's max_bytes refused it."""
    import gzip
    from recsys_router.datasets import generic
    f = tmp_path / "long-first-line.jsonl.gz"
    with gzip.open(f, "wb") as fh:
        fh.write(b'{"query_id": "q1", "model": "a", "score": 1, "pad": "' + b"x" * 200_000
                 + b'"}\n')
    seen = []
    real = generic.open_counted
    monkeypatch.setattr(generic, "open_counted",
                        lambda path, limits: seen.append(limits.max_bytes) or real(path, limits))
    with pytest.raises(DataValidationError, match="more than 1,000 bytes once decompressed"):
        load_dataset(str(f), max_bytes=1000)
    assert seen and set(seen) == {1000}      # detection too, not only the loader
    seen.clear()
    err = _cli_error(capsys, "data", "info", str(f), "-o", "max_bytes=1000")
    assert "1,000 bytes" in err and set(seen) == {1000}


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".jsonl", ".jsonl.gz", ".parquet"])
def test_more_records_than_max_records_is_refused(tmp_path, capsys, suffix, monkeypatch):
    f = tmp_path / f"many{suffix}"
    _write_table(f, 1_001)
    with pytest.raises(DataValidationError) as ei:
        load_generic(f, max_records=1_000)
    msg = str(ei.value)
    assert str(f) in msg and "at most 1,000 are read" in msg and "-o max_records=N" in msg
    if suffix == ".parquet":  # the footer's count, read before the data
        assert "1,001 records" in msg
    assert load_generic(f, max_records=1_001).shape == (501, 2)
    err = _cli_error(capsys, "data", "info", str(f), "-o", "max_records=10")
    assert "at most 10 are read" in err
    # the default applies when no option is given
    from recsys_router.datasets import _limits
    monkeypatch.setattr(_limits, "DEFAULT_MAX_RECORDS", 1_000)
    with pytest.raises(DataValidationError, match="at most 1,000 are read"):
        load_generic(f)


def test_parquet_footer_size_is_checked_before_reading(tmp_path, monkeypatch):
    import pyarrow.parquet as pq
    f = tmp_path / "wide.parquet"
    _write_table(f, 2_000)
    meta = pq.ParquetFile(f).metadata
    size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    read = []
    monkeypatch.setattr(pd, "read_parquet", lambda *a, **k: read.append(a))
    with pytest.raises(DataValidationError) as ei:
        load_generic(f, max_bytes=size - 1)
    assert f"({size:,} declared)" in str(ei.value) and "max_bytes" in str(ei.value)
    assert read == []                   # refused from the footer alone


def test_read_limits_are_positive_whole_numbers(tmp_path):
    f = tmp_path / "t.csv"
    _write_table(f, 4)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="must be a positive whole number"):
            load_generic(f, max_records=bad)
        with pytest.raises(ValueError, match="must be a positive whole number"):
            load_generic(f, max_bytes=bad)
    from recsys_router.datasets._limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_RECORDS
    assert (DEFAULT_MAX_BYTES, DEFAULT_MAX_RECORDS) == (4 * 1024 ** 3, 50_000_000)
