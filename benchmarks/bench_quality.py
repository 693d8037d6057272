"""Routing quality of the CF models and the classic baselines on the shared data.

Two parts, both through :func:`recsys_router.evaluation.evaluate` (metrics are the
library's own, computed from the decision table; nothing is re-implemented here):

1. ``folds``: K-fold cross-validation (default 5) on ``routerbench_zs`` (cost-aware:
   RouterBench AIQ, ORBIT nAUC / rQNC / RCI, plus mu_o), ``routerdc`` and ``llmrouter``
   (RouterEval mu_o, V_B, E_p); mean and std over folds.
2. ``anchor``: ORBIT's protocol on ``routerbench_zs`` (see ``/work/shared/ANCHORS.md``):
   the six CSVs pooled row by row, rows with any missing value dropped (3,150 kept),
   20 % train / 80 % test by query (ORBIT's fixed permutation, seed 0, whatever ``--seed``;
   ``--seed`` seeds the routers and the evaluation, as in ``folds``), MiniLM embeddings,
   ORBIT budget sweep over the router's predicted costs; our routers printed next to ORBIT's
   measured numbers.

Routers: registry names, plus ``ca-<name>`` = :class:`recsys_router.models.cost_aware.CostAwareRouter`
around ``<name>``: per-query predicted costs (ridge on the query embedding) and a cost
penalty on the predicted scores chosen on an inner split of the training queries;
``cam-<name>`` is the same with each LLM's mean train cost as predicted cost.

Writes ``<out>/<part>_<dataset><tag>.md`` and ``.csv`` (metrics, long) and prints the tables;
``--readme FILE`` also puts each table into FILE between its own markers.

Usage::

    python benchmarks/bench_quality.py --seed 0 --part anchor --routers knn,mf,ca-mf
    python benchmarks/bench_quality.py --seed 0 --part folds --folds 5 --datasets routerbench_zs
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks.bench_checks import (count, locked_folder, name_list, positive_int,  # noqa: E402
                                     write_text_atomic)
from recsys_router.cli.args import auto_folds  # noqa: E402
from recsys_router.models.cost_aware import CostAwareRouter  # noqa: E402
from recsys_router.data import RoutingData  # noqa: E402
from recsys_router.datasets.registry import load_dataset  # noqa: E402
from recsys_router.evaluation import EvalConfig, evaluate  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CF = ["mf", "two-tower", "als", "bpr", "mirt", "nirt", "graph"]
BASELINES = ["oracle", "random", "best-single", "knn", "prknn", "c-roberta", "svm", "linearr",
             "mlpr", "mlc"]
#: ORBIT's numbers from ANCHORS.md: router -> (nAUC, Peak, rQNC or None, RCI or None, q@max)
ANCHORS = {
    "oracle": (0.9519, 0.9750, 0.0346, 0.120, 0.9750),
    "knn": (0.8088, 0.8750, 0.9986, 0.993, 0.8750),
    "mlp": (0.7965, 0.8750, 1.0000, 0.994, 0.8750),
    "EmbedLLM": (0.7775, 0.8750, 1.0000, 0.994, 0.8750),
    "MIRT": (0.7078, 0.8750, 1.0000, 0.994, 0.8750),
    "RouteLLM-MF": (0.7040, 0.8746, None, None, 0.8746),
    "GraphRouter": (0.6404, 0.6623, None, 0.356, 0.6623),
    "svm": (0.6347, 0.6921, None, 0.466, 0.5988),
}
PROTOCOLS = {"routerbench_zs": ["routerbench", "orbit", "routereval"],
             "routerdc": ["routereval"], "llmrouter": ["routereval"]}
COLUMNS = {"routerbench": [("aiq", "AIQ")],
           "orbit": [("nauc", "nAUC"), ("peak", "Peak"), ("rqnc", "rQNC"), ("rci", "RCI"),
                     ("quality_at_max_budget", "q@max"), ("cost_at_max_budget", "cost@max")],
           "routereval": [("mu_o", "mu_o"), ("v_b", "V_B"), ("e_p", "E_p")]}


def anchor_data() -> RoutingData:
    """The six routerbench_zs CSVs pooled row by row; rows with any NaN dropped (ORBIT)."""
    folder = DATA / "routerbench_zs"
    frames = []
    for f in sorted(folder.glob("*.csv")):
        df = pd.read_csv(f)
        df["file"] = f.stem
        frames.append(df.drop(columns=[c for c in df.columns if str(c).startswith("Unnamed")]))
    raw = pd.concat(frames, ignore_index=True)
    raw = raw.dropna(subset=[c for c in raw.columns if c != "oracle_model_to_route_to"])
    raw = raw.reset_index(drop=True)
    llms = [c[: -len("|total_cost")] for c in raw.columns if c.endswith("|total_cost")]
    text = [ast.literal_eval(p)[0] for p in raw["prompt"]]
    queries = pd.DataFrame({"query_id": [f"{s}@{f}:{i}" for i, (s, f) in
                                         enumerate(zip(raw["sample_id"], raw["file"]))],
                            "text": text, "task": raw["eval_name"].astype(str)})
    scores = raw[llms].to_numpy(dtype=np.float32)
    costs = raw[[f"{m}|total_cost" for m in llms]].to_numpy(dtype=np.float32)
    # ORBIT's split: legacy-seeded permutation, the first 20 % train (reproduces ANCHORS'
    # test quality 0.8750 of gpt-4-1106-preview)
    perm = np.random.RandomState(0).permutation(len(queries))
    split = np.full(len(queries), "test", dtype=object)
    split[perm[: int(0.2 * len(queries))]] = "train"
    queries["split"] = split
    return RoutingData(queries, pd.DataFrame({"name": llms}), scores, costs,
                       name="routerbench_zs-orbit", source=str(folder))


def load_shared(name: str) -> RoutingData:
    """A registered dataset, or ``<shared>/<name>/<name>.parquet`` in the generic long format
    (the 30+-LLM pools ``cruxeval`` and ``bfcl_v1``)."""
    from recsys_router.datasets.registry import available_datasets
    if name in available_datasets():
        return load_dataset(name)
    path = DATA / name / f"{name}.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"dataset {name!r} is neither registered nor at {path}")
    data = load_dataset(str(path))
    data.name = name
    return data


def shared_dataset_names() -> list[str]:
    """The names :func:`load_shared` takes: registered datasets and the ``<shared>/<name>``
    folders holding ``<name>.parquet``."""
    from recsys_router.datasets.registry import available_datasets
    found = [p.name for p in DATA.glob("*") if (p / f"{p.name}.parquet").is_file()] \
        if DATA.is_dir() else []
    return sorted(set(available_datasets()) | set(found))


def _cost_aware_name(name: str) -> bool:
    from recsys_router.registry import available_routers
    return any(name.startswith(p) and name[len(p):] in available_routers() for p in ("ca-", "cam-"))


def _registry_routers() -> list[str]:
    from recsys_router.registry import available_routers
    return available_routers()


#: ``--routers`` / ``--datasets`` types: unknown names refused at parse time, valid ones listed
router_names = name_list(_registry_routers, "router (or ca-/cam-<router>)", accept=_cost_aware_name)
dataset_names = name_list(shared_dataset_names, "dataset")


def load_shared_subset(name: str, max_queries: int, seed: int) -> RoutingData:
    """:func:`load_shared`, cut to a seeded subset of ``max_queries`` queries when larger
    (0: all)."""
    data = load_shared(name)
    if max_queries and data.n_queries > max_queries:
        keep = np.random.default_rng(seed).choice(data.n_queries, max_queries, replace=False)
        data = data.subset(np.sort(keep))
    return data


def router_spec(name: str, encoder: str, seed: int, params: dict | None = None):
    """A registry name, or a configured :class:`CostAwareRouter` for ``ca-<name>`` (whose
    wrapped router gets ``params[<name>]``)."""
    for prefix, costs in (("ca-", "ridge"), ("cam-", "mean")):
        if name.startswith(prefix):  # a subclass per name: the runner labels instances by class
            cls = _CA_CLASSES.setdefault(name, type(name, (CostAwareRouter,), {}))
            base = name[len(prefix):]
            return cls(base, (params or {}).get(base), penalty="auto", cost_model=costs,
                       encoder=encoder, seed=seed)
    return name


def run_config(a: argparse.Namespace, names: list[str], params: dict, encoder: str,
               **split) -> EvalConfig:
    """The run's :class:`EvalConfig` for either part: the routers, their ``--params``, and
    ``--no-fallback``, ``--no-top-check`` and ``--auto`` (one place, so both parts honour
    them), with the part's protocols and split (``split``: protocols, folds or split_column,
    seed)."""
    return EvalConfig([router_spec(n, encoder, a.seed, params) for n in names], encoder=encoder,
                      router_params={n: p for n, p in params.items() if n in names},
                      fallback=not a.no_fallback, top_check=not a.no_top_check, auto=a.auto,
                      auto_objective=a.auto_objective, fallback_metric=a.fallback_metric,
                      auto_folds=a.auto_folds, **split)


def parse_params(text: str) -> dict:
    """``"mf.batch_size=512,mirt.max_epochs=5"`` -> ``{"mf": {"batch_size": 512}, ...}``;
    a value may be a Python literal with commas inside brackets, e.g.
    ``task-residual.base_params={'batch_size':512}``."""
    out: dict = {}
    items, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    for item in [x.strip() for x in items if x.strip()]:
        key, _, val = item.partition("=")
        router, _, param = key.partition(".")
        if not param or not val:
            raise ValueError(f"--params entry {item!r} must look like router.param=value")
        try:
            v = ast.literal_eval(val)
        except (ValueError, SyntaxError):
            v = val
        out.setdefault(router.strip(), {})[param.strip()] = v
    return out


_CA_CLASSES: dict = {}


def _cell(mean: float, std: float | None) -> str:
    if mean is None or not np.isfinite(mean):
        return "-"
    return f"{mean:.4f}" if std is None or not np.isfinite(std) else f"{mean:.4f} ± {std:.4f}"


def summary(res, protocols) -> pd.DataFrame:
    """One row per router: mean (± std over folds) of the headline metrics."""
    m = res.metrics
    m = m[(m["pool"] == "all") & (m["group"] == "all")]
    folds = set(m["fold"])
    mean = m[m["fold"] == "mean"] if "mean" in folds else m
    std = m[m["fold"] == "std"] if "std" in folds else None
    routers = [r for r in dict.fromkeys(mean["router"]) if r != "zero (LLM hull)"]
    llm_rows = [r for r in routers if r.startswith("LLM:")]
    routers = [r for r in routers if not r.startswith("LLM:")] + llm_rows
    timing = res.timings.groupby("router")[["fit_s", "predict_s"]].mean() if len(res.timings) \
        else pd.DataFrame()
    rows = []
    for r in routers:
        row = {"router": r}
        for proto in protocols:
            for key, title in COLUMNS[proto]:
                sel = (mean["protocol"] == proto) & (mean["router"] == r) & (mean["metric"] == key)
                if not sel.any():
                    continue
                v = float(mean.loc[sel, "value"].iloc[0])
                s = None
                if std is not None:
                    ss = (std["protocol"] == proto) & (std["router"] == r) & (std["metric"] == key)
                    s = float(std.loc[ss, "value"].iloc[0]) if ss.any() else None
                row[title] = _cell(v, s)
        if r in timing.index:
            row["fit s"] = f"{timing.loc[r, 'fit_s']:.1f}"
        rows.append(row)
    return pd.DataFrame(rows).fillna("-")


def markdown(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns)
    return "\n".join([head] + ["| " + " | ".join(str(v) for v in r) + " |"
                               for r in df.itertuples(index=False)])


def anchor_table(ours: pd.DataFrame) -> pd.DataFrame:
    """Our rows then ORBIT's measured rows, same columns."""
    rows = [dict(r) for _, r in ours.iterrows() if not str(r["router"]).startswith("LLM:")]
    for name, (nauc, peak, rqnc, rci, qmax) in ANCHORS.items():
        rows.append({"router": f"ORBIT {name}", "nAUC": f"{nauc:.4f}", "Peak": f"{peak:.4f}",
                     "rQNC": "-" if rqnc is None else f"{rqnc:.4f}",
                     "RCI": "-" if rci is None else f"{rci:.3f}", "q@max": f"{qmax:.4f}"})
    return pd.DataFrame(rows).fillna("-")


def write(out: Path, stem: str, table: pd.DataFrame, res, header: str,
          readme: Path | None = None) -> str:
    out.mkdir(parents=True, exist_ok=True)
    text = f"{header}\n\n{markdown(table)}\n"
    if res.notes:
        text += "\nNotes:\n" + "\n".join(f"- {n}" for n in dict.fromkeys(res.notes)) + "\n"
    csv = res.metrics.to_csv(index=False)  # both made before either file is replaced
    write_text_atomic(out / f"{stem}.csv", csv)
    write_text_atomic(out / f"{stem}.md", text)
    if readme is not None:
        update_readme(readme, f"{out.as_posix()}/{stem}", text)
    print(text, flush=True)
    return text


def update_readme(path: Path, key: str, text: str) -> None:
    r"""Put ``text`` between the markers ``<!-- bench_quality: key -->`` and
    ``<!-- /bench_quality: key -->`` of the Markdown file ``path`` (appended with its markers
    when absent). Written to a temporary file of its own, then renamed over ``path`` (its mode
    kept); an exclusive lock on the folder around the read-modify-write keeps runs made side
    by side from losing each other's tables.

    Example
    -------
    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "R.md"
    >>> _ = f.write_text("intro\n")
    >>> update_readme(f, "r/folds_x", "table 1\n"); update_readme(f, "r/folds_x", "table 2\n")
    >>> f.read_text().count("table"), "table 2" in f.read_text()
    (1, True)
    """
    begin, end = f"<!-- bench_quality: {key} -->", f"<!-- /bench_quality: {key} -->"
    with locked_folder(path.parent):
        old = path.read_text() if path.exists() else ""
        write_text_atomic(path, _with_block(old, begin, end, text, path))


def _with_block(old: str, begin: str, end: str, text: str, path: Path) -> str:
    """``old`` with ``text`` between ``begin`` and ``end`` (appended when both are absent)."""
    block = f"{begin}\n{text.rstrip()}\n{end}"
    i, j = old.find(begin), old.find(end)
    if i >= 0 and j > i:
        new = old[:i] + block + old[j + len(end):]
    elif i >= 0 or j >= 0:
        raise ValueError(f"{path}: marker {begin!r} or {end!r} appears without its pair")
    else:
        new = old.rstrip("\n") + ("\n\n" if old else "") + block + "\n"
    return new


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--part", choices=["folds", "anchor", "both"], default="both")
    ap.add_argument("--folds", type=positive_int, default=5, help="K of K-fold CV (1: one 8:1:1 split)")
    ap.add_argument("--datasets", type=dataset_names, default="routerbench_zs,routerdc,llmrouter")
    ap.add_argument("--routers", type=router_names, default=",".join(BASELINES + CF))
    ap.add_argument("--encoder", default="minilm",
                    help="encoder for all datasets; override per dataset with --encoders")
    ap.add_argument("--encoders", default="", help="e.g. routerdc=hashing,llmrouter=hashing")
    ap.add_argument("--max-queries", type=count, default=0,
                    help="seeded random subset of queries per dataset (0 = all)")
    ap.add_argument("--params", default="",
                    help="router parameters, e.g. mf.batch_size=512,mirt.batch_size=512")
    ap.add_argument("--no-fallback", action="store_true",
                    help="learned routers without the safe fallback (evaluate --no-fallback)")
    ap.add_argument("--no-top-check", action="store_true",
                    help="the safe fallback without its top-choice check on data with costs "
                         "(evaluate --no-top-check)")
    ap.add_argument("--auto", type=count, default=0, metavar="N",
                    help="inner Optuna search of N trials per router (evaluate --auto N)")
    ap.add_argument("--auto-objective", choices=("auto", "mu_o", "nauc"), default="auto",
                    help="the --auto search's objective (evaluate --auto-objective)")
    ap.add_argument("--auto-folds", type=auto_folds, default="auto", metavar="{auto,1-20}",
                    help="where the --auto search scores a setting (evaluate --auto-folds)")
    ap.add_argument("--fallback-metric", choices=("auto", "mu_o", "nauc"), default="auto",
                    help="the safe fallback's verdict metric (evaluate --fallback-metric)")
    ap.add_argument("--tag", default="", help="suffix of the result files (e.g. _auto20)")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--readme", default="",
                    help="also write each table into this Markdown file, between "
                         "'<!-- bench_quality: <out>/<table> -->' markers "
                         "(e.g. benchmarks/README.md)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    readme = Path(a.readme) if a.readme else None
    cmd = "python benchmarks/bench_quality.py " + " ".join(sys.argv[1:] if argv is None else argv)
    per = dict(kv.split("=", 1) for kv in a.encoders.split(",") if kv.strip())
    names = a.routers
    params = parse_params(a.params)
    if a.part in ("anchor", "both"):
        t0 = time.perf_counter()
        data = anchor_data()
        cfg = run_config(a, names, params, a.encoder, protocols=["orbit"],
                         split_column="split", seed=a.seed)
        res = evaluate(data, cfg)
        tab = summary(res, ["orbit"])
        write(out, f"anchor_routerbench_zs{a.tag}", anchor_table(tab), res,
              f"### ORBIT protocol on routerbench_zs ({data.n_queries} rows, ORBIT 20/80 split, "
              f"encoder {a.encoder}{', --auto ' + str(a.auto) if a.auto else ''}"
              f"{', no fallback' if a.no_fallback else ''}"
              f"{', no top-choice check' if a.no_top_check else ''}"
              f"{'' if a.fallback_metric == 'auto' else ', fallback verdict by ' + a.fallback_metric}; "
              f"{time.perf_counter() - t0:.0f} s)"
              f"\n\n`{cmd}`", readme)
    if a.part in ("folds", "both"):
        for ds in a.datasets:
            t0 = time.perf_counter()
            data = load_shared_subset(ds, a.max_queries, a.seed)
            enc = per.get(ds, a.encoder)
            protos = PROTOCOLS.get(ds, ["routereval"])
            cfg = run_config(a, names, params, enc, protocols=protos, folds=a.folds,
                             seed=a.seed)
            res = evaluate(data, cfg)
            tab = summary(res, protos)
            how = f"{a.folds}-fold CV" if a.folds > 1 else "one 8:1:1 split"
            objective = f" ({a.auto_objective})" if a.auto and a.auto_objective != "auto" else ""
            if a.auto and a.auto_folds != "auto":
                objective += f", {a.auto_folds} inner fold(s)"
            if a.fallback_metric != "auto":
                objective += f", fallback verdict by {a.fallback_metric}"
            write(out, f"folds_{ds}{a.tag}", tab, res,
                  f"### {ds}: {how}, {data.n_queries} queries x {data.n_llms} LLMs, "
                  f"encoder {enc}, seed {a.seed}"
                  f"{', --auto ' + str(a.auto) if a.auto else ''}"
                  f"{objective}"
                  f"{', no fallback' if a.no_fallback else ''}"
                  f"{', no top-choice check' if a.no_top_check else ''} "
                  f"({time.perf_counter() - t0:.0f} s)\n\n`{cmd}`", readme)


if __name__ == "__main__":
    main()
