"""Issue 15's aims read off ``bench_quality.py``'s K-fold result files.

Reads ``<out>/folds_<dataset><tag>.csv`` (the long metric tables ``bench_quality.py --part
folds`` writes) and prints two Markdown tables of RouterEval ``mu_o`` (higher is better):

1. **Defaults**: per dataset, ``best-single``, ``task-best``, the best CF router (highest
   mean over folds among ``mf, mirt, nirt, two-tower, graph, als, bpr``), its paired
   differences to both baselines, how many CF routers reach ``best-single``, the worst CF
   router and the best other learned router (e.g. ``knn``, ``linearr``).
2. **--auto N against the defaults** (``--auto-tag``): per dataset and router present in both
   files, the paired difference.
3. **Kept on a small lead** (``--kept-leads Z``): every router-fold whose safe-fallback note
   (``folds_<dataset><tag>.md``) kept the router on an inner lead over its baseline of less
   than ``Z`` standard errors (SE > 0), with the router's and that baseline's test-fold
   ``mu_o``: what a verdict requiring a lead of ``Z`` SE would have handed to the baseline.

A paired difference is computed fold by fold, ``d_f = a_f - b_f``, and shown as
``mean(d) ± sd(d)`` (``sd`` with ``ddof = 1``, as ``bench_quality`` writes its ``std`` rows),
so the noise the folds share (the same test queries) cancels.

Usage::

    python benchmarks/summarize_quality.py --out benchmarks/results/issue15d \\
        --datasets cruxeval,bfcl_v1 --tag "" --auto-tag _auto20
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["fold_values", "paired", "merge_runs", "defaults_table", "auto_table", "kept_leads",
           "CF"]

#: the collaborative-filtering routers of the aims (bench_quality.CF)
CF = ["mf", "mirt", "nirt", "two-tower", "graph", "als", "bpr"]
#: routers that are references, not learned routers
_REFERENCE = ("oracle", "random", "best-single", "task-best")
_NEEDED = {"protocol", "pool", "group", "fold", "router", "metric", "value"}
#: ``--metric``: the protocol whose rows hold it
METRICS = {"mu_o": "routereval", "nauc": "orbit", "aiq": "routerbench"}


def fold_values(path: Path, metric: str = "mu_o", protocol: str = "routereval") -> pd.DataFrame:
    """Per-fold values of ``metric``: a frame indexed by fold number, one column per router.

    Raises
    ------
    ValueError
        When the file lacks a needed column, has no numbered folds for the metric, or a value
        is not a finite number (names the file and the row).

    Example
    -------
    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "f.csv"
    >>> _ = p.write_text("protocol,pool,group,fold,router,metric,value\\n"
    ...                  "routereval,all,all,0,mf,mu_o,0.5\\nroutereval,all,all,mean,mf,mu_o,0.5\\n")
    >>> fold_values(p)["mf"].tolist()
    [0.5]
    """
    df = pd.read_csv(path, dtype={"fold": str})
    missing = _NEEDED - set(df.columns)
    if missing:
        raise ValueError(f"{path}: missing column(s) {sorted(missing)}; expected a "
                         f"bench_quality.py folds_*.csv")
    sel = df[(df["protocol"] == protocol) & (df["pool"] == "all") & (df["group"] == "all")
             & (df["metric"] == metric) & df["fold"].str.fullmatch(r"\d+")]
    if sel.empty:
        raise ValueError(f"{path}: no per-fold rows of {protocol} {metric}")
    values = pd.to_numeric(sel["value"], errors="coerce")
    bad = ~np.isfinite(values.to_numpy(dtype=float))
    if bad.any():
        row = int(sel.index[bad][0]) + 2  # 1-based, after the header
        raise ValueError(f"{path}: row {row}: value {sel['value'].iloc[int(np.argmax(bad))]!r} "
                         f"is not a finite number")
    wide = sel.assign(value=values, fold=sel["fold"].astype(int)).pivot_table(
        index="fold", columns="router", values="value", aggfunc="first")
    return wide.sort_index()


def paired(a: pd.Series, b: pd.Series) -> tuple[float, float]:
    """``(mean(d), sd(d))`` of the per-fold differences ``d = a - b`` (``sd`` with
    ``ddof = 1``; NaN for a single fold).

    Example
    -------
    >>> paired(pd.Series([0.7, 0.8, 0.9]), pd.Series([0.6, 0.8, 0.7]))
    (0.1, 0.1)
    """
    d = (a - b).to_numpy(dtype=float)
    sd = float(np.std(d, ddof=1)) if len(d) > 1 else float("nan")
    return round(float(np.mean(d)), 12), round(sd, 12)


def _pm(mean: float, sd: float) -> str:
    return f"{mean:+.4f}" if not np.isfinite(sd) else f"{mean:+.4f} ± {sd:.4f}"


def defaults_table(per_dataset: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per dataset: the aims' quantities at the defaults (see the module docstring)."""
    rows = []
    for ds, w in per_dataset.items():
        cf = [r for r in CF if r in w.columns]
        if not cf or "best-single" not in w.columns:
            raise ValueError(f"{ds}: needs best-single and at least one of {CF}")
        means = w.mean()
        best = max(cf, key=lambda r: means[r])
        row = {"dataset": ds, "folds": len(w), "best-single": f"{means['best-single']:.4f}",
               "task-best": f"{means['task-best']:.4f}" if "task-best" in w else "-",
               "best CF": f"{best} {means[best]:.4f}",
               "best CF - best-single": _pm(*paired(w[best], w["best-single"])),
               "best CF - task-best": (_pm(*paired(w[best], w["task-best"]))
                                       if "task-best" in w else "-")}
        other = [r for r in w.columns if r not in CF and r not in _REFERENCE
                 and not r.startswith("LLM:")]
        row["best other learned"] = (f"{max(other, key=lambda r: means[r])} "
                                     f"{max(means[r] for r in other):.4f}" if other else "-")
        worst = min(cf, key=lambda r: means[r])
        reach = [r for r in cf if means[r] >= means["best-single"]]
        row["CF >= best-single"] = f"{len(reach)} of {len(cf)}"
        row["worst CF - best-single"] = f"{worst} " + _pm(*paired(w[worst], w["best-single"]))
        rows.append(row)
    return pd.DataFrame(rows)


def auto_table(defaults: dict[str, pd.DataFrame], auto: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (dataset, router) in both runs: defaults, ``--auto`` and the paired
    difference (folds matched by number; the two runs must have the same folds)."""
    rows = []
    for ds, a in auto.items():
        d = defaults[ds]
        if list(a.index) != list(d.index):
            raise ValueError(f"{ds}: the --auto run has folds {list(a.index)}, the defaults "
                             f"run {list(d.index)}")
        for r in [c for c in a.columns if c in d.columns and not c.startswith("LLM:")
                  and c not in _REFERENCE]:
            rows.append({"dataset": ds, "router": r, "defaults": f"{d[r].mean():.4f}",
                         "--auto": f"{a[r].mean():.4f}", "auto - defaults": _pm(*paired(a[r], d[r]))})
    return pd.DataFrame(rows)


def merge_runs(frames: list[pd.DataFrame], names: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """Join the per-fold frames of several runs of one dataset: each router's column comes
    from the first run that has it. Returns the joined frame and one note per later run
    naming the routers taken from it and, for routers both runs have, the largest absolute
    per-fold difference (0 where the two runs agree).

    Raises
    ------
    ValueError
        When the runs have different folds.

    Example
    -------
    >>> a = pd.DataFrame({"knn": [0.5, 0.6], "als": [0.4, 0.5]})
    >>> b = pd.DataFrame({"knn": [0.5, 0.6], "als": [0.4, 0.55], "mf": [0.7, 0.7]})
    >>> w, notes = merge_runs([a, b], ["A", "B"])
    >>> list(w.columns), notes[0]
    (['knn', 'als', 'mf'], 'B: mf; shared routers, largest |difference| over folds: knn 0, als 0.05')
    """
    out = frames[0]
    notes = []
    for f, name in zip(frames[1:], names[1:]):
        if list(f.index) != list(out.index):
            raise ValueError(f"{name}: folds {list(f.index)} differ from {list(out.index)}")
        new = [c for c in f.columns if c not in out.columns]
        shared = [c for c in f.columns if c in out.columns and not c.startswith("LLM:")]
        gaps = ", ".join(f"{c} {float((f[c] - out[c]).abs().max()):.4g}" for c in shared)
        notes.append(f"{name}: {', '.join(new) or 'no new routers'}; shared routers, largest "
                     f"|difference| over folds: {gaps or '-'}")
        out = pd.concat([out, f[new]], axis=1)
    return out, notes


_NOTE = re.compile(r"^- fold (\d{1,3}): ([A-Za-z0-9_.:-]{1,80}) safe fallback: .{0,2000}?"
                   r"all-queries verdict (router|best-single|task-best) \(all \d+ held-out "
                   r"queries: router - (best-single|task-best) = ([+-]\d+\.\d+), SE (\d+\.\d+)\)")


def kept_leads(note_paths: list[Path], scores: pd.DataFrame, below: float) -> pd.DataFrame:
    """Router-folds the safe fallback kept on an inner lead of less than ``below`` SE.

    Parameters
    ----------
    note_paths : list of Path
        ``folds_<dataset><tag>.md`` reports, in the order of the runs joined into ``scores``;
        a router-fold's note is taken from the first report that has it.
    scores : DataFrame
        Per-fold ``mu_o`` (:func:`fold_values`, joined with :func:`merge_runs`).
    below : float
        Standard errors a kept lead stays under to be listed (only notes with SE > 0).

    Returns
    -------
    DataFrame
        ``router``, ``fold``, ``inner`` (router minus baseline on the held-out training
        queries), ``se``, ``baseline``, ``test`` (router minus baseline on the test fold).

    Example
    -------
    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "f.md"
    >>> _ = p.write_text("- fold 0: mf safe fallback: fell back on 0 of 2 tasks; all-queries "
    ...                  "verdict router (all 9 held-out queries: router - best-single = "
    ...                  "+0.0100, SE 0.0200); other queries: router\\n")
    >>> s = pd.DataFrame({"mf": [0.70], "best-single": [0.75]}, index=[0])
    >>> kept_leads([p], s, 1.0)[["router", "inner", "test"]].values.tolist()
    [['mf', 0.01, -0.05]]
    """
    seen: dict = {}
    for path in note_paths:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                m = _NOTE.match(line[:4000])
                if m:
                    f, r, verdict, base, diff, se = m.groups()
                    seen.setdefault((r, int(f)), (verdict, base, float(diff), float(se)))
    rows = []
    for (r, f), (verdict, base, diff, se) in sorted(seen.items()):
        if verdict == "router" and se > 0 and diff < below * se and r in scores.columns \
                and base in scores.columns and f in scores.index:
            rows.append({"router": r, "fold": f, "inner": diff, "se": se, "baseline": base,
                         "test": round(float(scores.at[f, r] - scores.at[f, base]), 6)})
    return pd.DataFrame(rows, columns=["router", "fold", "inner", "se", "baseline", "test"])


def markdown(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns)
    return "\n".join([head] + ["| " + " | ".join(str(v) for v in r) + " |"
                               for r in df.itertuples(index=False)])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="benchmarks/results/issue15d",
                    help="the folder bench_quality.py wrote its folds_*.csv into")
    ap.add_argument("--datasets", default="cruxeval,bfcl_v1,routerbench_zs,llmrouter,routerdc")
    ap.add_argument("--tag", default="",
                    help="suffix of the defaults run's files; several, comma-separated: each "
                         "router from the first run that has it (the others' differences on "
                         "shared routers are printed)")
    ap.add_argument("--auto-tag", default="",
                    help="suffix of the --auto run's files (optional); several, comma-separated, "
                         "joined as --tag's are (e.g. one --auto run per router)")
    ap.add_argument("--metric", choices=sorted(METRICS), default="mu_o",
                    help="the metric read (nauc and aiq exist on datasets with costs)")
    ap.add_argument("--kept-leads", type=float, default=None, metavar="Z",
                    help="also list router-folds kept on an inner lead under Z SE (from the "
                         "runs' .md notes) with their test-fold differences")
    ap.add_argument("--seed", type=int, default=0, help="unused (no randomness); for uniformity")
    a = ap.parse_args(argv)
    if a.kept_leads is not None and not (np.isfinite(a.kept_leads) and a.kept_leads > 0):
        raise SystemExit(f"--kept-leads must be a finite number > 0, got {a.kept_leads}")
    out = Path(a.out)
    names = [d.strip() for d in a.datasets.split(",") if d.strip()]
    tags = a.tag.split(",")
    defaults, auto, notes, leads = {}, {}, [], []
    for ds in names:
        paths = [p for p in (out / f"folds_{ds}{t}.csv" for t in tags) if p.is_file()]
        if not paths:
            print(f"(no folds_{ds}<tag>.csv for tags {tags} in {out}: {ds} left out)",
                  file=sys.stderr)
            continue
        read = [fold_values(p, a.metric, METRICS[a.metric]) for p in paths]
        defaults[ds], more = merge_runs(read, [p.name for p in paths])
        notes += more
        if a.kept_leads is not None:
            md = [p.with_suffix(".md") for p in paths if p.with_suffix(".md").is_file()]
            k = kept_leads(md, defaults[ds], a.kept_leads)
            leads.append(k.assign(dataset=ds)[["dataset", *k.columns]])
        qs = [q for q in (out / f"folds_{ds}{t}.csv" for t in a.auto_tag.split(",") if t)
              if q.is_file()]
        if qs:
            auto[ds], more = merge_runs([fold_values(q, a.metric, METRICS[a.metric]) for q in qs],
                                        [q.name for q in qs])
            notes += [f"the --auto runs: {n}" for n in more]
    if not defaults:
        raise SystemExit(f"no folds_<dataset>{a.tag}.csv for {names} in {out}: this script "
                         "tabulates what benchmarks/bench_quality.py --part folds --out "
                         f"{out} wrote; run those commands (benchmarks/README.md) first")
    print(f"{a.metric} at the defaults; differences paired by fold (mean ± sd over folds)\n")
    print(markdown(defaults_table(defaults)))
    for n in notes:
        print(f"- routers joined from {n}")
    if auto:
        print(f"\n--auto ({a.auto_tag}) against the defaults, {a.metric}, paired by fold\n")
        print(markdown(auto_table(defaults, auto)))
    if leads:
        k = pd.concat(leads, ignore_index=True)
        cf = k[k["router"].isin(CF)]
        print(f"\nRouter-folds kept on an inner lead under {a.kept_leads:g} SE, test-fold mu_o "
              f"difference to the same baseline\n")
        shown = k.assign(**{c: k[c].map(lambda v: f"{float(v):+.4f}") for c in ("inner", "test")},
                         se=k["se"].map(lambda v: f"{float(v):.4f}"))
        print(markdown(shown))
        if len(cf):
            t = cf["test"].to_numpy(dtype=float)
            print(f"\nCF routers: {len(t)} router-folds; on the test fold {int((t < 0).sum())} "
                  f"below the baseline, {int((t == 0).sum())} tied, {int((t > 0).sum())} above; "
                  f"mean {t.mean():+.4f}")


if __name__ == "__main__":
    main()
