"""Text-encoding throughput of MiniLM variants vs today's sentence-transformers path, one run.

On real query texts of the shared datasets (a seeded sample of ``--n`` texts per set):

* ``rb``: RouterBench prompts (``routerbench_zs``, long few-shot prompts);
* ``mc``: multiple-choice questions with their options (``routerdc``'s mmlu / arc / cmmlu /
  ceval rows).

Baseline (``st`` = "today"): ``SentenceTransformerEncoder`` in PyTorch, batches of 64 in
corpus order (sentence-transformers sorts only inside each batch). Each variant encodes the
same texts with the caches off; printed: texts/s, the ratio to the baseline's texts/s
measured in the same run, and the minimum / mean cosine of its vectors to the baseline's.
Every variant runs after a warm-up call (model load and ONNX export are not timed).

``--clock cpu`` times each variant by the CPU seconds of this process with one thread for
PyTorch and ONNX Runtime alike (texts per CPU second): on a machine shared with other jobs
this measures the work a variant needs, which wall time does not (it mostly measures the
load); ``--clock wall`` (default) uses wall time at each library's default threads.
Also printed per set: how many texts exceed 128 and 256 word pieces (the truncation
lengths), and per variant the 1st percentile of the cosines besides their min and mean.

Usage::

    python benchmarks/bench_encode.py --seed 0
    python benchmarks/bench_encode.py --seed 0 --n 64 --sets rb   # quicker
    python benchmarks/bench_encode.py --seed 0 --clock cpu        # load-independent ratios
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from recsys_router.cli.args import positive_int  # noqa: E402

#: name -> (kind, options); kind "st" = sentence-transformers (PyTorch), "onnx" = ONNX Runtime,
#: "bf16" = the package's bfloat16 PyTorch encoder
VARIANTS = {
    "st-sorted": ("st", {}),
    "onnx-fp32": ("onnx", {"variant": "fp32"}),
    "onnx-int8": ("onnx", {"variant": "int8"}),
    "onnx-int8-1thread": ("onnx", {"variant": "int8", "threads": 1}),
    "onnx-int8-len128": ("onnx", {"variant": "int8", "max_seq_length": 128}),
    "onnx-fp32-len128": ("onnx", {"variant": "fp32", "max_seq_length": 128}),
    "onnx-int8-batch1": ("onnx", {"variant": "int8", "batch_size": 1}),
    "onnx-int8-batch4": ("onnx", {"variant": "int8", "batch_size": 4}),
    "onnx-int8-batch8": ("onnx", {"variant": "int8", "batch_size": 8}),
    "onnx-int8-batch32": ("onnx", {"variant": "int8", "batch_size": 32}),
    "onnx-int8-batch128": ("onnx", {"variant": "int8", "batch_size": 128}),
    "onnx-fp32-batch1": ("onnx", {"variant": "fp32", "batch_size": 1}),
    # the package's bfloat16 encoder (minilm:bf16, the minilm default on CPUs with AMX-BF16 /
    # AVX512-BF16): prepacked oneDNN weights, bucketed lengths
    "bf16": ("bf16", {}),
    # the same with one model call at a time (what it ran before its parallel calls; under
    # --clock cpu the default is one worker anyway, since PyTorch gets one thread there)
    "bf16-1worker": ("bf16", {"workers": 1}),
    # sentence-transformers' model cast to bfloat16 (plain PyTorch: weights reordered on every
    # call, one padded length per batch); only a reference for the one above
    "st-bf16-batch8": ("st-bf16", {"batch_size": 8}),
    "st-bf16-batch32": ("st-bf16", {"batch_size": 32}),
}
_MC_TASKS = ("mmlu", "arc_challenge", "arc_easy", "cmmlu", "ceval")


def _texts(which: str, n: int, seed: int, data_dir: str) -> list[str]:
    from recsys_router.datasets.registry import load_dataset
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if which == "rb":
            data = load_dataset("routerbench_zs", data_dir=data_dir)
            texts = list(data.texts)
        elif which == "mc":
            data = load_dataset("routerdc", data_dir=data_dir)
            tasks = data.queries["task"].to_numpy()
            texts = [t for t, k in zip(data.texts, tasks) if k in _MC_TASKS]
        else:
            raise SystemExit(f"--sets: unknown set {which!r}; expected rb or mc")
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(texts), size=min(n, len(texts)), replace=False)
    return [texts[i] for i in pick]


class _Bf16MiniLM:
    """The packaged MiniLM through sentence-transformers with every weight in bfloat16."""

    def __init__(self, batch_size: int):
        import copy

        import torch

        from recsys_router.encoders import SentenceTransformerEncoder
        fp32 = SentenceTransformerEncoder("minilm", cache=False, device="cpu").model
        self.model = copy.deepcopy(fp32).to(torch.bfloat16)
        self.batch_size = batch_size

    def encode(self, texts, show_progress=False):
        v = self.model.encode(list(texts), batch_size=self.batch_size, show_progress_bar=False,
                              convert_to_numpy=True, normalize_embeddings=True)
        return np.asarray(v, dtype=np.float32)


def _encoder(kind: str, options: dict, clock: str):
    from recsys_router.encoders import (Bf16MiniLMEncoder, OnnxMiniLMEncoder,
                                        SentenceTransformerEncoder)
    if kind == "bf16":
        return Bf16MiniLMEncoder(cache=False, **options)
    if kind == "st-bf16":
        return _Bf16MiniLM(**options)
    if kind == "st":
        enc = SentenceTransformerEncoder("minilm", cache=False, device="cpu")
        if options.get("unsorted"):
            enc.sort_by_length = False
        return enc
    if clock == "cpu":
        options = {"threads": 1, **options}
    return OnnxMiniLMEncoder(cache=False, **options)


def _timed(enc, texts: list[str], repeats: int, clock: str) -> tuple[float, np.ndarray]:
    enc.encode(texts[:4])  # warm-up: load / export the model
    now = time.process_time if clock == "cpu" else time.perf_counter
    best, out = np.inf, None
    for _ in range(repeats):
        t0 = now()
        out = enc.encode(texts, show_progress=False)
        best = min(best, now() - t0)
    return len(texts) / best, out


def _token_counts(texts: list[str]) -> np.ndarray:
    """Word pieces per text (with [CLS] and [SEP]), untruncated."""
    from tokenizers import Tokenizer

    from recsys_router.encoders.onnx_minilm import minilm_model_dir
    tok = Tokenizer.from_file(str(minilm_model_dir() / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return np.array([len(e.ids) for e in tok.encode_batch(texts)])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0, help="seed of the text sample")
    ap.add_argument("--n", type=positive_int, default=192, help="texts per set")
    ap.add_argument("--sets", default="rb,mc", help="comma list of rb (RouterBench), mc "
                                                    "(multiple choice)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--repeats", type=positive_int, default=1, help="timed passes per variant (best)")
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall: wall time, default threads; cpu: CPU seconds, one thread each")
    ap.add_argument("--int8-weights", choices=("auto", "s8", "u8"), default="auto",
                    help="weights of the onnx-int8 variants: auto (this CPU's choice: int8 with "
                         "VNNI/AMX or off x86, else uint8), s8 (int8) or u8 (uint8)")
    args = ap.parse_args(argv)
    from recsys_router.encoders import onnx_minilm
    if args.int8_weights != "auto":
        os.environ[onnx_minilm.INT8_WEIGHTS_ENV] = args.int8_weights
    onnx_minilm.int8_weight_type.cache_clear()
    weights = onnx_minilm.int8_weight_type()
    import torch
    torch.manual_seed(args.seed)
    if args.clock == "cpu":
        torch.set_num_threads(1)
    names = [v for v in args.variants.split(",") if v]
    bad = [v for v in names if v not in VARIANTS]
    if bad:
        raise SystemExit(f"--variants: unknown {bad}; expected some of {list(VARIANTS)}")
    print(f"`python benchmarks/bench_encode.py --seed {args.seed} --n {args.n} --sets "
          f"{args.sets} --repeats {args.repeats} --clock {args.clock} --int8-weights "
          f"{args.int8_weights} --variants {','.join(names)}`  (torch threads: "
          f"{torch.get_num_threads()}; onnx-int8 weights: {weights})\n")
    unit = "texts/cpu-s" if args.clock == "cpu" else "texts/s"
    for which in [s for s in args.sets.split(",") if s]:
        texts = _texts(which, args.n, args.seed, args.data_dir)
        mean_chars = float(np.mean([len(t) for t in texts]))
        pieces = _token_counts(texts)
        base_rate, base = _timed(_encoder("st", {"unsorted": True}, args.clock), texts,
                                 args.repeats, args.clock)
        print(f"### {which}: {len(texts)} texts, mean {mean_chars:.0f} characters, "
              f"{np.mean(pieces > 128):.0%} over 128 word pieces, "
              f"{np.mean(pieces > 256):.0%} over 256\n")
        print(f"| variant | {unit} | x st | min cosine | 1st pct cosine | mean cosine |")
        print("|---|---|---|---|---|---|")
        print(f"| st (today) | {base_rate:.1f} | 1.00 | 1.0000 | 1.0000 | 1.0000 |")
        for name in names:
            kind, options = VARIANTS[name]
            rate, vec = _timed(_encoder(kind, options, args.clock), texts, args.repeats,
                               args.clock)
            cos = np.sum(vec * base, axis=1) / (np.linalg.norm(vec, axis=1)
                                                * np.linalg.norm(base, axis=1))
            print(f"| {name} | {rate:.1f} | {rate / base_rate:.2f} | {cos.min():.4f} | "
                  f"{np.percentile(cos, 1):.4f} | {cos.mean():.4f} |", flush=True)
        print()


if __name__ == "__main__":
    main()
