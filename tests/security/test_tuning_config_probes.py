"""Hostile ``tune`` inputs found before a study exists: a model ``class_path`` outside the
import allow-list (refused as text, before any import: each probe runs in a fresh process so
``sys.modules`` shows what was imported), and search or config files nested thousands of
levels deep (refused on the parser's events in well under a second, naming the file and the
key, instead of minutes of CPU and a bare ``RecursionError``). A refused run leaves no
``--out`` folder."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recsys_router.cli import main
from recsys_router.errors import DataValidationError
from recsys_router.tuning.space import MAX_DEPTH, load_search_space
from recsys_router.yaml_limits import MAX_YAML_DEPTH
from tuning_data import synthetic_data_config

ROOT = Path(__file__).resolve().parents[2]
ZEN = "Beautiful is better than ugly"

_PROBE = """
import contextlib, io, json, sys
from recsys_router.cli import main
buf_out, buf_err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(buf_out), contextlib.redirect_stderr(buf_err):
    rc = main(sys.argv[2:])
mod = sys.argv[1]
print(json.dumps({"rc": rc, "imported": mod in sys.modules, "out": buf_out.getvalue(),
                  "err": buf_err.getvalue()}))
"""


def _tune_in_fresh_process(tmp_path, class_path: str, module: str) -> dict:
    model = tmp_path / "model.yaml"
    model.write_text(f"model:\n  class_path: {class_path}\n  init_args: {{}}\n")
    data = synthetic_data_config(tmp_path / "data.yaml", dim=8, n_queries=60, n_llms=3, n_topics=2)
    search = tmp_path / "s.yaml"
    search.write_text("model.init_args.lr: {type: float, low: 0.001, high: 0.1}\n")
    args = ["tune", "-c", str(model), "-c", str(data), "--search", str(search), "--n-trials", "1",
            "--out", str(tmp_path / "out"), "--no-plots", "--no-progress"]
    res = subprocess.run([sys.executable, "-c", _PROBE, module, *args], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("class_path,module", [
    ("this.Model", "this"),                 # prints the Zen of Python when imported
    ("os.system", None),                    # always imported: the call must not happen
    ("builtins.eval", None),
    ("antigravity.Model", "antigravity"),   # opens a web browser when imported
    ("recsys_routerx.Model", "recsys_routerx"),  # a prefix of an allowed root is not under it
])
def test_model_class_path_outside_the_allow_list_is_refused_before_import(tmp_path, class_path,
                                                                          module):
    got = _tune_in_fresh_process(tmp_path, class_path, module or "json")
    assert got["rc"] == 2
    if module is not None:
        assert got["imported"] is False, f"{module} was imported"
    assert ZEN not in got["out"] + got["err"]
    err = got["err"].strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"class_path {class_path!r} is refused" in err and "nothing was imported" in err
    assert "model.class_path" in err and "model.yaml" in err
    assert not (tmp_path / "out").exists()  # no study, no folder


def test_nested_class_path_in_a_tune_config_is_refused_before_a_study(tmp_path, capsys):
    """A ``trainer.callbacks`` class_path naming ``os.system`` (refused by the restricted
    parser) is found when the configs are built once before the study: nothing is written."""
    cfg = tmp_path / "trainer.yaml"
    cfg.write_text("trainer:\n  callbacks:\n    - class_path: os.system\n"
                   "      init_args: {command: 'touch PWNED'}\n")
    data = synthetic_data_config(tmp_path / "data.yaml", dim=8, n_queries=60, n_llms=3, n_topics=2)
    search = tmp_path / "s.yaml"
    search.write_text("model.init_args.lr: {type: float, low: 0.001, high: 0.1}\n")
    rc = main(["tune", "-c", str(ROOT / "configs" / "models" / "mf.yaml"), "-c", str(data),
               "-c", str(cfg), "--search", str(search), "--n-trials", "1", "--no-plots",
               "--no-progress", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and "os.system" in err and "refused" in err, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("depth", [8_000, 50_000])  # a 16 KB and a 100 KB file
def test_deeply_nested_search_file_is_refused_fast(tmp_path, depth):
    path = tmp_path / "deep.yaml"
    path.write_text("params.k: " + "[" * depth + "]" * depth + "\n")
    start = time.perf_counter()
    with pytest.raises(DataValidationError) as err:
        load_search_space(path)
    assert time.perf_counter() - start < 1.0  # 29 s and over 120 s before
    msg = str(err.value)
    assert str(path) in msg and f"more than {MAX_DEPTH} levels" in msg
    assert "under key params.k[0]" in msg


def test_deep_mappings_in_choices_name_file_and_key_not_recursion_error(tmp_path, capsys):
    """1,000 nested mappings inside ``choices`` ended in a bare RecursionError."""
    path = tmp_path / "deep.yaml"
    path.write_text("params.metric: {type: categorical, choices: [cosine, "
                    + "{a: " * 1000 + "1" + "}" * 1000 + "]}\n")
    data = synthetic_data_config(tmp_path / "data.yaml", dim=8, n_queries=60, n_llms=3, n_topics=2)
    rc = main(["tune", "--router", "knn", "-c", str(data), "--search", str(path), "--n-trials",
               "1", "--no-plots", "--no-progress", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "RecursionError" not in err and len(err.splitlines()) == 1, err
    assert str(path) in err and "under key params.metric.choices[1].a.a" in err
    assert not (tmp_path / "out").exists()


def test_search_file_at_the_depth_limit_still_loads(tmp_path):
    """A choice nested to exactly MAX_DEPTH levels (file mapping, spec, choices, then lists)
    is read as written."""
    inner = MAX_DEPTH - 3
    path = tmp_path / "ok.yaml"
    path.write_text("params.x: {type: categorical, choices: [" + "[" * inner + "1" + "]" * inner
                    + ", 2]}\n")
    value = load_search_space(path).params[0].choices[0]
    for _ in range(inner - 1):
        assert isinstance(value, list) and len(value) == 1
        value = value[0]
    assert value == [1]


def test_deeply_nested_tune_config_is_refused_fast(tmp_path, capsys):
    """``tune -c`` configs go through the same bound (MAX_YAML_DEPTH) before they are merged."""
    cfg = tmp_path / "deep.yaml"
    cfg.write_text("data: " + "[" * 50_000 + "]" * 50_000 + "\n")
    search = tmp_path / "s.yaml"
    search.write_text("params.k: {type: int, low: 1, high: 5}\n")
    start = time.perf_counter()
    rc = main(["tune", "--router", "knn", "-c", str(cfg), "--search", str(search),
               "--n-trials", "1", "--no-plots", "--no-progress", "--out", str(tmp_path / "out")])
    assert time.perf_counter() - start < 5.0
    err = capsys.readouterr().err.strip()
    assert rc == 2 and str(cfg) in err and f"more than {MAX_YAML_DEPTH} levels" in err, err
    assert "under key data[0]" in err and not (tmp_path / "out").exists()


def _alias_chain(levels: int, per_anchor: int) -> str:
    """Each anchor ``per_anchor`` lists deep with the previous alias at its bottom."""
    lines = ["a0: &a0 1"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} " + "[" * per_anchor + f"*a{i - 1}" + "]" * per_anchor)
    return "\n".join(lines) + f"\ndeep: *a{levels}\n"


def _laughs(levels: int = 9) -> str:
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text, why", [
    (_alias_chain(100, 29), "nests more than 32 levels deep once its aliases"),  # ~2,900 levels
    (_laughs(), "stands for more than 200,000 values once its aliases"),         # 9^10 values
], ids=["alias-chain-depth", "billion-laughs"])
def test_a_config_that_aliases_expand_is_refused_when_read(tmp_path, text, why):
    """Each anchor stayed under the depth limit, or the file was 540 bytes, so the event check
    passed; expanded (the study identity's JSON hash, a deepcopy) they made a RecursionError
    or ran out of memory. The loaded value is now walked, at most MAX_YAML_NODES steps."""
    from recsys_router.configs import load_yaml_configs
    p = tmp_path / "cfg.yaml"
    p.write_text(text)
    with pytest.raises(ValueError, match=why) as err:
        load_yaml_configs([p])
    assert str(p) in str(err.value)
    p.write_text(_alias_chain(1, 29) + _laughs(4))   # shallow aliases, 59,049 values: fine
    assert load_yaml_configs([p])["deep"][0] is not None
