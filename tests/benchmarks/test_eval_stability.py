"""benchmarks.eval_stability's --kernel-eps: the floor of the random-feature
kernels' log-similarity reaches those layers and only those."""
from torch_geometric.nn import GATConv

from benchmarks.eval_stability import LAYERS, RANDOM_FEATURE_LAYERS, layers
from ikgat import IKGATConv


def test_kernel_eps_reaches_the_random_feature_kernels():
    table = layers(kernel_eps=1e-2)
    for name in RANDOM_FEATURE_LAYERS:
        conv = table[name](16, 4, 2, dropout=0.6)
        assert conv.kernel.eps == 1e-2
    assert table['GATConv'] is GATConv
    assert table['KEPGATConv'] is LAYERS['KEPGATConv']


def test_without_kernel_eps_the_kernels_keep_their_own():
    default_eps = IKGATConv(16, 4, 2, kernel='direct').kernel.eps
    table = layers()
    assert table == LAYERS
    assert table['IKGATConv direct'](16, 4, 2).kernel.eps == default_eps
