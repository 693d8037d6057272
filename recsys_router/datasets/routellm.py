"""RouteLLM precomputed evaluations (Ong et al., 2024, "RouteLLM: Learning to Route LLMs
with Preference Data"; lm-sys/RouteLLM ``routellm/evals/``), a strong/weak LLM pair.

* ``mmlu/mmlu_<subject>.csv``: ``prompt`` and one boolean column per LLM (task = subject).
  Every row is one published eval item: identical prompt texts in different rows (105 in
  MMLU) stay separate queries, as in RouteLLM's own evaluation (14,042 x 2).
* ``gsm8k/gsm8k_responses.csv``: ``prompt``, one boolean column per LLM and
  ``<llm>_response`` columns (kept in ``data.responses`` with ``with_responses=True``).
* ``mt_bench/judgements.jsonl``: GPT-4 single-answer grades (1-10) per ``question_id``,
  ``model`` and ``turn``; ``mt_bench/question.jsonl`` gives ``category`` and ``turns``
  (texts). ``turns="mean"`` (default): one query per question, score = mean grade over its
  turns, text = first turn (80 x 2). ``turns="separate"``: one query per (question, turn),
  id ``"<question_id>-t<turn>"``, text = that turn's message. A grade of -1 (judge failure)
  is treated as missing (counted in ``meta["failed_judgements"]`` and logged); any other
  grade outside 1-10, or a missing one, is refused naming its line; two grades for the same (question, model, turn) raise unless
  ``duplicates`` says how to merge them.

``routellm`` with ``benchmark=None`` concatenates the three; there MT-Bench grades are
divided by 10 so every score lies in [0, 1] (``routellm_mtbench`` keeps raw 1-10 grades).
No costs are published.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..errors import DataValidationError
from ..numeric import shown, to_floats
from ._common import parse_size, read_csv, read_jsonl_lines, require_columns
from ._rows import CsvLines
from .registry import register

__all__ = ["load_routellm", "load_routellm_mmlu", "load_routellm_gsm8k", "load_routellm_mtbench",
           "detect_routellm"]

log = logging.getLogger(__name__)

_TRUE = {"true": 1.0, "false": 0.0, "1": 1.0, "0": 0.0, "1.0": 1.0, "0.0": 0.0}


def _bool_scores(df: pd.DataFrame, cols, source: Path) -> np.ndarray:
    out = np.empty((len(df), len(cols)), dtype=np.float64)
    for j, c in enumerate(cols):
        col = df[c]
        if col.dtype == bool:
            out[:, j] = col.to_numpy(dtype=np.float64)
            continue
        mapped = col.astype(str).str.strip().str.lower().map(_TRUE)
        bad = mapped.isna().to_numpy() & col.notna().to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataValidationError(f"value {col.iloc[i]!r} is not a boolean (True/False/1/0)",
                                      source=str(source), column=c,
                                      row=CsvLines(source).field_line(i, c))
        out[:, j] = mapped.to_numpy(dtype=np.float64)
    return out


def _llm_table(names) -> pd.DataFrame:
    return pd.DataFrame({"name": list(names), "size": [parse_size(n) for n in names]})


def _read_csv(path: Path) -> pd.DataFrame:
    df = read_csv(path)
    require_columns(df, ("prompt",), path)
    return df


def _sub(path: Path, name: str) -> Path:
    return path / name if (path / name).exists() else path


@register("routellm_mmlu", folder="routellm", detect=None,
          description="RouteLLM MMLU evals: GPT-4 vs Mixtral-8x7B correctness, 57 subjects")
def load_routellm_mmlu(path) -> RoutingData:
    """Load ``mmlu/mmlu_<subject>.csv`` files (``path`` = the routellm or the mmlu folder).

    Returns
    -------
    RoutingData
        14,042 x 2 on the published files; ``task`` = subject; ids ``mmlu/<subject>/<row>``.
    """
    folder = _sub(Path(path), "mmlu")
    files = sorted(folder.glob("mmlu_*.csv"))
    if not files:
        raise FileNotFoundError(f"{folder}: no mmlu_<subject>.csv files")
    blocks, queries, llms = [], [], None
    for f in files:
        df = _read_csv(f)
        cols = [c for c in df.columns if c != "prompt"]
        if llms is None:
            llms = cols
        elif cols != llms:
            raise DataValidationError(f"LLM columns {cols} differ from {llms} of {files[0].name}",
                                      source=str(f))
        blocks.append(_bool_scores(df, cols, f))
        subject = f.stem[len("mmlu_"):]
        queries.append(pd.DataFrame({"query_id": [f"mmlu/{subject}/{i}" for i in range(len(df))],
                                     "text": df["prompt"].to_numpy(), "task": subject}))
    q = pd.concat(queries, ignore_index=True)
    n_dup = int(q["text"].duplicated().sum())
    return RoutingData(q, _llm_table(llms), np.vstack(blocks), name="routellm_mmlu",
                       source=str(folder), meta={"repeated_prompt_texts": n_dup})


@register("routellm_gsm8k", folder="routellm",
          description="RouteLLM GSM8K evals: GPT-4 vs Mixtral-8x7B correctness with responses")
def load_routellm_gsm8k(path, with_responses: bool = False) -> RoutingData:
    """Load ``gsm8k/gsm8k_responses.csv`` (``path`` = routellm folder, gsm8k folder or file).

    Returns
    -------
    RoutingData
        1,319 x 2 on the published file; ids ``gsm8k/<row>``; ``data.responses`` when
        ``with_responses=True``.
    """
    path = Path(path)
    f = path if path.is_file() else _sub(path, "gsm8k") / "gsm8k_responses.csv"
    if not f.is_file():
        raise FileNotFoundError(f"{f}: no such file (RouteLLM gsm8k_responses.csv)")
    df = _read_csv(f)
    llms = [c for c in df.columns if c != "prompt" and f"{c}_response" in df.columns]
    if not llms:
        llms = [c for c in df.columns if c != "prompt" and not c.endswith("_response")]
    q = pd.DataFrame({"query_id": [f"gsm8k/{i}" for i in range(len(df))],
                      "text": df["prompt"].to_numpy(), "task": "gsm8k"})
    data = RoutingData(q, _llm_table(llms), _bool_scores(df, llms, f), name="routellm_gsm8k",
                       source=str(f))
    if with_responses:
        resp = pd.DataFrame({c: df[f"{c}_response"].to_numpy() if f"{c}_response" in df.columns
                             else None for c in llms}, dtype=object)
        resp.index = q["query_id"].to_numpy()
        data.responses = resp
    return data


@register("routellm_mtbench", folder="routellm",
          description="RouteLLM MT-Bench GPT-4 judge grades (1-10) for GPT-4 vs Mixtral-8x7B")
def load_routellm_mtbench(path, turns: str = "mean", duplicates: str = "error",
                          normalize: bool = False) -> RoutingData:
    """Load MT-Bench judgements (``path`` = routellm folder, mt_bench folder or the jsonl).

    Parameters
    ----------
    turns : {"mean", "separate"}
        Average the grades of a question's turns, or one query per turn (module notes).
    duplicates : {"error", "mean", "first", "last"}
        Repeated (question, model, turn) grades.
    normalize : bool
        Divide grades by 10.

    Returns
    -------
    RoutingData
        80 x 2 (``turns="mean"``) or 160 x 2 on the published files; task = category.
    """
    if turns not in ("mean", "separate"):
        raise ValueError(f"turns must be 'mean' or 'separate', got {turns!r}")
    path = Path(path)
    jf = path if path.is_file() else _sub(path, "mt_bench") / "judgements.jsonl"
    if not jf.is_file():
        raise FileNotFoundError(f"{jf}: no such file (RouteLLM mt_bench/judgements.jsonl)")
    j, lines = read_jsonl_lines(jf)
    require_columns(j, ("question_id", "model", "score", "turn"), jf, what="field")
    score = pd.Series(to_floats(j["score"]), index=j.index)
    _check_grades(j["score"], score.to_numpy(), jf, lines)
    for col in ("question_id", "model"):
        na = j[col].isna().to_numpy()
        if na.any():
            raise DataValidationError(f"missing {col}; expected a value on every judgement",
                                      source=str(jf), row=int(lines[np.flatnonzero(na)[0]]),
                                      column=col)
    turn = _turns(j["turn"], jf, lines)
    failed = (score == -1).to_numpy()  # the only grade outside 1-10 _check_grades lets through
    if failed.any():
        log.warning("%s: %d judgements with grade -1 (judge failure) treated as missing", jf,
                    int(failed.sum()))
    long = pd.DataFrame({"question_id": j["question_id"].astype(str), "turn": turn,
                         "model": j["model"].astype(str), "score": score, "row": lines})
    long = long[~failed & long["score"].notna().to_numpy()]
    if normalize:
        long["score"] = long["score"] / 10.0
    long["query_id"] = long["question_id"] + "-t" + long["turn"].astype(str)
    questions = None
    qf = jf.parent / "question.jsonl"
    if qf.is_file():
        questions = _questions(qf)
    line_of = long["row"].to_numpy()  # file line of each kept judgement
    data = RoutingData.from_long(long[["query_id", "model", "score"]].reset_index(drop=True),
                                 duplicates=duplicates, name="routellm_mtbench", source=str(jf),
                                 row_offset=lambda i: int(line_of[i]))
    tq = data.queries["query_id"].str.rsplit("-t", n=1, expand=True)
    qids, tnum = tq[0], tq[1].astype(int)
    if turns == "mean":
        S = pd.DataFrame(data.scores, index=qids.to_numpy()).groupby(level=0, sort=False).mean()
        qids_u = S.index.to_series()
        queries = pd.DataFrame({"query_id": qids_u.to_numpy()})
        turn_idx = np.zeros(len(queries), dtype=int)
        scores = S.to_numpy()
    else:
        queries = pd.DataFrame({"query_id": data.queries["query_id"].to_numpy(),
                                "question_id": qids.to_numpy(), "turn": tnum.to_numpy()})
        qids_u, turn_idx, scores = qids, tnum.to_numpy() - 1, data.scores
    queries["task"] = "mt_bench"
    if questions is not None:
        base = pd.Series(qids_u.to_numpy())
        if "category" in questions.columns:
            queries["task"] = base.map(questions["category"]).to_numpy()
        texts = base.map(questions["turns"]).to_numpy()
        queries["text"] = [t[k] if isinstance(t, list) and k < len(t) else None
                           for t, k in zip(texts, turn_idx)]
    return RoutingData(queries, _llm_table(data.llm_names), scores, name="routellm_mtbench",
                       source=str(jf), meta={"turns": turns, "normalized": normalize,
                                             "failed_judgements": int(failed.sum())})


def _check_grades(raw: pd.Series, grade: np.ndarray, source: Path, lines: np.ndarray) -> None:
    """Every MT-Bench grade a number in [1, 10] (GPT-4's single-answer scale; half points
    occur) or exactly -1 (FastChat's mark of a judge failure); anything else, a missing grade
    included, raises naming the file line.

    Example
    -------
    >>> raw = pd.Series([10, -1, 8.5, 42])
    >>> _check_grades(raw, raw.to_numpy(float), Path("j.jsonl"), np.array([1, 2, 3, 5]))
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: j.jsonl, row 5, column 'score': grade 42.0 is outside the MT-Bench scale; expected a number from 1 to 10, or -1 for a judge failure (1 such judgements)
    """
    isbool = raw.map(lambda v: isinstance(v, bool)).to_numpy(dtype=bool)
    with np.errstate(invalid="ignore"):
        bad = ~(((grade >= 1) & (grade <= 10)) | (grade == -1)) | isbool
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        v = raw.iloc[i]
        what = ("no grade" if v is None or (isinstance(v, float) and np.isnan(v))
                else f"grade {shown(v)} is not a number" if np.isnan(grade[i]) or isbool[i]
                else f"grade {shown(v)} is outside the MT-Bench scale")
        raise DataValidationError(f"{what}; expected a number from 1 to 10, or -1 for a judge "
                                  f"failure ({int(bad.sum())} such judgements)",
                                  source=str(source), row=int(lines[i]), column="score")


def _turns(raw: pd.Series, source: Path, lines: np.ndarray) -> np.ndarray:
    """The ``turn`` field as positive integers; anything else raises naming the line."""
    vals = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(vals) | (vals != np.floor(vals)) | (vals < 1) | (vals > 1000)
    bad |= raw.map(lambda v: isinstance(v, bool)).to_numpy(dtype=bool)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        v = raw.iloc[i]
        v = "missing turn" if v is None or (isinstance(v, float) and np.isnan(v)) else \
            f"turn {v.item() if isinstance(v, np.generic) else v!r}"
        raise DataValidationError(f"{v} is not a turn number (1, 2, ...)",
                                  source=str(source), row=int(lines[i]), column="turn")
    return vals.astype(np.int64)


def _questions(qf: Path) -> pd.DataFrame:
    """``question.jsonl`` indexed by question id; a question id given twice with different
    content raises naming both lines (an identical repeat is kept once, logged)."""
    questions, lines = read_jsonl_lines(qf)
    require_columns(questions, ("question_id", "turns"), qf, what="field")
    qid = questions["question_id"].astype(str)
    seen: dict[str, int] = {}
    repeats = 0
    for i, q in enumerate(qid.tolist()):
        if q not in seen:
            seen[q] = i
            continue
        first = seen[q]
        a, b = questions.iloc[first].to_dict(), questions.iloc[i].to_dict()
        if repr(a) != repr(b):
            raise DataValidationError(f"question_id {q} is given twice with different content "
                                      f"(lines {lines[first]} and {lines[i]}); expected one "
                                      f"record per question", source=str(qf), row=int(lines[i]),
                                      column="question_id")
        repeats += 1
    if repeats:
        log.warning("%s: %d repeated identical question records kept once", qf, repeats)
    keep = ~qid.duplicated().to_numpy()
    return questions.assign(question_id=qid)[keep].set_index("question_id")


def detect_routellm(path: Path) -> bool:
    path = Path(path)
    return path.is_dir() and ((path / "mmlu").is_dir() or (path / "mt_bench").is_dir()
                              or (path / "gsm8k").is_dir()) and not (path / "dcrouter_train.json").exists()


@register("routellm", folder="routellm", detect=detect_routellm,
          description="RouteLLM evals (MMLU + GSM8K + MT-Bench/10) for GPT-4 vs Mixtral-8x7B; "
                      "benchmark= picks one")
def load_routellm(path, benchmark: str | None = None, **options) -> RoutingData:
    """Load RouteLLM's evals; ``benchmark`` in {"mmlu", "gsm8k", "mt_bench"} or None (all).

    Options go to the chosen benchmark's loader. With ``benchmark=None`` the three are
    concatenated (MT-Bench grades / 10), the ``task`` column tells them apart.
    """
    loaders = {"mmlu": load_routellm_mmlu, "gsm8k": load_routellm_gsm8k,
               "mt_bench": load_routellm_mtbench, "mtbench": load_routellm_mtbench}
    if benchmark is not None:
        if benchmark not in loaders:
            raise ValueError(f"benchmark must be one of mmlu, gsm8k, mt_bench; got {benchmark!r}")
        return loaders[benchmark](path, **options)
    if options:
        raise ValueError(f"options {sorted(options)} need benchmark=mmlu|gsm8k|mt_bench")
    parts = [load_routellm_mmlu(path), load_routellm_gsm8k(path),
             load_routellm_mtbench(path, normalize=True)]
    parts[2].queries["query_id"] = "mt_bench/" + parts[2].queries["query_id"]
    parts[2].queries["task"] = "mt_bench/" + parts[2].queries["task"].astype(str)
    return RoutingData.concat(parts, name="routellm")
