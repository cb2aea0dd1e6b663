r"""Input checks shared by the ikgat layers.

Every check raises a :class:`ValueError` or :class:`TypeError` that names the
offending value and says what to pass instead.  The layers skip them while
:func:`torch.compile` traces, where data-dependent checks would break the
graph.

**Host synchronisation.**  Checks of shapes and dtypes read no tensor
values.  The checks that read values (index ranges, a sorted batch
vector) copy a number to the host, which on a GPU waits for every queued
kernel; as PyG does, they run there only in PyG's debug mode
(``with torch_geometric.debug(): ...``, see :func:`reads_values`), and
always on CPU tensors, where reading a value costs nothing extra.  Where
they cannot run (on a GPU outside debug mode, and while
:func:`torch.compile` traces), the index range is still checked, by a
device-side assertion (:func:`assert_indices_in_range`): no index out of
range is ever read.
"""
from typing import Optional, Tuple, Union

import torch
import torch_geometric
from torch import Tensor
from torch_geometric.typing import SparseTensor
from torch_geometric.utils import is_torch_sparse_tensor

import ikgat.nn.graph_cache as graph_cache

#: The :mod:`~ikgat.nn.graph_cache` kind of :func:`assert_indices_in_range`.
INDICES_IN_RANGE = 'indices in range'


def reads_values(device: torch.device) -> bool:
    r"""Whether checks and size inferences may read tensor values on
    :obj:`device` (a host synchronisation): always for CPU tensors, and on
    any other device (CUDA) only in PyG's debug mode
    (:func:`torch_geometric.is_debug_enabled`, switched on by
    ``with torch_geometric.debug():``).  Outside debug mode a CUDA forward
    or backward pass of the ikgat layers does not wait for the GPU."""
    return device.type == 'cpu' or torch_geometric.is_debug_enabled()


def check_node_features(layer: str, name: str, x: Tensor,
                        in_channels: int) -> None:
    """Check that :obj:`x` is a floating ``[num_nodes, in_channels]`` tensor
    (any width when ``in_channels == -1``)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{layer}: '{name}' must be a torch.Tensor "
                        f"(got {type(x).__name__})")
    if x.dim() != 2:
        raise ValueError(f"{layer}: '{name}' must be 2-D "
                         f"[num_nodes, in_channels] (got shape "
                         f"{tuple(x.shape)}); batch graphs by concatenating "
                         f"their nodes, as PyG's DataLoader does")
    if not x.is_floating_point():
        raise TypeError(f"{layer}: '{name}' must be a floating-point tensor "
                        f"(got dtype {x.dtype}); convert it with .float()")
    if in_channels != -1 and x.size(1) != in_channels:
        raise ValueError(f"{layer}: '{name}' has {x.size(1)} features per "
                         f"node but the layer was built with in_channels="
                         f"{in_channels}; build it with the right size or -1")


def check_edge_index(layer: str, edge_index: Union[Tensor, SparseTensor],
                     num_src: int, num_dst: Optional[int]) -> None:
    """Check an adjacency: an integer ``[2, E]`` tensor with indices in range,
    or a sparse ``[num_dst, num_src]`` adjacency (``adj_t``).  The index
    ranges are read only where :func:`reads_values` allows it (CPU, or
    PyG's debug mode), else asserted on the device
    (:func:`assert_indices_in_range`); while :func:`torch.compile` traces,
    only the device assertion runs."""
    if torch.compiler.is_compiling():
        if isinstance(edge_index, Tensor) and not is_torch_sparse_tensor(
                edge_index):
            assert_indices_in_range(layer, edge_index, num_src, num_dst)
        return
    if isinstance(edge_index, SparseTensor) or is_torch_sparse_tensor(
            edge_index):
        rows, cols = edge_index.size(0), edge_index.size(1)
        if cols != num_src or (num_dst is not None and rows != num_dst):
            raise ValueError(
                f"{layer}: the sparse adjacency has shape [{rows}, {cols}] "
                f"but must be the transposed adjacency adj_t of shape "
                f"[num_target_nodes, num_source_nodes] = "
                f"[{num_dst if num_dst is not None else '?'}, {num_src}]")
        return
    if not isinstance(edge_index, Tensor):
        raise TypeError(f"{layer}: 'edge_index' must be a [2, num_edges] "
                        f"integer tensor or a sparse adjacency (got "
                        f"{type(edge_index).__name__})")
    if edge_index.is_floating_point() or edge_index.is_complex() or (
            edge_index.dtype == torch.bool):
        raise TypeError(f"{layer}: 'edge_index' must hold integer indices "
                        f"(got dtype {edge_index.dtype}); convert it with "
                        f".long()")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"{layer}: 'edge_index' must have shape "
                         f"[2, num_edges] (got {tuple(edge_index.shape)}); "
                         f"transpose an [E, 2] list with .t()")
    if edge_index.numel() == 0:
        return
    if not reads_values(edge_index.device):
        assert_indices_in_range(layer, edge_index, num_src, num_dst)
        return
    for row, name, bound in ((0, 'source', num_src), (1, 'target', num_dst)):
        if bound is None:
            continue
        low, high = int(edge_index[row].min()), int(edge_index[row].max())
        if low < 0 or high >= bound:
            bad = low if low < 0 else high
            raise ValueError(f"{layer}: 'edge_index' holds {name} index "
                             f"{bad}, out of range for {bound} {name} nodes "
                             f"(valid: 0..{bound - 1})")


def assert_indices_in_range(layer: str, edge_index: Tensor, num_src: int,
                            num_dst: Optional[int]) -> None:
    r"""Assert on the device, without a host synchronisation, that the
    ``[2, E]`` :obj:`edge_index` holds sources in ``[0, num_src)`` and
    targets in ``[0, num_dst)`` (:func:`torch._assert_async`: on a GPU the
    stream stops at the assertion, before any later kernel reads out of
    range; on CPU and under :func:`torch.compile` it raises a
    :class:`RuntimeError`).  Once per graph, as its sort
    (:mod:`ikgat.nn.graph_cache`: again after an in-place change, and in
    every compiled call).  The message cannot hold the offending value,
    which only the device knows; the eager CPU check
    (:func:`check_edge_index`) and PyG's debug mode name it."""
    if edge_index.numel() == 0:
        return

    def assert_in_range() -> bool:
        if num_dst is None or num_dst == num_src:
            low, high = torch.aminmax(edge_index)
            in_range = (low >= 0) & (high < num_src)
        else:
            low, high = torch.aminmax(edge_index, dim=1)
            in_range = ((low.min() >= 0) & (high[0] < num_src)
                        & (high[1] < num_dst))
        torch._assert_async(
            in_range, f"{layer}: 'edge_index' holds a node index out of "
            f"range (sources must lie in [0, x_src.size(0)), targets in "
            f"[0, x_dst.size(0))); run the layer eagerly on CPU, or inside "
            f"torch_geometric.debug(), to see the index")
        return True

    graph_cache.cached(edge_index, INDICES_IN_RANGE, (num_src, num_dst),
                       assert_in_range)


def check_edge_attr(layer: str, edge_attr: Optional[Tensor],
                    edge_dim: Optional[int],
                    edge_index: Union[Tensor, SparseTensor]) -> None:
    """Check that edge features match ``edge_dim`` and the edges."""
    if edge_attr is None:
        return
    if edge_dim is None:
        raise ValueError(f"{layer}: 'edge_attr' of shape "
                         f"{tuple(edge_attr.shape)} was given but the layer "
                         f"has edge_dim=None; build it with "
                         f"edge_dim={edge_attr.size(-1) if edge_attr.dim() > 1 else 1}")
    width = 1 if edge_attr.dim() == 1 else edge_attr.size(-1)
    if edge_attr.dim() > 2 or width != edge_dim:
        raise ValueError(f"{layer}: 'edge_attr' must have shape "
                         f"[num_edges, {edge_dim}] (got "
                         f"{tuple(edge_attr.shape)})")
    if (isinstance(edge_index, Tensor)
            and not is_torch_sparse_tensor(edge_index)
            and edge_attr.size(0) != edge_index.size(1)):
        raise ValueError(f"{layer}: 'edge_attr' has {edge_attr.size(0)} rows "
                         f"but 'edge_index' has {edge_index.size(1)} edges")


def node_counts(x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]],
                size: Optional[Tuple[int, int]]
                ) -> Tuple[int, Optional[int]]:
    """Return the number of source and target nodes (None if unknown)."""
    if isinstance(x, Tensor):
        num_src = num_dst = x.size(0)
    else:
        num_src = x[0].size(0)
        num_dst = None if x[1] is None else x[1].size(0)
    if size is not None:
        num_src, num_dst = size[0], size[1]
    return num_src, num_dst


def check_size(layer: str, size: Optional[Tuple[Optional[int],
                                                Optional[int]]],
               x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]]) -> None:
    """Check ``size=(num_source_nodes, num_target_nodes)`` against the node
    features, as ``MessagePassing.propagate`` checks it for GATConv: each
    given count must equal the rows of the features on that side (both
    sides are ``x`` for a single tensor; ``x_dst=None`` leaves the targets
    to ``size``)."""
    if size is None:
        return
    if (not isinstance(size, (tuple, list)) or len(size) != 2 or not all(
            value is None or (isinstance(value, int)
                              and not isinstance(value, bool) and value >= 0)
            for value in size)):
        raise ValueError(f"{layer}: 'size' must be a pair (num_source_nodes, "
                         f"num_target_nodes) of non-negative integers "
                         f"(got {size!r})")
    if isinstance(x, Tensor):
        sides = ((x, 'x'), (x, 'x'))
    else:
        sides = ((x[0], 'x_src'), (x[1], 'x_dst'))
    rows = [None if features is None else features.size(0)
            for features, _ in sides]
    for value, count, (_, name), role in zip(size, rows, sides,
                                             ('source', 'target')):
        if value is not None and count is not None and value != count:
            fixed = tuple(given if have is None else have
                          for given, have in zip(size, rows))
            raise ValueError(f"{layer}: size={tuple(size)} gives {value} "
                             f"{role} nodes but '{name}' has {count} rows; "
                             f"pass size={fixed} or size=None")


def check_batch(layer: str, name: str, batch: Optional[Tensor],
                num_nodes: Optional[int]) -> None:
    """Check a graph-assignment vector: 1-D, integer, one entry per node,
    sorted (as PyG's DataLoader builds it).  Order and sign are read only
    where :func:`reads_values` allows it (CPU, or PyG's debug mode)."""
    if batch is None:
        return
    if not isinstance(batch, Tensor) or batch.dim() != 1 or (
            batch.is_floating_point()):
        raise ValueError(f"{layer}: '{name}' must be a 1-D integer tensor "
                         f"with the graph index of each node (got "
                         f"{getattr(batch, 'shape', type(batch).__name__)})")
    if num_nodes is not None and batch.numel() != num_nodes:
        raise ValueError(f"{layer}: '{name}' has {batch.numel()} entries but "
                         f"there are {num_nodes} nodes")
    if not reads_values(batch.device):
        return
    if batch.numel() > 1 and bool((batch[1:] < batch[:-1]).any()):
        raise ValueError(f"{layer}: '{name}' must be sorted (nodes grouped "
                         f"by graph, as PyG's DataLoader builds it); sort the "
                         f"nodes by graph first")
    if batch.numel() and int(batch.min()) < 0:
        raise ValueError(f"{layer}: '{name}' holds the negative graph index "
                         f"{int(batch.min())}")


def count_graphs(layer: str, batch_src: Optional[Tensor],
                 batch_dst: Optional[Tensor],
                 batch_size: Optional[int]) -> int:
    r"""The number of graphs of a mini-batch: :obj:`batch_size` if given
    (checked against the vectors where :func:`reads_values` allows it),
    else one more than the largest graph index (a host synchronisation on
    CUDA), and 1 without batch vectors."""
    vectors = [vector for vector in (batch_src, batch_dst)
               if vector is not None and vector.numel() > 0]
    if batch_size is not None:
        if (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                or batch_size < 1):
            raise ValueError(f"{layer}: 'batch_size' must be a positive "
                             f"integer, the number of graphs (got "
                             f"{batch_size!r})")
        for vector in vectors:
            if reads_values(vector.device) and int(
                    vector.max()) >= batch_size:
                raise ValueError(f"{layer}: 'batch' holds the graph index "
                                 f"{int(vector.max())} but batch_size="
                                 f"{batch_size}; pass the number of graphs "
                                 f"(data.num_graphs)")
        return batch_size
    num_graphs = 1
    for vector in vectors:
        num_graphs = max(num_graphs, int(vector.max()) + 1)
    return num_graphs
