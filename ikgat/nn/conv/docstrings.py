r"""Docstring fragments that several layers share, written once.

A layer's docstring, or the docstring of one of its methods, names a
fragment on a line of its own, in braces (``{gatconv_arguments}``),
indented as the fragment is to be; :func:`shared_docstring` puts the
fragment there when the class is defined
(:func:`ikgat.kernels.docstrings.fill_fragments`, which says the rules).
"""
from typing import Dict

from ikgat.kernels.docstrings import Documented, fill_fragments

#: GATConv's constructor arguments, as :class:`~ikgat.IKGATConv`,
#: :class:`~ikgat.MIKANConv` and :class:`~ikgat.KEPGATConv` take them (the
#: layer's own follow in its docstring).
GATCONV_ARGUMENTS = r"""
in_channels (int or tuple): Size of each input sample, or :obj:`-1`
    to derive the size from the first input(s) to the forward method.
    A tuple corresponds to the sizes of source and target
    dimensionalities in case of a bipartite graph.
out_channels (int): Size of each output sample per head :math:`C`.
heads (int, optional): Number of attention heads :math:`H`.
    (default: :obj:`1`)
concat (bool, optional): If set to :obj:`False`, the heads are
    averaged instead of concatenated. (default: :obj:`True`)
negative_slope (float, optional): LeakyReLU angle of the negative
    slope. (default: :obj:`0.2`)
dropout (float, optional): Dropout probability of the normalized
    attention coefficients. (default: :obj:`0`)
add_self_loops (bool, optional): If set to :obj:`False`, will not add
    self-loops to the input graph. (default: :obj:`True`)
edge_dim (int, optional): Edge feature dimensionality (in case there
    are any). (default: :obj:`None`)
fill_value (float or torch.Tensor or str, optional): The way to
    generate edge features of self-loops (in case
    :obj:`edge_dim != None`), as in GATConv. (default: :obj:`"mean"`)
bias (bool, optional): If set to :obj:`False`, the layer will not
    learn an additive bias. (default: :obj:`True`)
residual (bool, optional): If set to :obj:`True`, the layer will add
    a learnable skip-connection. (default: :obj:`False`)"""

#: The "Shapes:" section of the GATConv family: GATConv's, with a sparse
#: adjacency accepted as well.
GATCONV_SHAPES = r"""
Shapes:
    - **input:**
      node features :math:`(|\mathcal{V}|, F_{in})` or
      :math:`((|\mathcal{V_s}|, F_{s}), (|\mathcal{V_t}|, F_{t}))`
      if bipartite,
      edge indices :math:`(2, |\mathcal{E}|)` or a sparse adjacency
      :math:`(|\mathcal{V_t}|, |\mathcal{V_s}|)`,
      edge features :math:`(|\mathcal{E}|, D)` *(optional)*
    - **output:** node features :math:`(|\mathcal{V}|, H * F_{out})` or
      :math:`((|\mathcal{V}_t|, H * F_{out})` if bipartite.
      If :obj:`return_attention_weights=True`, then
      :math:`((|\mathcal{V}|, H * F_{out}),
      ((2, |\mathcal{E}|), (|\mathcal{E}|, H)))`
      or :math:`((|\mathcal{V_t}|, H * F_{out}), ((2, |\mathcal{E}|),
      (|\mathcal{E}|, H)))` if bipartite"""

#: The input arguments of the layers' :meth:`forward`, as the layers of
#: ikgat take them.
FORWARD_GRAPH_ARGUMENTS = r"""
x (torch.Tensor or (torch.Tensor, torch.Tensor)): The input node
    features (source and target features if bipartite).
edge_index (torch.Tensor or SparseTensor): The edge indices, or a
    sparse transposed adjacency ``adj_t``.
edge_attr (torch.Tensor, optional): The edge features.
    (default: :obj:`None`)"""

#: GATConv's :obj:`return_attention_weights` argument of :meth:`forward`,
#: as :class:`~ikgat.IKGATConv` and :class:`~ikgat.KEPGATConv` take it.
GATCONV_RETURN_ATTENTION_WEIGHTS = r"""
return_attention_weights (bool, optional): Will additionally
    return the tuple :obj:`(edge_index, attention_weights)`
    whenever it is set to a value, as in GATConv.
    (default: :obj:`None`)"""

#: The fragments by the name a docstring gives them.
FRAGMENTS: Dict[str, str] = {
    'gatconv_arguments': GATCONV_ARGUMENTS,
    'gatconv_shapes': GATCONV_SHAPES,
    'forward_graph_arguments': FORWARD_GRAPH_ARGUMENTS,
    'gatconv_return_attention_weights': GATCONV_RETURN_ATTENTION_WEIGHTS,
}


def shared_docstring(documented: Documented) -> Documented:
    r"""Class decorator: :func:`~ikgat.kernels.docstrings.fill_fragments`
    with the layers' :data:`FRAGMENTS`, in the class's docstring and in
    those of the methods its body defines."""
    return fill_fragments(documented, FRAGMENTS)
