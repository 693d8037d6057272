"""How far "3x today's texts per CPU second" is from this CPU's arithmetic limits.

Issue 14 asks for an encoder at least 3x faster than today's sentence-transformers path with
the same vectors (cosine >= 0.99). On one thread a MiniLM call is mostly matrix products, so
its speed is bounded by the core's matrix-product rate. This script measures, in one run:

* ``st``: today's encoder (``SentenceTransformerEncoder``, batches of 64 in corpus order, one
  PyTorch thread) on ``--n`` texts of a set (the sets of ``bench_encode.py``), in texts per
  CPU second;
* the matrix-product work per text: every product of the packaged model's forward pass
  (the q/k/v, output and feed-forward projections, and attention's two products), counted
  from its ``config.json`` and each text's word pieces (at most 256, the model's cap):
  2 x rows x inner x columns floating-point operations per product;
* two ceilings on one thread: float32 products (``torch`` on the model's own shapes) and
  ONNX Runtime's 8-bit products (``MatMulInteger``, unsigned activations times the weight type
  ``--int8-weights`` picks, as the ``minilm:int8`` encoder uses them).

Printed: today's effective rate (its product work / its CPU time), the rate a 3x encoder
would need, and that rate as a multiple of each ceiling. A multiple above 1 means that even
an encoder doing nothing but products, all at the ceiling's rate, could not reach 3x with the
same number of word pieces: only less work per text (fewer word pieces, which changes the
vectors) or faster arithmetic (bfloat16 with AMX or AVX512-BF16, 8-bit with VNNI) could.

Usage::

    python benchmarks/encode_ceiling.py --seed 2 --n 96 --sets rb,mc
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.bench_checks import name_list, positive_int  # noqa: E402


def product_flops(tokens: np.ndarray, config: dict, cap: int = 256) -> np.ndarray:
    """Floating-point operations of a text's matrix products, per text.

    Per layer, for ``n`` word pieces, hidden size ``h`` and feed-forward size ``f``:
    ``2 n h (3h) + 2 n h h + 2 (2 n h f)`` for the projections and ``2 (2 n n h)`` for
    attention's ``Q K^T`` and ``P V`` (all heads together), times the layer count.

    Example
    -------
    >>> cfg = {"hidden_size": 2, "intermediate_size": 4, "num_hidden_layers": 1}
    >>> int(product_flops(np.array([3]), cfg)[0])   # 72 + 24 + 96 + 72
    264
    """
    n = np.minimum(np.asarray(tokens, dtype=np.float64), cap)
    h, f = config["hidden_size"], config["intermediate_size"]
    per_layer = 2 * n * h * 3 * h + 2 * n * h * h + 2 * (2 * n * h * f) + 2 * (2 * n * n * h)
    return per_layer * config["num_hidden_layers"]


def _rate(fn, flops: float, seconds: float = 2.0) -> float:
    """Operations per CPU second of ``fn`` (one call does ``flops``), after a warm-up."""
    for _ in range(3):
        fn()
    t0, calls = time.process_time(), 0
    while time.process_time() - t0 < seconds:
        fn()
        calls += 1
    return flops * calls / (time.process_time() - t0)


def fp32_rates(shapes) -> list[float]:
    """Float32 product rate (FLOP per CPU second, one thread) of each of ``shapes``."""
    import torch
    rates = []
    for n, k, m in shapes:
        a, b = torch.randn(n, k), torch.randn(k, m)
        rates.append(_rate(lambda: a @ b, 2.0 * n * k * m))
    return rates


def int8_rates(shapes, weights: str) -> list[float]:
    """ONNX Runtime ``MatMulInteger`` rate (operations per CPU second, one thread) of each of
    ``shapes``; uint8 activations times int8 (``s8``) or uint8 (``u8``) weights."""
    import onnxruntime as ort
    from onnx import TensorProto, helper
    rng = np.random.default_rng(0)
    rates = []
    for n, k, m in shapes:
        w = (rng.integers(-100, 100, (k, m)).astype(np.int8) if weights == "s8"
             else rng.integers(0, 255, (k, m)).astype(np.uint8))
        w_type = TensorProto.INT8 if weights == "s8" else TensorProto.UINT8
        graph = helper.make_graph(
            [helper.make_node("MatMulInteger", ["A", "W"], ["Y"])], "product",
            [helper.make_tensor_value_info("A", TensorProto.UINT8, [n, k])],
            [helper.make_tensor_value_info("Y", TensorProto.INT32, [n, m])],
            [helper.make_tensor("W", w_type, [k, m], w.tobytes(), raw=True)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        a = rng.integers(0, 255, (n, k)).astype(np.uint8)
        rates.append(_rate(lambda: sess.run(None, {"A": a}), 2.0 * n * k * m))
    return rates


def ceiling(rates) -> float:
    """The ceiling of a kind of product: the *fastest* rate measured on the model's shapes.

    Every product of the forward pass is taken to run at the best rate any of its shapes
    reached, so the ceiling is generous (the slowest shape, or the work-weighted mean, would
    give a lower one) and a multiple above 1 against it holds a fortiori.

    Example
    -------
    >>> ceiling([64.9e9, 83.5e9, 77.0e9]) / 1e9
    83.5
    """
    return max(rates)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0, help="seed of the text sample")
    ap.add_argument("--n", type=positive_int, default=96, help="texts per set")
    ap.add_argument("--sets", type=name_list(lambda: ("rb", "mc"), "text set"), default="rb,mc",
                    help="comma list of rb, mc (as bench_encode.py)")
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--int8-weights", choices=("auto", "s8", "u8"), default="auto",
                    help="weights of the 8-bit ceiling: auto (what minilm:int8 uses here)")
    args = ap.parse_args(argv)

    import torch
    torch.set_num_threads(1)
    from bench_encode import _encoder, _texts, _timed, _token_counts

    from recsys_router.encoders.onnx_minilm import int8_weight_type, minilm_model_dir
    config = json.loads((minilm_model_dir() / "config.json").read_text(encoding="utf-8"))
    weights = int8_weight_type() if args.int8_weights == "auto" else args.int8_weights
    h, f = config["hidden_size"], config["intermediate_size"]
    shapes = [(2048, h, 3 * h), (2048, h, h), (2048, h, f), (2048, f, h)]   # 8 texts x 256
    fp32_all, int8_all = fp32_rates(shapes), int8_rates(shapes, weights)
    fp32, int8 = ceiling(fp32_all), ceiling(int8_all)
    print(f"`python benchmarks/encode_ceiling.py --seed {args.seed} --n {args.n} --sets "
          f"{','.join(args.sets)} --int8-weights {args.int8_weights}` (one thread; 8-bit weights "
          f"{weights})\n")
    print(f"ceilings: float32 products {fp32 / 1e9:.1f} GFLOP/s, ONNX Runtime 8-bit products "
          f"{int8 / 1e9:.1f} GOP/s (the fastest of the model's four projection shapes, 2,048 "
          f"rows; the slowest: {min(fp32_all) / 1e9:.1f} and {min(int8_all) / 1e9:.1f})\n")
    print("| set | st texts/cpu-s | product GFLOP per text | st GFLOP/s | 3x needs GFLOP/s "
          "| x float32 ceiling | x 8-bit ceiling |")
    print("|---|---|---|---|---|---|---|")
    for which in args.sets:
        texts = _texts(which, args.n, args.seed, args.data_dir)
        rate, _ = _timed(_encoder("st", {"unsorted": True}, "cpu"), texts, 1, "cpu")
        per_text = float(product_flops(_token_counts(texts), config).mean())
        need = 3 * rate * per_text
        print(f"| {which} | {rate:.1f} | {per_text / 1e9:.2f} | {rate * per_text / 1e9:.1f} | "
              f"{need / 1e9:.1f} | {need / fp32:.2f} | {need / int8:.2f} |", flush=True)


if __name__ == "__main__":
    main()
