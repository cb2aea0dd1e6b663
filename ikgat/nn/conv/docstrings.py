r"""Docstring fragments that several layers share, written once.

A layer's docstring names a fragment on a line of its own, in braces
(``{gatconv_arguments}``), indented as the fragment is to be;
:func:`shared_docstring` puts the fragment there when the class is
defined, as torch writes the arguments its functions share once
(``add_docstr`` with ``format(**common_args)``).  Only a line that is
nothing but the braced name of a fragment is replaced, so the braces of
the docstrings' LaTeX are left alone, and a misspelt name is an error
when the module is imported.
"""
import re
from typing import Dict

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

#: The fragments by the name a docstring gives them.
FRAGMENTS: Dict[str, str] = {
    'gatconv_arguments': GATCONV_ARGUMENTS,
    'gatconv_shapes': GATCONV_SHAPES,
}

_PLACEHOLDER = re.compile(r'^(?P<indent>[ \t]*)\{(?P<name>\w+)\}[ \t]*$',
                          re.MULTILINE)


def shared_docstring(cls: type) -> type:
    r"""Class decorator: replace each line ``{name}`` of the docstring of
    :obj:`cls` by the fragment :obj:`FRAGMENTS[name]`, every line of it
    indented as the placeholder is.  A docstring stripped by ``python -OO``
    stays :obj:`None`."""
    if cls.__doc__ is None:
        return cls

    def fragment(match: 're.Match[str]') -> str:
        name, indent = match['name'], match['indent']
        if name not in FRAGMENTS:
            raise KeyError(f'{cls.__name__}: no docstring fragment {name!r} '
                           f'(known: {sorted(FRAGMENTS)})')
        return '\n'.join(indent + line if line else line
                         for line in FRAGMENTS[name].strip('\n').splitlines())

    cls.__doc__ = _PLACEHOLDER.sub(fragment, cls.__doc__)
    return cls
