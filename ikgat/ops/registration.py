r"""How a fused operator family registers with ``torch.library``, written
once for :mod:`ikgat.ops.gat_attention` and
:mod:`ikgat.ops.transformer_attention`.

Each family is two operators, ``ikgat::<name>`` and
``ikgat::<name>_backward`` (:func:`torch.library.custom_op`), each with a
fake implementation that gives the shapes (for :func:`torch.compile`, and
for the ``meta`` device, where nothing is launched), and autograd through
the backward operator: :func:`torch.compile` keeps each as one node,
without a graph break or a guard on the graph.
"""
from typing import Callable, Optional, Sequence, Tuple

import torch

#: The schema of the six index arguments of a CSR
#: (:class:`~ikgat.ops.csr.AttentionCSR`'s tensors, in this order).
CSR_ARGS = ('Tensor rowptr, Tensor src, Tensor dst, Tensor colptr, '
            'Tensor csc_edge, Tensor csc_dst')


def register_operator(name: str, forward: Callable, forward_fake: Callable,
                      forward_schema: str, backward: Callable,
                      backward_fake: Callable, backward_schema: str,
                      setup_context: Callable, autograd_backward: Callable
                      ) -> Tuple[object, object]:
    r"""Register ``ikgat::<name>`` (:obj:`forward`) and
    ``ikgat::<name>_backward`` (:obj:`backward`) with their fake
    implementations and schemas, and :obj:`autograd_backward` (which calls
    the backward operator) with :obj:`setup_context` as the forward
    operator's autograd.  Returns both operators."""
    forward_op = torch.library.custom_op(f'ikgat::{name}', forward,
                                         mutates_args=(),
                                         schema=forward_schema)
    forward_op.register_fake(forward_fake)
    backward_op = torch.library.custom_op(f'ikgat::{name}_backward',
                                          backward, mutates_args=(),
                                          schema=backward_schema)
    backward_op.register_fake(backward_fake)
    forward_op.register_autograd(autograd_backward,
                                 setup_context=setup_context)
    return forward_op, backward_op


def input_gradients(grads: Sequence[Optional[torch.Tensor]],
                    needs_input_grad: Sequence[bool]) -> tuple:
    r"""What autograd takes from an operator's backward, one entry per
    input: the :obj:`grads` of its first ``len(grads)`` inputs where
    :obj:`needs_input_grad` asks for them, :obj:`None` for the others."""
    return tuple(grad if need else None
                 for grad, need in zip(grads, needs_input_grad)) + (
        None, ) * (len(needs_input_grad) - len(grads))
