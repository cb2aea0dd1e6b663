# Every layer of ikgat.nn.conv, as torch_geometric.nn re-exports its conv
# package: a new layer is registered once, in ikgat.nn.conv's __all__.
from ikgat.nn.conv import *  # noqa: F403
from ikgat.nn.conv import __all__ as _conv_all
from ikgat.nn.graph_batch import graph_batch
from ikgat.nn.layerwise import layer_over_full_graph
from ikgat.nn.losses import kl_divergence
from ikgat.ops.aggregation import attention_aggregate
from ikgat.ops.edge_softmax import kernel_edge_softmax

__all__ = [
    *_conv_all, 'kl_divergence', 'attention_aggregate', 'kernel_edge_softmax',
    'layer_over_full_graph', 'graph_batch'
]
