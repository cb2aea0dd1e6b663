r"""The operators of kernel attention: tensor functions with their backends
(Triton kernels, :func:`torch.compile`-d loops, PyTorch), registered with
``torch.library`` so that :func:`torch.compile` keeps each one whole.

The layers call them; they are public for models that want the attention
without a layer.  Each registered operator family is one module, laid out
in one order: kernel bodies, launch and tiling, registration (fake and
autograd), PyTorch reference, public function.

================================  ============================================
module                            registers
================================  ============================================
:mod:`~ikgat.ops.gat_attention`   ``ikgat::fused_attention`` (+ backward)
:mod:`~.transformer_attention`    ``ikgat::fused_transformer_attention``
                                  (+ backward; its spectral-point kernels in
                                  :mod:`~ikgat.ops.transformer_fourier`)
:mod:`~ikgat.ops.node_terms`      ``ikgat::fourier_estimate`` (+ backward;
                                  its Triton kernels in
                                  :mod:`~ikgat.ops.node_terms_triton`)
:mod:`~ikgat.ops.node_tables`     ``ikgat::node_tables`` (+ backward)
:mod:`~ikgat.ops.edge_fourier`    ``ikgat::edge_fourier_estimate``
                                  (+ backward)
================================  ============================================

The pieces they share exist once: :mod:`~ikgat.ops.runtime` (lazy Triton,
launches, build errors, the interpreter switch), :mod:`~ikgat.ops.csr` (the
edges sorted by target and by source), :mod:`~ikgat.ops.attention_steps`
(the Triton steps of the online softmax and attention dropout).
"""
from ikgat.ops.aggregation import attention_aggregate
from ikgat.ops.csr import AttentionCSR, prepare_csr
from ikgat.ops.edge_fourier import edge_fourier_log_similarity
from ikgat.ops.edge_softmax import kernel_edge_softmax
from ikgat.ops.gat_attention import fused_attention
from ikgat.ops.node_terms import (
    fused_fourier_log_similarities,
    fused_fourier_log_similarity,
)
from ikgat.ops.runtime import KernelBuildError
from ikgat.ops.transformer_attention import fused_transformer_attention

__all__ = [
    'fused_attention',
    'fused_transformer_attention',
    'prepare_csr',
    'AttentionCSR',
    'kernel_edge_softmax',
    'attention_aggregate',
    'fused_fourier_log_similarity',
    'fused_fourier_log_similarities',
    'edge_fourier_log_similarity',
    'KernelBuildError',
]
