"""BitDropout: the graph router's dropout with 16-bit uniforms. Its drop share, scaling,
gradient, seeding and shapes are checked against what inverted dropout must do."""

from __future__ import annotations

import pytest
import torch

from recsys_router.models.components.bit_dropout import BitDropout


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_drop_share_and_scale(p):
    torch.manual_seed(0)
    n = 1_000_003                       # not a multiple of 4: the last word is cut
    x = torch.full((n,), 2.0)
    y = BitDropout(p).train()(x)
    dropped = (y == 0).double().mean().item()
    sd = (p * (1 - p) / n) ** 0.5
    assert abs(dropped - p) < 5 * sd + 1 / 65536
    cut = round(p * 65536)
    kept = y[y != 0]
    torch.testing.assert_close(kept, torch.full_like(kept, 2.0 * 65536 / (65536 - cut)))


def test_the_sixteen_bit_levels_are_uniform():
    # p = 1/16: cut 4096 of 65536 levels; the share over 4M draws is 0.0625 within 5 sd
    torch.manual_seed(1)
    y = BitDropout(1 / 16).train()(torch.ones(4_000_000))
    share = (y == 0).double().mean().item()
    assert abs(share - 0.0625) < 5 * (0.0625 * 0.9375 / 4_000_000) ** 0.5


def test_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(2)
    x = torch.randn(37, 5, requires_grad=True)
    layer = BitDropout(0.3).train()
    y = layer(x)
    (g,) = torch.autograd.grad(y.sum(), [x])
    mask = (y != 0).to(x.dtype)
    torch.testing.assert_close(g, mask * layer._scale)
    torch.testing.assert_close(y, x.detach() * mask * layer._scale)
    assert y.shape == x.shape


def test_eval_zero_p_and_empty_inputs_pass_through_and_seed_fixes_the_mask():
    x = torch.randn(10, 3)
    assert BitDropout(0.5).eval()(x) is x
    assert BitDropout(0.0).train()(x) is x
    assert BitDropout(0.5).train()(torch.zeros(0, 4)).shape == (0, 4)
    torch.manual_seed(5)
    a = BitDropout(0.5).train()(torch.ones(1000))
    torch.manual_seed(5)
    b = BitDropout(0.5).train()(torch.ones(1000))
    assert torch.equal(a, b) and not torch.equal(a, BitDropout(0.5).train()(torch.ones(1000)))


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_bad_probability_is_refused(p):
    with pytest.raises(ValueError, match=r"dropout probability must be in \[0, 1\)"):
        BitDropout(p)


def test_the_graph_network_uses_it_and_loads_networks_saved_with_torch_dropout():
    from torch import nn

    from recsys_router.models.components.gnn import HeteroRouterGNN
    net = HeteroRouterGNN({"query": 4, "task": 2, "llm": 3}, hidden=8, dropout=0.2)
    assert isinstance(net.dropout, BitDropout) and net.dropout.p == 0.2
    old = HeteroRouterGNN({"query": 4, "task": 2, "llm": 3}, hidden=8, dropout=0.2)
    old.dropout = nn.Dropout(0.2)          # what saved networks were built with
    net.load_state_dict(old.state_dict())  # dropout holds no state: the same keys
