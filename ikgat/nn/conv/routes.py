r"""How one forward pass of a kernel-attention layer attends: its route,
decided once at the start of the pass from the inputs and the layer's
switches by the layer's ``_route`` (the rules of the GPU guide, "When the
fused kernels run"), and read by the steps that follow."""
from typing import NamedTuple


class GATRoute(NamedTuple):
    r"""How one forward pass of :class:`~ikgat.IKGATConv` attends, decided
    once by its ``_route``."""
    #: :func:`~ikgat.ops.gat_attention.fused_attention` runs its Triton
    #: kernels.
    fused: bool
    #: The fused operator adds the self-loops in its sort of the edges.
    self_loops_in_sort: bool
    #: :func:`~ikgat.ops.edge_softmax.kernel_edge_softmax` replaces PyG's
    #: :meth:`edge_updater`.
    lean_softmax: bool
    #: :func:`~ikgat.ops.aggregation.attention_aggregate` replaces PyG's
    #: :meth:`propagate`.
    lean_aggregation: bool


class TransformerRoute(NamedTuple):
    r"""How one forward pass of :class:`~ikgat.IKTransformerConv` attends,
    decided once by its ``_route``."""
    #: :func:`~ikgat.ops.transformer_attention.fused_transformer_attention`
    #: runs its Triton kernels.
    fused: bool
    #: PyG's :meth:`propagate` aggregates (else edge chunks, or the fused
    #: kernels).
    propagate: bool
