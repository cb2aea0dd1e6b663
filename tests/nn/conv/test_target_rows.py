"""On CPU, IKGATConv computes the kernel's target terms only for the rows
that edges other than self-loops point to (a neighbour-sampled subgraph's
last hop is sources only): the outputs and gradients equal those of every
row."""
import pytest
import torch

import ikgat.nn.conv.ikgat_conv as ikgat_conv
from ikgat import IKGATConv, MIKANConv


def subgraph():
    # 12 nodes; edges point into nodes 0-4 only, as in a 2-hop sample
    # listed hop by hop.
    torch.manual_seed(0)
    src = torch.randint(0, 12, (40, ))
    dst = torch.randint(0, 5, (40, ))
    return torch.randn(12, 6), torch.stack([src, dst])


@pytest.mark.parametrize('make', [
    lambda: IKGATConv(6, 4, heads=2, kernel='direct'),
    # rbf with p = 3: with p = 2 the layer takes GATConv's gates alone.
    lambda: IKGATConv(6, 4, heads=2, kernel='rbf', p=3.0),
    lambda: IKGATConv(6, 4, heads=2, kernel='implicit'),
    lambda: MIKANConv(6, 4, heads=2),
], ids=['direct', 'rbf', 'implicit', 'mikan'])
def test_target_terms_only_for_targets_give_the_same_outputs(
        make, monkeypatch):
    x, edge_index = subgraph()
    conv = make()
    rows = []
    node_log_similarities = conv.kernel.node_log_similarities

    def spy(x_dst, *args, **kwargs):
        rows.append(x_dst.size(0))
        return node_log_similarities(x_dst, *args, **kwargs)

    monkeypatch.setattr(conv.kernel, 'node_log_similarities', spy)
    outputs = []
    for prefix in (True, False):
        if not prefix:
            monkeypatch.setattr(ikgat_conv, '_targets_in_use',
                                lambda *args: None)
        torch.manual_seed(1)
        x_in = x.clone().requires_grad_()
        out = conv(x_in, edge_index)
        out.square().sum().backward()
        outputs.append((out, x_in.grad))
    assert rows == [5, 12]
    torch.testing.assert_close(outputs[0][0], outputs[1][0])
    torch.testing.assert_close(outputs[0][1], outputs[1][1])


def test_every_row_without_an_edge_list_on_cpu():
    x, edge_index = subgraph()
    assert ikgat_conv._targets_in_use(edge_index, x, None) == 5
    assert ikgat_conv._targets_in_use(edge_index, None, None) is None
    assert ikgat_conv._targets_in_use(edge_index.to('meta'), x, None) is None
    assert ikgat_conv._targets_in_use(edge_index[:, :0], x, None) is None
    # Self-loops do not count: a softmax over one edge is 1.
    loops = torch.arange(12).repeat(2, 1)
    with_loops = torch.cat([edge_index, loops], dim=1)
    assert ikgat_conv._targets_in_use(with_loops, x, None) == 5
    assert ikgat_conv._targets_in_use(loops, x, None) == 1
