"""The draws of a stochastic kernel are one object that the layer holds for a
step and passes as ``draws=``: nothing of one forward pass, graph or layer
reaches another through the kernel, and the deprecated ways of setting the
draw state on the kernel (``prepare``, ``select_draw``, ``fixed_summary``)
still give the same numbers."""
import pytest
import torch

from ikgat import IKGATConv, IKTransformerConv
from ikgat.kernels import ImplicitSpectralKernel, Kernel, RBFKernel
from ikgat.kernels.anchor import scaled_anchor_dot
from ikgat.kernels.base import ENTRY_POINTS
from ikgat.kernels.draws import Draws
from ikgat.ops.runtime import triton_usable
from tests.helpers import random_graph

H, C, R = 2, 3, 8


def kernel_and_graphs(pairing='anchor'):
    torch.manual_seed(0)
    kernel = ImplicitSpectralKernel(H, C, num_spectral_points=R,
                                    pairing=pairing).double()
    with torch.no_grad():  # a density that depends on the summary
        kernel.encoder_readout.weight.normal_(
            0, 0.3 * kernel.encoder_readout.in_features)
    first = torch.randn(7, H, C, dtype=torch.double)
    second = 3 * torch.randn(5, H, C, dtype=torch.double) + 1
    return kernel, first, second


def test_draws_are_immutable_and_select_one_draw():
    kernel, nodes, _ = kernel_and_graphs()
    draws = kernel.draw(nodes, nodes, sample=True, num_draws=3)
    assert isinstance(draws, Draws) and kernel.last_draws is draws
    assert (draws.num_draws, draws.num_graphs) == (3, 1)
    assert draws.points.size(1) == 3 * H
    for index in range(3):
        one = draws.select(index)
        assert torch.equal(one.points,
                           draws.stacked[:, index * H:(index + 1) * H])
        assert torch.equal(one.stacked, draws.stacked)
        assert one.select(0).points.size(1) == H
    assert draws.points.size(1) == 3 * H  # unchanged by select
    with pytest.raises(IndexError, match='out of range'):
        draws.select(3)
    # A deterministic kernel draws nothing:
    assert RBFKernel(H, C).draw(nodes, nodes, sample=True) is None


def test_the_similarities_depend_only_on_the_draws_passed():
    kernel, first, second = kernel_and_graphs()
    anchor = torch.randn(H, 2 * C, dtype=torch.double)
    slopes = torch.tensor([1.0, 0.2], dtype=torch.double)
    generator = torch.Generator().manual_seed(1)
    draws = kernel.draw(first, first, sample=True, num_draws=2,
                        generator=generator)
    one = draws.select(1)
    wide = first.repeat(1, 2, 1)  # the projections of both draws' heads
    before = [kernel.node_log_similarities(wide, wide, anchor.repeat(2, 1),
                                           slopes, False, draws=draws),
              kernel.node_log_similarities(first, first, anchor, slopes,
                                           False, draws=one),
              kernel.log_similarity(first, anchor, True, slopes, draws=one),
              kernel.similarity(first.repeat(1, 1, 2), first.repeat(1, 1, 2),
                                draws=one),
              kernel.kl_divergence(draws)]
    # Another graph drawn in between (another layer sharing the kernel,
    # the next forward pass) changes nothing of these draws:
    other = kernel.draw(second, second, sample=True, generator=generator)
    assert kernel.last_draws is other
    after = [kernel.node_log_similarities(wide, wide, anchor.repeat(2, 1),
                                          slopes, False, draws=draws),
             kernel.node_log_similarities(first, first, anchor, slopes,
                                          False, draws=one),
             kernel.log_similarity(first, anchor, True, slopes, draws=one),
             kernel.similarity(first.repeat(1, 1, 2), first.repeat(1, 1, 2),
                               draws=one),
             kernel.kl_divergence(draws)]
    for a, b in zip(before, after):
        a, b = (a, b) if isinstance(a, torch.Tensor) else (
            torch.cat(a, -1), torch.cat(b, -1))
        assert torch.equal(a, b)
    # ... while the other draws give other values:
    assert not torch.equal(
        kernel.log_similarity(first, anchor, True, slopes, draws=other),
        before[2])
    assert not torch.equal(kernel.kl_divergence(other), before[-1])


def test_the_vector_pairing_depends_only_on_the_draws_passed():
    kernel, first, second = kernel_and_graphs('vectors')
    src = torch.tensor([0, 1, 2, 3, 4, 5, 6, 0])
    dst = torch.tensor([0, 0, 1, 2, 3, 4, 5, 6])
    draws = kernel.draw(first, first, sample=True, num_draws=2)
    edges = kernel.edge_log_similarity(first, first, src, dst,
                                       draws=draws.select(0))
    tables = kernel.pair_feature_map(first, first, draws=draws.select(1))
    kernel.draw(second, second, sample=True)
    assert torch.equal(kernel.edge_log_similarity(
        first, first, src, dst, draws=draws.select(0)), edges)
    again = kernel.pair_feature_map(first, first, draws=draws)
    # The pair feature map takes every draw, whichever is selected:
    assert all(torch.equal(a, b) for a, b in zip(tables[:2], again[:2]))
    assert torch.equal(tables.points, again.points)


def interfering(kernel, name, graph):
    r"""Wrap the kernel's entry point :obj:`name` so that each call first
    draws from another graph, as a second layer sharing the kernel would
    (with its own generator, so the layer's random numbers are the same)."""
    entry_point = getattr(kernel, name)
    generator = torch.Generator().manual_seed(5)

    def call(*args, **kwargs):
        kernel.draw(graph, graph, sample=True, num_draws=2,
                    generator=generator)
        return entry_point(*args, **kwargs)
    return call


FUSED = [False] + (['always'] if triton_usable() else [])


@pytest.mark.parametrize('fused', FUSED)
@pytest.mark.parametrize('training', [False, True])
def test_a_gat_layer_takes_no_draws_from_another_layer(fused, training):
    x, edge_index = random_graph(12, 40, 5, seed=2)
    torch.manual_seed(3)
    conv = IKGATConv(5, C, heads=H, kernel='implicit',
                     num_spectral_points=R, dropout=0.0,
                     kernel_kwargs={'num_samples': 3}).train(training)
    conv.fused_attention = fused
    torch.manual_seed(4)
    expected = conv(x, edge_index)
    other = torch.randn(9, H, C)
    conv.kernel.node_log_similarities = interfering(
        conv.kernel, 'node_log_similarities', other)
    torch.manual_seed(4)
    assert torch.equal(conv(x, edge_index), expected)


@pytest.mark.parametrize('training', [False, True])
def test_a_transformer_layer_takes_no_draws_from_another_layer(training):
    x, edge_index = random_graph(12, 40, 5, seed=2)
    torch.manual_seed(3)
    conv = IKTransformerConv(5, C, heads=H, kernel='implicit',
                             num_spectral_points=R,
                             kernel_kwargs={'num_samples': 3}
                             ).train(training)
    conv.fused_attention = False
    torch.manual_seed(4)
    expected = conv(x, edge_index)
    other = torch.randn(9, H, C)
    conv.kernel.edge_log_similarity = interfering(
        conv.kernel, 'edge_log_similarity', other)
    torch.manual_seed(4)
    assert torch.equal(conv(x, edge_index), expected)


def test_two_layers_sharing_a_kernel_keep_their_own_summary():
    x, edge_index = random_graph(12, 40, 5, seed=6)
    torch.manual_seed(3)
    first = IKGATConv(5, C, heads=H, kernel='implicit',
                      num_spectral_points=R).eval()
    second = IKGATConv(5, C, heads=H, kernel=first.kernel).eval()
    with torch.no_grad():
        first.kernel.encoder_readout.weight.normal_(
            0, 0.3 * first.kernel.encoder_readout.in_features)
    alone = second(x, edge_index)
    full = 10 * torch.randn(30, 5)
    with first.full_graph_summary(full):
        summarised = first(x, edge_index)
        # The first layer's full-graph summary is not the second's:
        assert torch.equal(second(x, edge_index), alone)
        assert first.kernel.last_draws.summary.shape == (1, H, 2 * C)
    assert not torch.equal(summarised, first(x, edge_index))
    assert first._full_summary is None


def test_deprecated_prepare_and_select_draw_give_the_same_numbers():
    kernel, first, _ = kernel_and_graphs()
    anchor = torch.randn(H, 2 * C, dtype=torch.double)
    slopes = torch.tensor([1.0, 0.2], dtype=torch.double)
    draws = kernel.draw(first, first, sample=True, num_draws=2,
                        generator=torch.Generator().manual_seed(1))
    with pytest.warns(DeprecationWarning, match='prepare is deprecated'):
        kernel.prepare(first, first, None, None, 1, True,
                       torch.Generator().manual_seed(1), num_draws=2)
    assert torch.equal(kernel.last_draws.stacked, draws.stacked)
    with pytest.warns(DeprecationWarning, match='select_draw is deprecated'):
        kernel.select_draw(1)
    # The entry points without draws= evaluate at the kernel's last draws:
    assert torch.equal(
        kernel.log_similarity(first, anchor, False, slopes),
        kernel.log_similarity(first, anchor, False, slopes,
                              draws=draws.select(1)))
    assert torch.equal(kernel.spectral_points()[0],
                       draws.select(1).spectral_points()[0])
    assert torch.equal(kernel.kl_divergence(), kernel.kl_divergence(draws))
    with pytest.warns(DeprecationWarning, match='prepare is deprecated'):
        RBFKernel(H, C).prepare(first, first, None, None, 1, False)


def test_deprecated_fixed_summary_is_the_summary_of_draw():
    kernel, first, second = kernel_and_graphs()
    summary = torch.randn(1, H, 2 * C, dtype=torch.double)
    expected = kernel.draw(first, first, summary=summary)
    with pytest.warns(DeprecationWarning, match='fixed_summary'):
        kernel.fixed_summary = summary
    with pytest.warns(DeprecationWarning, match='fixed_summary'):
        assert kernel.fixed_summary is summary
    assert torch.equal(kernel.draw(second, second).stacked, expected.stacked)
    with pytest.warns(DeprecationWarning, match='fixed_summary'):
        kernel.fixed_summary = None
    assert not torch.equal(kernel.draw(second, second).stacked,
                           expected.stacked)


def test_a_kernel_written_without_draws_still_works_with_a_warning():
    with pytest.warns(DeprecationWarning, match='takes no draws='):
        class OldKernel(Kernel):
            def similarity(self, x, y):
                return torch.sigmoid((x * y).sum(-1))

            def log_similarity(self, x, anchor, side, slopes):
                return torch.nn.functional.logsigmoid(
                    scaled_anchor_dot(x, anchor, side, slopes))

    x, edge_index = random_graph(8, 20, 4, seed=1)
    conv = IKGATConv(4, C, heads=H, kernel=OldKernel(H, C))
    assert conv(x, edge_index).shape == (8, H * C)
    with pytest.raises(TypeError, match='takes no draws'):
        conv.kernel.similarity(x, x, draws=object())


def test_every_entry_point_takes_draws():
    import inspect

    from ikgat.kernels import KERNELS
    for kernel_class in KERNELS.values():
        for name in ENTRY_POINTS:
            parameter = inspect.signature(getattr(
                kernel_class, name)).parameters.get('draws')
            assert parameter is not None, (kernel_class.__name__, name)
            assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
            assert parameter.default is None
