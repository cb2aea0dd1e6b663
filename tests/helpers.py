"""Graphs and references shared by the tests."""
import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary
from torch_geometric.data import Data
from torch_geometric.typing import WITH_TORCH_SPARSE

from ikgat import IKGATConv, kernels
from ikgat.kernels import KERNELS
from ikgat.models import TwoLayerGAT
from ikgat.reference import edge_wise_attention
from ikgat.training.sampling import has_sampler

#: The one device of the tests of the CUDA path (the fused attention, the
#: Triton node terms, compile): CUDA where there is one, else the CPU, where
#: tests/conftest.py switches Triton's interpreter on.  Every tensor of such
#: a test is made on it or moved to it before it meets the layer.
DEVICE = torch.device('cuda' if torch.cuda.is_available() else 'cpu')


def fast_few(cases, fast):
    r""":obj:`cases` for ``pytest.mark.parametrize``, those not in
    :obj:`fast` marked slow: the fast tier checks a representative few,
    the slow tier every case (tuples are the arguments of one case)."""
    return [case if case in fast else pytest.param(
        *(case if isinstance(case, tuple) else (case, )),
        marks=pytest.mark.slow) for case in cases]


def random_graph(num_nodes: int, num_edges: int, channels: int, seed: int,
                 num_dst=None):
    generator = torch.Generator().manual_seed(seed)
    num_dst = num_nodes if num_dst is None else num_dst
    x = torch.randn(num_nodes, channels, generator=generator)
    src = torch.randint(0, num_nodes, (num_edges, ), generator=generator)
    dst = torch.randint(0, num_dst, (num_edges, ), generator=generator)
    return x, torch.stack([src, dst])


def _rbf(kernel, x, y):
    return torch.exp(-((x - y)**2).sum(-1) / (2 * kernel.lengthscale**2))


def _expsin(kernel, x, y):
    distance = ((x - y)**2).sum(-1).sqrt()
    return torch.exp(-2 * torch.sin(math.pi * distance / kernel.period)**2
                     / kernel.lengthscale**2)


def _linear(kernel, x, y):
    phi = lambda v: torch.nn.functional.elu(v) + 1  # noqa: E731
    return (phi(x) * phi(y)).sum(-1)


def _poly(kernel, x, y):
    return ((x * y).sum(-1) + kernel.offset)**kernel.degree


def _exp(kernel, x, y):
    return torch.exp(kernel.scale * (x * y).sum(-1))


def _rff(kernel, x, y):
    (w, ) = kernel.spectral_point_sets  # [H, R, 2C]
    angle = ((x - y).unsqueeze(-2) * w).sum(-1)  # [*, H, R]
    return angle.cos().mean(-1)**2


def _two_sets(kernel, x, y):
    # the single graph's (last) draw, [H, R, 2C] each:
    w1, w2 = [points[0] for points in kernel.spectral_points_per_graph()]
    total = 0
    for wa in (w1, w2):
        for wb in (w1, w2):
            total = total + ((x.unsqueeze(-2) * wa).sum(-1) -
                             (y.unsqueeze(-2) * wb).sum(-1)).cos()
    # phi(x)^T phi(y) = sum_r sum_{s,s'} cos(w_s x - w_s' y), over 4R:
    return (total.sum(-1) / (4 * w1.size(-2)))**2


#: The built-in kernels' similarities from their documented formulas,
#: evaluated pair by pair on full vectors ``[*, H, 2C]`` and written
#: independently of the package: an extra check on top of the kernel
#: contract (tests/kernels/test_contract.py), which a new kernel runs
#: without an entry here.
INDEPENDENT_SIMILARITY = {
    kernels.RBFKernel: _rbf,
    kernels.RBFOnlyKernel: _rbf,
    kernels.ExpSinKernel: _expsin,
    kernels.LinearKernel: _linear,
    kernels.PolynomialKernel: _poly,
    kernels.ExpKernel: _exp,
    kernels.RandomFourierKernel: _rff,
    kernels.NonStationaryRandomFourierKernel: _two_sets,
    kernels.DirectSpectralKernel: _two_sets,
    kernels.ImplicitSpectralKernel: _two_sets,
}


def reference_similarity(kernel, x, y):
    """The similarity of a built-in ``kernel`` from its documented
    formula (see ``INDEPENDENT_SIMILARITY``)."""
    return INDEPENDENT_SIMILARITY[type(kernel)](kernel, x, y)


def reference_log_similarity(kernel, x, y):
    """``log sim`` as the fast path defines it: random-feature and
    polynomial kernels add ``eps`` inside the logarithm."""
    value = reference_similarity(kernel, x, y)
    return (value + kernel.eps).log()


#: The layers' attention edge by edge from the formula (the package's public
#: reference, shared with ``benchmarks/``).
edge_wise_reference = edge_wise_attention


#: Every layer of the package: IKGATConv with each kernel, MIKANConv and
#: KEPGATConv (test ids for make_layer).
LAYER_NAMES = [f'ikgat-{name}' for name in sorted(KERNELS)] + ['mikan', 'kep']


def make_layer(name: str, in_channels, out_channels: int, **kwargs):
    """The layer named by an entry of ``LAYER_NAMES``; ``p`` is dropped for
    KEPGATConv (GAT's attention has no magnitude term), whose evaluation
    returns the posterior mean (``num_samples=0``) unless told otherwise."""
    from ikgat import IKGATConv, KEPGATConv, MIKANConv
    if name == 'kep':
        kwargs.pop('p', None)
        kwargs.setdefault('num_samples', 0)
        return KEPGATConv(in_channels, out_channels, **kwargs)
    if name == 'mikan':
        return MIKANConv(in_channels, out_channels, **kwargs)
    return IKGATConv(in_channels, out_channels,
                     kernel=name[len('ikgat-'):], **kwargs)


#: Sizes of the tiny two-layer models of the inspection and plot tests.
HEADS, CHANNELS, R = 2, 3, 4


def tiny_graph(seed=0, num_nodes=24, num_edges=80, features=5, classes=3):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, features, generator=generator)
    edge_index = torch.randint(0, num_nodes, (2, num_edges),
                               generator=generator)
    y = torch.randint(0, classes, (num_nodes, ), generator=generator)
    masks = torch.arange(num_nodes) % 3
    return Data(x=x, edge_index=edge_index, y=y, train_mask=masks == 0,
                val_mask=masks == 1, test_mask=masks == 2)


def tiny_model(conv=IKGATConv, seed=0, **conv_kwargs):
    torch.manual_seed(seed)
    conv_kwargs.setdefault('num_spectral_points', R)
    return TwoLayerGAT(5, CHANNELS, 3, conv, heads=HEADS,
                       conv_kwargs=conv_kwargs).eval()


#: Skips a test that samples neighbours (NeighborLoader) where neither
#: pyg-lib nor torch-sparse is installed (a failure in CI, see
#: tests/conftest.py).
needs_sampler = pytest.mark.skipif(not has_sampler(),
                                   reason='needs pyg-lib or torch-sparse')
#: Skips a test of torch-sparse's SparseTensor where it is not installed
#: (a failure in CI, see tests/conftest.py).
needs_torch_sparse = pytest.mark.skipif(not WITH_TORCH_SPARSE,
                                        reason='needs torch-sparse')


def require(available: bool, reason: str) -> None:
    r"""Skip the running test unless :obj:`available` (a failure in CI,
    see tests/conftest.py)."""
    if not available:
        pytest.skip(reason)


class NoHostTensors(TorchDispatchMode):
    """While a step runs on the 'meta' device (which stands for CUDA),
    raise where a host value meets a device tensor, a host-to-device copy
    on CUDA (a synchronisation with a pageable source) that reading no
    value cannot reveal:

    * a CPU tensor, 0-dim included, among the arguments of an operation on
      meta tensors (``t * torch.tensor(2.0)``, ``cpu_tensor.to(device)``);
    * a tensor made from a Python value (``aten.scalar_tensor``) written
      into a device tensor (``t[0] = 1.0``, which on CUDA copies a CPU
      scalar into GPU memory, on meta makes the scalar on meta first).

    Not seen: ``torch.tensor([...], device=...)``, which fills the device
    tensor below the dispatcher (``tests/test_imports.py``-style source
    checks are the place for that).
    """
    HOST_MADE = ('aten::scalar_tensor', )
    WRITES = ('aten::copy_', 'aten::index_put_', 'aten::fill_',
              'aten::masked_fill_')

    def __init__(self):
        super().__init__()
        self.host_made = WeakIdKeyDictionary()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0]
                   if isinstance(t, torch.Tensor)]
        devices = {t.device.type for t in tensors}
        name = func._schema.name
        if 'cpu' in devices and 'meta' in devices or (
                'cpu' in devices and str(kwargs.get('device')) == 'meta'):
            raise AssertionError(f'{func}: a host tensor meets a device '
                                 f'tensor (a host-to-device copy on CUDA)')
        if name in self.WRITES and any(t in self.host_made
                                       for t in tensors[1:]):
            raise AssertionError(f'{func}: a Python value is written into '
                                 f'a device tensor (a host-to-device copy '
                                 f'on CUDA); build it on the device, e.g. '
                                 f'with new_full')
        out = func(*args, **kwargs)
        if name in self.HOST_MADE and isinstance(out, torch.Tensor):
            self.host_made[out] = True
        return out
