r"""What kernel attention computed and learned: a model's attention layers
and their terms (:mod:`~ikgat.inspection.capture`), the terms over training
(:mod:`~ikgat.inspection.terms`), statistics of the attention
(:mod:`~ikgat.inspection.statistics`) and the IKA paper's figures
(:mod:`~ikgat.inspection.figures`, with the ``viz`` extra)."""
from ikgat.inspection.capture import (
    COPULA_LAYERS,
    KERNEL_LAYERS,
    LayerSelector,
    attention_layers,
    attention_weights,
    layer_decompositions,
    weighting_layers,
)
from ikgat.inspection.figures import (
    plot_copula_correlation,
    plot_head_attention_std,
    plot_sparsity,
    plot_spectral_tsne,
    plot_terms,
)
from ikgat.inspection.statistics import (
    AttentionLike,
    SparsityStatistics,
    SpectralTSNEInputs,
    head_attention_std,
    sparsity_statistics,
    spectral_tsne_inputs,
)
from ikgat.inspection.terms import TERM_STATISTICS, AttentionTermsRecorder

__all__ = [
    'SpectralTSNEInputs', 'SparsityStatistics', 'AttentionTermsRecorder',
    'attention_layers', 'layer_decompositions', 'weighting_layers',
    'attention_weights', 'spectral_tsne_inputs', 'sparsity_statistics',
    'head_attention_std', 'plot_spectral_tsne', 'plot_copula_correlation',
    'plot_head_attention_std', 'plot_sparsity', 'plot_terms',
    'KERNEL_LAYERS', 'COPULA_LAYERS', 'TERM_STATISTICS', 'LayerSelector',
    'AttentionLike'
]
