"""The contract every kernel of the registry runs (GPyTorch's shared kernel
test case, in pytest form): a kernel added to ``ikgat.kernels.KERNELS`` is
tested here without touching any other file, as the toy kernel shows."""
import re
from pathlib import Path

import pytest
import torch

from ikgat import IKGATConv
from ikgat.kernels import KERNELS, Kernel
from ikgat.kernels.anchor import pad_node_vectors, scaled_anchor_dot
from ikgat.reference import edge_wise_attention
from tests.helpers import random_graph

H, C, R = 3, 4, 16


def build(name, dtype=torch.double):
    """The kernel named ``name`` through the layer's resolution, ready to
    evaluate (a stochastic kernel has drawn from a graph summary)."""
    torch.manual_seed(0)
    conv = IKGATConv(5, C, heads=H, kernel=name, num_spectral_points=R)
    kernel = conv.kernel.to(dtype)
    if kernel.stochastic:
        nodes = torch.randn(5, H, C, dtype=dtype)
        # Kept as kernel.last_draws, where the entry points evaluate
        # without draws=:
        kernel.draw(nodes, nodes)
    return kernel


def check_kernel_contract(name):
    kernel = build(name)
    assert isinstance(kernel, Kernel)
    # similarity: (*, H, 2C) x (*, H, 2C) -> (*, H), non-negative:
    x = torch.randn(7, H, 2 * C, dtype=torch.double)
    y = torch.randn(7, H, 2 * C, dtype=torch.double)
    value = kernel.similarity(x, y)
    assert value.shape == (7, H) and (value >= 0).all()
    # log_similarity is the node-wise evaluation of log(sim + eps) against
    # the scaled anchors; reduced_log_similarity leaves out gamma |v|^2:
    nodes = torch.randn(9, H, C, dtype=torch.double)
    anchor = torch.randn(H, 2 * C, dtype=torch.double)
    slopes = torch.tensor([1.0, 0.2], dtype=torch.double)
    for side in (0, 1):
        fast = kernel.log_similarity(nodes, anchor, side, slopes)
        assert fast.shape == (9, H, 2)
        vectors = pad_node_vectors(nodes, side)
        for t, slope in enumerate(slopes):
            expected = (kernel.similarity(vectors, slope * anchor) +
                        kernel.eps).log()
            assert torch.allclose(fast[..., t], expected, atol=1e-10)
        reduced = kernel.reduced_log_similarity(nodes, anchor, side, slopes)
        gamma = kernel.node_norm_coefficient
        assert torch.allclose(
            reduced + gamma * (nodes * nodes).sum(-1, keepdim=True), fast,
            atol=1e-10)
    # node_log_similarities is both sides in one call, with the same values:
    targets = torch.randn(4, H, C, dtype=torch.double)
    for reduced_source in (False, True):
        source_side = (kernel.reduced_log_similarity if reduced_source else
                       kernel.log_similarity)
        pair = kernel.node_log_similarities(targets, nodes, anchor, slopes,
                                            reduced_source)
        assert torch.allclose(pair[0], kernel.reduced_log_similarity(
            targets, anchor, False, slopes), atol=1e-10)
        assert torch.allclose(pair[1], source_side(nodes, anchor, True,
                                                   slopes), atol=1e-10)
    # Declared capabilities hold:
    if kernel.has_spectral_points:
        sets = kernel.spectral_points_per_graph()
        assert sets and all(points.shape[1:] == (H, R, 2 * C)
                            for points in sets)
        assert kernel.num_spectral_points == R
        assert kernel.lengthscale > 0
    else:
        with pytest.raises(TypeError, match='no spectral points'):
            kernel.spectral_points_per_graph()
    if kernel.can_redraw:
        before = [p.clone() for p in kernel.spectral_points_per_graph()]
        kernel.redraw_spectral_points(torch.Generator().manual_seed(1))
        after = kernel.spectral_points_per_graph()
        assert not all(torch.equal(a, b) for a, b in zip(before, after))
    else:
        with pytest.raises(TypeError, match='redraw'):
            kernel.redraw_spectral_points()
    if kernel.has_kl:
        kl = kernel.kl_divergence()
        assert kl.dim() == 0 and torch.isfinite(kl)
    else:
        with pytest.raises(TypeError, match='no KL'):
            kernel.kl_divergence()
    if kernel.stochastic:
        assert kernel.num_samples >= 1
    # The layer built on it equals the edge-wise reference:
    torch.manual_seed(2)
    conv = IKGATConv(5, C, heads=H, kernel=name, num_spectral_points=R,
                     p=1.5).double().eval()
    features, edge_index = random_graph(12, 40, 5, seed=3)
    features = features.double()
    out, (edges, alpha) = conv(features, edge_index,
                               return_attention_weights=True)
    ref_out, ref_alpha = edge_wise_attention(conv, features, edges)
    assert torch.allclose(alpha, ref_alpha, atol=1e-9)
    assert torch.allclose(out, ref_out, atol=1e-9)


@pytest.mark.parametrize('name', sorted(KERNELS))
def test_kernel_contract(name):
    check_kernel_contract(name)


class ToyKernel(Kernel):
    r"""A throwaway kernel, :math:`\mathrm{sim}(x, y) = \sigma(x^\top y)`,
    defined in this test only."""
    def similarity(self, x, y, *, draws=None):
        return torch.sigmoid((x * y).sum(-1))

    def log_similarity(self, x, anchor, side, slopes, *, draws=None):
        return torch.nn.functional.logsigmoid(
            scaled_anchor_dot(x, anchor, side, slopes))


def test_a_new_kernel_takes_its_file_and_the_registry(monkeypatch):
    # The two places: the class above (its file) and one registry entry.
    monkeypatch.setitem(KERNELS, 'toy', ToyKernel)
    check_kernel_contract('toy')


def test_ikgatconv_docstring_lists_the_registry():
    entry = IKGATConv.__doc__.split('kernel (str or')[1].split(
        'num_spectral_points (int')[0]
    assert set(re.findall(r':obj:`"(\w+)"`', entry)) == set(KERNELS)


def test_docs_document_every_kernel():
    # The docs' kernel table (docs/kernels.md) is generated from the
    # registry, each row from the kernel's docstring: every kernel needs
    # its formula there.
    page = Path(__file__).parents[2] / 'docs' / 'kernels.md'
    assert '{kernel-table}' in page.read_text(encoding='utf-8')
    for name, kernel_class in KERNELS.items():
        doc = kernel_class.__doc__ or ''
        assert '.. math::' in doc or ':math:' in doc, (
            f'{name}: no formula in its docstring')
        assert doc.strip().split('\n')[0], f'{name}: no summary line'

