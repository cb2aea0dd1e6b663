r"""The models table of the benchmarks (``gat`` ... ``mikan``, and the graph
transformer family ``transformer`` ... ``ikt-mikan``) and the GAT paper's
protocol per dataset.  This is benchmark configuration: the layers
in :mod:`ikgat.nn` know nothing about it."""
import importlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple

import torch

from ikgat.cli.arguments import fan_out, positive_int
from ikgat.data import PLANETOID_NAMES
from ikgat.kernels.random_features import check_node_path
from ikgat.training.sampling import minibatch_training


@dataclass(frozen=True)
class ModelSpec:
    r"""One entry of the models table.

    Args:
        name: The name used on the command line and in the results.
        layer: ``'pyg'`` (the family's PyG layer), ``'ik'`` (the family's
            kernel layer with :obj:`kernel`) or ``'mikan'`` (the family's
            MIKAN layer); :data:`LAYERS` names the classes.
        kernel: The kernel name of the ``'ik'`` layer.
        uses_p: Whether the :math:`L^p` magnitude (and so :math:`p`) applies.
        uses_num_features: Whether the kernel has :math:`R` spectral points.
        variational: Whether the loss adds :math:`\beta \cdot \mathrm{KL}`.
        fixed_p: A :math:`p` that the model defines (``gat-rbf``: 2).
        paper: The key of :data:`PAPER_RESULTS` to print beside it.
        description: One line for the Markdown summary.
        family: ``'gat'`` (GATConv and its drop-ins) or ``'transformer'``
            (TransformerConv and its drop-ins, trained with a self-loop on
            every node: TransformerConv adds none, GATConv does).
    """
    name: str
    layer: str
    kernel: Optional[str] = None
    uses_p: bool = False
    uses_num_features: bool = False
    variational: bool = False
    fixed_p: Optional[float] = None
    paper: Optional[str] = None
    description: str = ''
    family: str = 'gat'

    @property
    def self_loops(self) -> bool:
        r"""Whether the model adds a self-loop to every node before its
        layers (the transformer family: TransformerConv adds none, while
        GATConv adds them itself)."""
        return self.family == 'transformer'


#: ``(family, layer)`` → ``(module, class name)`` of the layer, imported
#: when a model is built.
LAYERS: Dict[Tuple[str, str], Tuple[str, str]] = {
    ('gat', 'pyg'): ('torch_geometric.nn', 'GATConv'),
    ('gat', 'ik'): ('ikgat.nn', 'IKGATConv'),
    ('gat', 'mikan'): ('ikgat', 'MIKANConv'),
    ('transformer', 'pyg'): ('torch_geometric.nn', 'TransformerConv'),
    ('transformer', 'ik'): ('ikgat', 'IKTransformerConv'),
    ('transformer', 'mikan'): ('ikgat', 'MIKANTransformerConv'),
}


_MODEL_SPECS = [
    ModelSpec('gat', 'pyg', paper='GAT',
              description="PyG's GATConv (our own GAT run)"),
    ModelSpec('gat-rbf', 'ik', 'rbf', fixed_p=2.0, paper='GAT',
              description='IKGATConv(kernel="rbf", p=2): GAT written as '
              'kernel x magnitude, the same function as GATConv'),
    ModelSpec('rbf-only', 'ik', 'rbf_only',
              description='RBF similarity without the magnitude term'),
    ModelSpec('expsin', 'ik', 'expsin', uses_p=True,
              description='exp-sine-squared similarity, L^p magnitude'),
    ModelSpec('linear', 'ik', 'linear', uses_p=True,
              description='linear (elu+1 feature) similarity, L^p magnitude'),
    ModelSpec('ika', 'ik', 'rff', uses_p=True, uses_num_features=True,
              description='IKA: stationary random Fourier features (fixed)'),
    ModelSpec('ika-ns', 'ik', 'rff_ns', uses_p=True,
              uses_num_features=True,
              description='IKA: non-stationary random Fourier features'),
    ModelSpec('ikan-direct', 'ik', 'direct', uses_p=True,
              uses_num_features=True, paper='IKAN-direct',
              description='IKAN-direct: learned spectral points'),
    ModelSpec('ikan', 'ik', 'implicit', uses_p=True,
              uses_num_features=True, variational=True,
              description='IKAN: implicit spectral density, beta*KL'),
    ModelSpec('mikan', 'mikan', uses_p=True, uses_num_features=True,
              variational=True, paper='MIKAN',
              description='MIKAN: heads coupled by a Gaussian copula, '
              'beta*KL'),
    ModelSpec('transformer', 'pyg', family='transformer',
              description="PyG's TransformerConv (self-loops added)"),
    ModelSpec('ikt-rbf', 'ik', 'rbf', fixed_p=2.0, family='transformer',
              description='IKTransformerConv(kernel="rbf", p=2): '
              'TransformerConv written as kernel x magnitude'),
    ModelSpec('ikt-direct', 'ik', 'direct', uses_p=True,
              uses_num_features=True, family='transformer',
              description='IKTransformerConv, IKAN-direct: learned '
              'spectral points'),
    ModelSpec('ikt-implicit', 'ik', 'implicit', uses_p=True,
              uses_num_features=True, variational=True, family='transformer',
              description='IKTransformerConv, IKAN: implicit spectral '
              'density, beta*KL'),
    ModelSpec('ikt-mikan', 'mikan', uses_p=True, uses_num_features=True,
              variational=True, family='transformer',
              description='MIKANTransformerConv: implicit density, heads '
              'coupled by a Gaussian copula, beta*KL'),
]
#: The models table, by name, in the order of the Markdown tables.
MODELS: 'OrderedDict[str, ModelSpec]' = OrderedDict(
    (spec.name, spec) for spec in _MODEL_SPECS)

#: Public-split test accuracy (%) from the papers: ``(mean, std)``.
PAPER_RESULTS: Dict[str, Dict[str, Tuple[float, float]]] = {
    'GAT': {'Cora': (83.0, 0.7), 'CiteSeer': (72.5, 0.7),
            'PubMed': (79.0, 0.3)},
    'IKAN-direct': {'Cora': (83.3, 0.7), 'CiteSeer': (72.8, 1.0),
                    'PubMed': (79.2, 0.4)},
    'MIKAN': {'Cora': (83.4, 0.6), 'CiteSeer': (72.9, 0.8),
              'PubMed': (79.1, 0.6)},
}
PAPER_SOURCES = {'GAT': 'GAT paper, 100 runs',
                 'IKAN-direct': 'IKA paper (AAAI)',
                 'MIKAN': 'IKA paper (AAAI)'}

#: The GAT paper's protocol.  Cora and CiteSeer share it; PubMed uses a
#: larger learning rate and weight decay and 8 averaged output heads.
#: The training regime of a protocol: full batch unless ``batch_size``
#: seeds per step are given, then neighbour-sampled mini-batches with
#: ``fan_out`` in-neighbours per node and hop and layer-wise evaluation in
#: batches of ``eval_batch_size`` targets
#: (:func:`ikgat.training.sampling.minibatch_training`).
FULL_BATCH: Dict[str, Any] = dict(batch_size=None, fan_out=(10, 10),
                                  eval_batch_size=4096)
GAT_PROTOCOL: Dict[str, Any] = dict(lr=0.005, weight_decay=5e-4, hidden=8,
                                    heads=8, out_heads=1, dropout=0.6,
                                    epochs=1000, patience=100,
                                    **FULL_BATCH)
PROTOCOLS: Dict[str, Dict[str, Any]] = {
    'Cora': dict(GAT_PROTOCOL),
    'CiteSeer': dict(GAT_PROTOCOL),
    'PubMed': dict(GAT_PROTOCOL, lr=0.01, weight_decay=1e-3, out_heads=8),
}

#: Defaults of the kernel hyperparameters when neither a flag nor a search
#: result gives one: the authors' R = 64 and KL weight 0.1, and p = 2 (GAT).
DEFAULT_HYPERPARAMETERS: Dict[str, float] = dict(p=2.0, R=64, beta=0.1)

#: The search grid of the issue (validation accuracy only).
SEARCH_GRID: Dict[str, Tuple[float, ...]] = dict(p=(1.5, 2.0, 2.5, 3.0),
                                                 R=(32, 64),
                                                 beta=(0.01, 0.1))


def protocol_for(dataset: str, **overrides: Any) -> Dict[str, Any]:
    r"""The GAT protocol of :obj:`dataset` (Cora's for other names), with
    the non-:obj:`None` :obj:`overrides` applied."""
    protocol = dict(PROTOCOLS.get(canonical_dataset(dataset), GAT_PROTOCOL))
    unknown = set(overrides) - set(protocol)
    if unknown:
        raise ValueError(f'Unknown protocol settings {sorted(unknown)}; '
                         f'choose from {sorted(protocol)}')
    protocol.update({k: v for k, v in overrides.items() if v is not None})
    return protocol


def training_regime(protocol: Dict[str, Any], model: torch.nn.Module,
                    data, seed: int) -> Dict[str, Any]:
    r"""The keyword arguments of
    :func:`ikgat.training.train_node_classifier` for the regime of
    :obj:`protocol` (:data:`FULL_BATCH`): none for full batch, else the
    mini-batches and layer-wise inference of
    :func:`ikgat.training.sampling.minibatch_training`."""
    if protocol['batch_size'] is None:
        return {}
    batches, inference = minibatch_training(
        model, data, protocol['batch_size'], protocol['fan_out'],
        protocol['eval_batch_size'], seed)
    return dict(batches=batches, inference=inference)


def add_regime_arguments(parser) -> None:
    r"""The flags of the training regime (:data:`FULL_BATCH`), with the
    argument checks of ``ikgat train``."""
    parser.add_argument('--batch-size', type=positive_int, default=None,
                        help='seed nodes per mini-batch step with neighbour '
                        'sampling (default: full batch); give such runs a '
                        '--tag of their own')
    parser.add_argument('--fan-out', type=fan_out, nargs='+', default=None,
                        help='in-neighbours sampled per node at each hop, '
                        '-1 for all (default: 10 10)')
    parser.add_argument('--eval-batch-size', type=positive_int,
                        default=None, help='targets per step of the '
                        'layer-wise evaluation (default: 4096)')


def regime_overrides(args) -> Dict[str, Any]:
    r"""The protocol overrides of :func:`add_regime_arguments`' flags."""
    return dict(batch_size=args.batch_size,
                fan_out=None if args.fan_out is None else tuple(args.fan_out),
                eval_batch_size=args.eval_batch_size)


def canonical_dataset(name: str) -> str:
    r"""``'cora'`` → ``'Cora'`` etc.; other names are returned unchanged."""
    return PLANETOID_NAMES.get(str(name).lower(), str(name))


def check_models(names: Iterable[str]) -> List[str]:
    names = list(names)
    unknown = [name for name in names if name not in MODELS]
    if unknown:
        raise ValueError(f'Unknown models {unknown}; choose from '
                         f'{list(MODELS)}')
    return names


def model_hyperparameters(model: str, p: Optional[float] = None,
                          R: Optional[int] = None,
                          beta: Optional[float] = None
                          ) -> Dict[str, Optional[float]]:
    r"""The ``p``, ``R`` and ``beta`` that :obj:`model` uses: the given
    values, else :data:`DEFAULT_HYPERPARAMETERS`; :obj:`None` for those that
    do not apply to it (they are left blank in the results)."""
    spec = MODELS[model]
    if spec.fixed_p is not None:
        p_used: Optional[float] = spec.fixed_p
    elif spec.uses_p:
        p_used = float(DEFAULT_HYPERPARAMETERS['p'] if p is None else p)
    else:
        p_used = None
    R_used = (int(DEFAULT_HYPERPARAMETERS['R'] if R is None else R)
              if spec.uses_num_features else None)
    beta_used = (float(DEFAULT_HYPERPARAMETERS['beta'] if beta is None else
                       beta) if spec.variational else None)
    return dict(p=p_used, R=R_used, beta=beta_used)


def conv_factory(model: str, p: Optional[float] = None,
                 R: Optional[int] = None, node_path: str = 'eager'
                 ) -> Tuple[type, Dict[str, Any]]:
    r"""Return ``(conv_class, conv_kwargs)`` of :obj:`model` for
    :class:`ikgat.models.TwoLayerGAT`.  :obj:`node_path` is how the
    random-feature kernels evaluate their node-wise term (one of
    :data:`ikgat.kernels.random_features.NODE_PATHS`): it changes speed and
    memory, not the function computed."""
    spec = MODELS[check_models([model])[0]]
    module, name = LAYERS[(spec.family, spec.layer)]
    conv = getattr(importlib.import_module(module), name)
    if spec.layer == 'pyg':
        return conv, {}
    hyper = model_hyperparameters(model, p, R)
    kwargs: Dict[str, Any] = {}
    if hyper['p'] is not None:
        kwargs['p'] = hyper['p']
    if hyper['R'] is not None:
        kwargs['num_spectral_points'] = hyper['R']
        kwargs['kernel_kwargs'] = dict(
            node_path=check_node_path(model, node_path))
    if spec.layer == 'ik':
        kwargs['kernel'] = spec.kernel
    return conv, kwargs


def build_model(model: str, in_channels: int, out_channels: int,
                protocol: Dict[str, Any], p: Optional[float] = None,
                R: Optional[int] = None,
                node_path: str = 'eager') -> torch.nn.Module:
    r"""The GAT paper's two-layer architecture with :obj:`model`'s layer.

    ``gat`` and ``gat-rbf`` draw their initial parameters from the global
    RNG in the same order (IKGATConv creates GATConv's parameters in GATConv's
    order and the RBF kernel draws nothing), so after the same
    ``torch.manual_seed`` they start from identical weights: their
    equivalence is checked by training, not by copying a state dict; the
    same holds for ``transformer`` and ``ikt-rbf``.  The transformer family
    trains with a self-loop on every node (:attr:`ModelSpec.self_loops`).
    """
    from ikgat.models import TwoLayerGAT
    conv, conv_kwargs = conv_factory(model, p, R, node_path)
    return TwoLayerGAT(in_channels, protocol['hidden'], out_channels, conv,
                       heads=protocol['heads'],
                       out_heads=protocol['out_heads'],
                       dropout=protocol['dropout'], conv_kwargs=conv_kwargs,
                       self_loops=MODELS[model].self_loops)
