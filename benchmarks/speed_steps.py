r"""What :mod:`benchmarks.speed` times: the graphs, the layers, two baselines
built from a layer's own parameters, and the steps (forward + backward).

* :class:`NaiveEdgeWise`: IKGATConv evaluated the :math:`O(E \cdot H \cdot
  R)` way, the kernel applied to the gathered endpoint vectors of every edge
  instead of once per node (DESIGN.md section 3); it computes the same
  function as the layer, which the test suite checks.
* :class:`PrecomputedKernel`: the node-wise kernel output frozen as leaf
  tensors, so that a layer using it times everything *but* the kernel
  (projection, norms, per-edge work, aggregation).
"""
import copy
import inspect
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from benchmarks.harness.measurement import Step
from ikgat.kernels import KERNELS, Kernel

HEADS, CHANNELS = 8, 8
#: A synthetic graph of ogbn-arxiv's size.
ARXIV = dict(num_nodes=169_343, num_edges=1_166_243, num_features=128)

# --------------------------------------------------------------------------
# Graphs
# --------------------------------------------------------------------------


@dataclass
class Graph:
    name: str
    x: Tensor
    edge_index: Tensor

    @property
    def num_nodes(self) -> int:
        return self.x.size(0)

    @property
    def num_edges(self) -> int:
        return self.edge_index.size(1)

    def describe(self) -> str:
        return (f'{self.name}: {self.num_nodes:,} nodes, {self.num_edges:,} '
                f'edges, {self.x.size(1)} features, average degree '
                f'{self.num_edges / max(1, self.num_nodes):.1f}')


def random_features(num_nodes: int, num_features: int,
                    seed: int = 0) -> Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(num_nodes, num_features, generator=generator)


def random_edges(num_nodes: int, num_edges: int, seed: int = 0) -> Tensor:
    r"""Uniformly random directed edges (``randint`` sources and targets)."""
    generator = torch.Generator().manual_seed(seed + 1)
    return torch.randint(0, num_nodes, (2, num_edges), generator=generator)


def synthetic_graph(name: str, num_nodes: int, num_edges: int,
                    num_features: int, seed: int = 0) -> Graph:
    r"""Standard normal features and uniformly random directed edges."""
    return Graph(name, random_features(num_nodes, num_features, seed),
                 random_edges(num_nodes, num_edges, seed))


def planetoid_graph(name: str) -> Graph:
    from ikgat.data import load_planetoid
    data = load_planetoid(name)[0]
    return Graph(name, data.x, data.edge_index)


def load_graph(name: str, seed: int = 0) -> Graph:
    r"""``arxiv`` (synthetic, ogbn-arxiv size), ``tiny`` (synthetic, 200
    nodes) or a Planetoid name (read from ``$IKGAT_DATA``)."""
    key = name.lower()
    if key == 'arxiv':
        return synthetic_graph('arxiv-size (synthetic)', **ARXIV, seed=seed)
    if key == 'tiny':
        return synthetic_graph('tiny (synthetic)', 200, 1_000, 16, seed=seed)
    return planetoid_graph(name)


# --------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------


def takes_node_path(kernel: str) -> bool:
    r"""Whether the kernel named :obj:`kernel` has a ``node_path`` option
    (the random-feature kernels)."""
    return 'node_path' in inspect.signature(KERNELS[kernel]).parameters


def make_gat(in_channels: int) -> torch.nn.Module:
    from torch_geometric.nn import GATConv
    return GATConv(in_channels, CHANNELS, heads=HEADS)


def make_ikgat(in_channels: int, kernel: str = 'direct',
               num_features: int = 64,
               node_path: str = 'eager') -> torch.nn.Module:
    r"""IKGATConv with :obj:`HEADS` heads of :obj:`CHANNELS` channels;
    :obj:`node_path` applies to the random-feature kernels only."""
    from ikgat import IKGATConv
    kernel_kwargs = (dict(node_path=node_path)
                     if takes_node_path(kernel) else None)
    return IKGATConv(in_channels, CHANNELS, heads=HEADS, kernel=kernel,
                     num_spectral_points=num_features, kernel_kwargs=kernel_kwargs)


def make_mikan(in_channels: int, num_features: int = 64,
               node_path: str = 'eager') -> torch.nn.Module:
    from ikgat import MIKANConv
    return MIKANConv(in_channels, CHANNELS, heads=HEADS,
                     num_spectral_points=num_features,
                     kernel_kwargs=dict(node_path=node_path))


def node_anchor(conv: torch.nn.Module, dtype: torch.dtype):
    r"""The anchors :math:`a_h = [a_{dst} \| a_{src}]`, :math:`(H, 2C)`,
    and the slopes :math:`c_t`, :math:`(T,)`, as the layer forms them."""
    H, C = conv.heads, conv.out_channels
    anchor = torch.cat([conv.att_dst, conv.att_src], -1).view(H, 2 * C)
    slopes = torch.tensor([1.0, conv.negative_slope], dtype=dtype)
    return anchor, slopes


class NaiveEdgeWise(torch.nn.Module):
    r"""IKGATConv evaluated edge by edge, sharing the parameters of
    :obj:`conv` (``concat=True``, no dropout, edge features or residual).

    Per edge :math:`j \to i` the similarity terms
    :math:`\log\mathrm{sim}(q_i, c_{ij} a)` and
    :math:`\log\mathrm{sim}(c_{ij} a, k_j)` come from the conv's own kernel
    applied to :math:`q_i` and :math:`k_j` gathered per edge: one
    :math:`E \times H \times C` copy of each side and
    :math:`O(E \cdot H \cdot R)` sines and cosines, evaluated on the
    kernel's ``node_path``.  The logit adds the magnitude terms
    :math:`c_{ij}^2\|a\|_p^2 + \tfrac12\|k_j\|_p^2`
    (:math:`\tfrac12\|q_i\|_p^2` cancels in the softmax over :math:`j`).
    """
    def __init__(self, conv: torch.nn.Module):
        super().__init__()
        self.conv = conv

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        from torch_geometric.utils import (
            add_self_loops,
            remove_self_loops,
            scatter,
            softmax,
        )

        from ikgat.nn.norms import lp_norm_squared
        conv = self.conv
        H, C = conv.heads, conv.out_channels
        proj = conv.lin(x).view(-1, H, C)
        edge_index, _ = remove_self_loops(edge_index)
        edge_index, _ = add_self_loops(edge_index, num_nodes=x.size(0))
        src, dst = edge_index
        q, k = proj[dst], proj[src]  # [E, H, C]: one copy per edge
        anchor, slopes = node_anchor(conv, x.dtype)
        gate = (q * conv.att_dst).sum(-1) + (k * conv.att_src).sum(-1)
        pick = (gate <= 0).long().unsqueeze(-1)  # t_ij: c = negative_slope
        log_sim = (conv.kernel.log_similarity(q, anchor, 0, slopes) +
                   conv.kernel.log_similarity(k, anchor, 1, slopes))
        logit = log_sim.gather(-1, pick).squeeze(-1)  # [E, H]
        if conv.magnitude:
            anchor_norm = lp_norm_squared(slopes.view(-1, 1, 1) * anchor,
                                          conv.p).t()  # [H, T]
            logit = logit + anchor_norm.expand(src.numel(), -1, -1).gather(
                -1, pick).squeeze(-1) + 0.5 * lp_norm_squared(k, conv.p)
        alpha = softmax(logit, dst, num_nodes=x.size(0))
        out = scatter(alpha.unsqueeze(-1) * k, dst, 0, dim_size=x.size(0),
                      reduce='sum').view(-1, H * C)
        if conv.bias is not None:
            out = out + conv.bias
        return out


class PrecomputedKernel(Kernel):
    r"""A kernel returning fixed node-wise terms
    :math:`\log\mathrm{sim}(v_n, c_t a_h)`, :math:`(N, H, T)` per side.
    They are parameters, so the layer's backward still carries their
    gradients (the per-edge gather's backward) and the step clears them."""
    def __init__(self, heads: int, channels: int, log_sim_dst: Tensor,
                 log_sim_src: Tensor):
        super().__init__(heads, channels)
        self.log_sim_dst = torch.nn.Parameter(log_sim_dst)
        self.log_sim_src = torch.nn.Parameter(log_sim_src)

    def log_similarity(self, x: Tensor, anchor: Tensor, side: int,
                       slopes: Tensor) -> Tensor:
        return self.log_sim_src if side == 1 else self.log_sim_dst


def without_kernel(conv: torch.nn.Module, x: Tensor) -> torch.nn.Module:
    r"""A copy of :obj:`conv` whose kernel returns the node-wise terms of
    the original on input :obj:`x`, precomputed."""
    with torch.no_grad():
        proj = conv.lin(x).view(-1, conv.heads, conv.out_channels)
        anchor, slopes = node_anchor(conv, x.dtype)
        terms = [conv.kernel.log_similarity(proj, anchor, side, slopes)
                 for side in (0, 1)]
    rest = copy.deepcopy(conv)
    rest.kernel = PrecomputedKernel(conv.heads, conv.out_channels, *terms)
    return rest


# --------------------------------------------------------------------------
# Steps: forward + backward, what a Session times
# --------------------------------------------------------------------------


def layer_step(model: torch.nn.Module, graph: Graph) -> Step:
    r"""One forward + backward of :obj:`model` on :obj:`graph` with a fixed
    upstream gradient (parameter gradients cleared first)."""
    with torch.no_grad():
        out = model(graph.x, graph.edge_index)
    generator = torch.Generator().manual_seed(1)
    grad = torch.randn(out.shape, generator=generator) / out.numel()**0.5
    params = [p for p in model.parameters() if p.requires_grad]

    def step():
        for param in params:
            param.grad = None
        model(graph.x, graph.edge_index).backward(grad)

    return step


def rest_step(conv: torch.nn.Module, graph: Graph) -> Step:
    r"""The layer with its kernel's output precomputed
    (:func:`without_kernel`): everything but the kernel."""
    return layer_step(without_kernel(conv, graph.x), graph)


def seeded(make: Callable[[], torch.nn.Module],
           seed: int) -> Callable[[], torch.nn.Module]:
    r""":obj:`make` with the global seed set first, so that every model of a
    kind starts from the same parameters."""
    def build():
        torch.manual_seed(seed)
        return make()

    return build


def step_maker(make: Callable[[], torch.nn.Module], graph: Graph,
               kind: Callable[[torch.nn.Module, Graph], Step] = layer_step
               ) -> Callable[[], Step]:
    r"""A deferred step for
    :meth:`benchmarks.harness.measurement.Session.add`: builds
    the model when the session starts."""
    return lambda: kind(make(), graph)

