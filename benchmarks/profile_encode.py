"""Where a ``minilm:bf16`` model call's time goes, operation by operation.

For each ``--shapes`` entry (rows x padded length: one model call of
:class:`~recsys_router.encoders.bf16_minilm.Bf16MiniLMEncoder`, e.g. ``8x256`` for RouterBench
prompts, which nearly all reach the 256-token cap) this times the encoder's own forward pass
split into its operations, on random word-piece ids (the cost depends on the shape only) with
the last quarter of the first row padded. The split forward is checked against the encoder's
``hidden`` before anything is timed (the same operations in the same order: equal outputs).

Besides each operation's share of the call it prints reference rates measured in the same
run, so a reader can tell arithmetic from overhead:

* the feed-forward products' GFLOP/s in bfloat16 (from their times in the forward pass) and
  the same products in float32 (``F.linear``): their ratio is what bfloat16 buys on this CPU
  (much with AMX, a few times without);
* a rough floor for attention: the float32 softmax over the scores each layer must
  exponentiate (rows x 12 heads x length x length; all at once or one row's heads at a time,
  whichever is faster) plus its two products (Q K^T and P V) at the feed-forward's bfloat16
  rate; and how much faster the whole call would be with attention at that floor.

Times are medians over ``--repeats`` calls on one thread, in milliseconds per model call
(all six layers).

Usage::

    python benchmarks/profile_encode.py --seed 0 --shapes 8x256,16x128,32x64
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (run as a script, its own folder is first on sys.path: the benchmarks' median timer)
from bench_graph_route import median_ms  # noqa: E402

_OPS = ("embed + first norm", "qkv product", "attention (SDPA)", "output product",
        "residual + norm 1", "ffn in + GELU", "ffn out", "residual + norm 2")
_ATTN, _FFN_IN, _FFN_OUT = _OPS[2], _OPS[5], _OPS[6]


def _shapes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        try:
            rows, length = (int(x) for x in part.lower().split("x"))
        except ValueError:
            raise SystemExit(f"--shapes: {part!r} is not ROWSxLENGTH (e.g. 8x256)") from None
        if not (1 <= rows <= 512 and 8 <= length <= 512):
            raise SystemExit(f"--shapes: {part!r} needs 1 <= rows <= 512, 8 <= length <= 512")
        out.append((rows, length))
    return out


def _split_forward(model, ids, mask, clock: dict | None):
    """``model.hidden(ids, mask)`` with each operation's time added to ``clock[op]``."""
    import torch
    import torch.nn.functional as F
    from recsys_router.encoders import bf16_minilm as m
    bf = torch.bfloat16
    t = time.perf_counter()

    def lap(op: str) -> None:
        nonlocal t
        if clock is not None:
            now = time.perf_counter()
            clock[op] += now - t
            t = now

    B, L = ids.shape
    x = model.word[ids] + model.pos[:L] + model.typ
    x = F.layer_norm(x, (m._HIDDEN,), *model.ln0, eps=1e-12).to(bf)
    bias = torch.zeros(B, 1, 1, L, dtype=bf)
    bias.masked_fill_(~mask.bool()[:, None, None, :], float("-inf"))
    d = m._HIDDEN // m._HEADS
    lap(_OPS[0])
    for p in model.layers:
        q, k, v = model._linear(x, p["qkv"]).view(B, L, 3, m._HEADS, d).permute(2, 0, 3, 1, 4)
        lap(_OPS[1])
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        lap(_OPS[2])
        h = model._linear(ctx.transpose(1, 2).reshape(B, L, m._HIDDEN), p["o"])
        lap(_OPS[3])
        x = F.layer_norm(h + x, (m._HIDDEN,), *p["ln1"], eps=1e-12)
        lap(_OPS[4])
        h = model._linear(x, p["ffn_in"], gelu=True)
        lap(_OPS[5])
        h = model._linear(h, p["ffn_out"])
        lap(_OPS[6])
        x = F.layer_norm(h + x, (m._HIDDEN,), *p["ln2"], eps=1e-12)
        lap(_OPS[7])
    return x.float()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shapes", default="8x256,16x128,32x64",
                    help="comma list of ROWSxLENGTH model calls (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args(argv)
    if not 1 <= args.repeats <= 1000:
        raise SystemExit(f"--repeats must be in [1, 1000], got {args.repeats}")
    shapes = _shapes(args.shapes)
    import torch
    import torch.nn.functional as F
    from recsys_router.encoders import bf16_minilm as m
    torch.set_num_threads(1)
    ok, why = m.bf16_support()
    model = m._model(packed=ok)
    cpu = getattr(torch, "cpu", None)
    has = [name for name, probe in (("AMX-BF16", "_is_amx_tile_supported"),
                                    ("AVX512-BF16", "_is_avx512_bf16_supported"))
           if getattr(cpu, probe, lambda: False)()]
    kind = ", ".join(has) if ok else f"emulated ({why})"
    print(f"bfloat16 products: {kind}; 1 thread; median of {args.repeats} calls; "
          f"ms per model call (6 layers)\n")
    print("| shape | operation | ms | share |")
    print("|---|---|---|---|")
    notes = []
    gen = torch.Generator().manual_seed(args.seed)
    for rows, length in shapes:
        ids = torch.randint(1000, m._VOCAB, (rows, length), generator=gen)
        mask = torch.ones(rows, length, dtype=torch.long)
        mask[0, length - length // 4:] = 0
        with torch.inference_mode():
            a, b = _split_forward(model, ids, mask, None), model.hidden(ids, mask)
            if not torch.equal(a, b):
                raise SystemExit(f"{rows}x{length}: the split forward differs from hidden() by "
                                 f"{float((a - b).abs().max()):.3g}; update this script")
            per_run = []
            for _ in range(args.repeats):
                clock = dict.fromkeys(_OPS, 0.0)
                _split_forward(model, ids, mask, clock)
                per_run.append(clock)
            med = {op: 1e3 * statistics.median(c[op] for c in per_run) for op in _OPS}
            total = sum(med.values())
            for op in _OPS:
                print(f"| {rows}x{length} | {op} | {med[op]:.2f} | {med[op] / total:.0%} |")
            print(f"| {rows}x{length} | **all** | {total:.2f} | 100% |")
            # reference rates: the feed-forward products in bfloat16 (as timed in the forward
            # pass above, per layer) and the same products in float32
            w_in, w_out = (torch.randn(m._FFN, m._HIDDEN, generator=gen),
                           torch.randn(m._HIDDEN, m._FFN, generator=gen))
            flop = 2 * 2 * rows * length * m._HIDDEN * m._FFN
            t_bf = (med[_FFN_IN] + med[_FFN_OUT]) / m._LAYERS
            xf = torch.randn(rows, length, m._HIDDEN, generator=gen)
            t_fp = median_ms(lambda: F.linear(F.gelu(F.linear(xf, w_in)), w_out), args.repeats)
            # softmax over all of a call's scores at once, or one row's heads at a time (which
            # stays in cache): the faster of the two
            scores = torch.randn(rows * m._HEADS, length, length, generator=gen)
            one = scores[:m._HEADS].clone()
            t_sm = min(median_ms(lambda: torch.softmax(scores, -1), args.repeats),
                       median_ms(lambda: [torch.softmax(one, -1) for _ in range(rows)],
                                  args.repeats))
        # attention's floor: its softmax, plus its two products (Q K^T, P V) at the
        # feed-forward's bfloat16 rate
        attn_flop = 2 * 2 * rows * m._HEADS * length * length * (m._HIDDEN // m._HEADS)
        floor = m._LAYERS * (t_sm + attn_flop / flop * t_bf)
        best = total - med[_ATTN] + floor
        notes.append(f"- {rows}x{length}: feed-forward products {flop / t_bf / 1e6:.0f} GFLOP/s "
                     f"in bfloat16, {flop / t_fp / 1e6:.0f} in float32 ({t_fp / t_bf:.1f}x); "
                     f"attention's floor (float32 softmax over its scores, {m._LAYERS * t_sm:.1f} "
                     f"ms, plus its products at that rate) {floor:.1f} ms of its "
                     f"{med[_ATTN]:.1f} ms; a call with attention at its floor: "
                     f"{best:.1f} ms ({total / best:.2f}x faster)")
    print("\n" + "\n".join(notes))


if __name__ == "__main__":
    main()
