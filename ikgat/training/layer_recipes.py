r"""The layers that ``ikgat train --layer`` trains, in one recipe: for each,
its class, the command-line options that mean something for it (with their
defaults), its constructor arguments, its extra loss terms and how its
evaluation averages draws.  Adding a layer to the command line is one entry
of :data:`TRAIN_LAYERS`.

The graph transformer layers (``transformer``:
:class:`~ikgat.IKTransformerConv`; ``mikan-transformer``:
:class:`~ikgat.MIKANTransformerConv`; their baseline ``transformerconv``,
PyG's ``TransformerConv``) sit beside their GAT-form counterparts
(``ikgat``, ``mikan``, ``gat``) and train in the same recipe, the
TransformerConv layer in place of the GAT layer and one self-loop per node
added to the graph (GATConv adds them inside); ``transformer`` takes the
kernels that pair two vectors only (:func:`ikgat.kernels.vector_kernels`).

Every layer trains in the same recipe (:class:`~ikgat.models.TwoLayerGAT`,
seeds, :func:`~ikgat.training.variational_adam`, early stopping on the
validation accuracy).  The stochastic layers select their epoch on a
deterministic evaluation (MIKANConv at the mean of its spectral density,
KEPGATConv at its posterior mean), then the selected model is evaluated
once with :obj:`num_samples` draws averaged, which gives the reported test
accuracy and expected calibration error (:func:`ikgat.metrics.ece`).
"""
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import torch
from torch import Tensor

from ikgat.kernels import random_feature_kernels, vector_kernels
from ikgat.kernels.random_features import DEFAULT_EPS

#: The command-line flag of each layer option (argparse's ``dest`` names).
LAYER_OPTIONS = {
    'kernel': '--kernel',
    'p': '--p',
    'num_spectral_points': '--num-spectral-points',
    'num_samples': '--num-samples',
    'kl_weight': '--kl-weight',
    'ksvd_weight': '--ksvd-weight',
    'kernel_eps': '--kernel-eps',
}


@dataclass(frozen=True)
class TrainLayer:
    r"""One layer of ``ikgat train --layer``.

    Args:
        class_name: The class, as :func:`ikgat.training.checkpoints.layer_classes`
            names it.
        help: What the layer is, for ``--help``.
        defaults: The layer options (keys of :data:`LAYER_OPTIONS`) that
            the layer takes, with their defaults; the others are refused.
        conv_kwargs: The constructor arguments from the resolved options.
        set_draws: Sets the draws that the layers of a model average in
            evaluation (:obj:`None`: a deterministic layer).
        mean_draws: The value of :obj:`set_draws` that makes the
            evaluation deterministic (the epoch selection's), and the
            least ``num_samples`` the layer takes.
        kernel_terms: Whether the layer's attention has similarity and
            magnitude terms (logged into checkpoints for ``ikgat plot
            terms``).
        kernels: The ``--kernel`` values the layer takes (:obj:`None`:
            every kernel of :data:`ikgat.kernels.KERNELS`).
        self_loops: Whether the model gives the graph one self-loop per
            node before the layers (the transformer layers, which add
            none themselves, as GATConv does).
    """
    class_name: str
    help: str
    defaults: Dict[str, Any]
    conv_kwargs: Callable[[Dict[str, Any]], Dict[str, Any]]
    set_draws: Optional[Callable[[torch.nn.Module, int], None]] = None
    mean_draws: int = 1
    kernel_terms: bool = False
    kernels: Optional[Tuple[str, ...]] = None
    self_loops: bool = False

    @property
    def stochastic(self) -> bool:
        return self.set_draws is not None

    def conv(self) -> type:
        r"""The layer class."""
        from ikgat.training.checkpoints import layer_classes
        return layer_classes()[self.class_name]

    def describe(self, settings: Dict[str, Any]) -> str:
        r"""The layer and its settings, e.g. ``IKGATConv(kernel=direct,
        p=2)``."""
        shown = [f'{name}={_short(settings[name])}'
                 for name in ('kernel', 'p', 'num_spectral_points')
                 if name in self.defaults]
        return self.class_name + (f'({", ".join(shown)})' if shown else '')

    def extra_loss(self, model: torch.nn.Module, settings: Dict[str, Any],
                   num_train: int) -> Optional[Callable[[], Tensor]]:
        r"""The terms added to the training NLL after each forward pass:
        :math:`\beta\,\mathrm{KL}/n` with :math:`\beta` = ``kl_weight`` and,
        for KEPGATConv, :math:`\eta\,L_{ksvd}` with :math:`\eta` =
        ``ksvd_weight``."""
        from ikgat.nn.losses import kl_divergence, ksvd_loss
        beta = settings.get('kl_weight', 0.0)
        eta = settings.get('ksvd_weight', 0.0)
        if not beta and not eta:
            return None

        def loss() -> Tensor:
            total = beta * kl_divergence(model) / num_train
            return total + eta * ksvd_loss(model) if eta else total
        return loss


def resolve_settings(name: str, given: Dict[str, Any]) -> Dict[str, Any]:
    r"""The options of layer :obj:`name`: its defaults updated with
    :obj:`given` (the options set on the command line, ``dest -> value``).
    Raises a :class:`ValueError` naming the option and the layers that take
    it when one does not apply to the layer."""
    layer = TRAIN_LAYERS[name]
    for option in given:
        if option not in layer.defaults:
            takers = [other for other, entry in TRAIN_LAYERS.items()
                      if option in entry.defaults]
            takes = ', '.join(LAYER_OPTIONS[o] for o in layer.defaults)
            raise ValueError(
                f'{LAYER_OPTIONS[option]} does not apply to --layer {name} '
                f'(it is an option of --layer {" or ".join(takers)}); --layer '
                f'{name} takes ' + (takes or 'none of the layer options'))
    kernel = given.get('kernel')
    if (kernel is not None and layer.kernels is not None
            and kernel not in layer.kernels):
        raise ValueError(
            f'--kernel {kernel} does not apply to --layer {name} (its '
            f'kernel must pair two vectors); choose one of '
            f'{", ".join(layer.kernels)}')
    if 'kernel_eps' in given and not _floored(_kernel_of(layer, given)):
        raise ValueError(
            f'--kernel-eps applies to the random-feature kernels '
            f'({", ".join(random_feature_kernels())}); --kernel {kernel} '
            f'has no floor: leave --kernel-eps out')
    draws = given.get('num_samples')
    if draws is not None and draws < layer.mean_draws:
        raise ValueError(f'--num-samples {draws} is too few for --layer '
                         f'{name}: give at least {layer.mean_draws}')
    return {**layer.defaults, **given}


def without_unused_floor(name: str, options: Dict[str, Any]
                         ) -> Dict[str, Any]:
    r""":obj:`options` of layer :obj:`name` without ``kernel_eps`` when
    their kernel has no floor (a study that searches the kernel and the
    floor together samples both)."""
    if 'kernel_eps' in options and not _floored(
            _kernel_of(TRAIN_LAYERS[name], options)):
        return {key: value for key, value in options.items()
                if key != 'kernel_eps'}
    return options


def evaluate_draws(model: torch.nn.Module, layer: TrainLayer, draws: int,
                   forward: Callable[[], Tensor]) -> Tensor:
    r"""The logits of :obj:`forward` in evaluation mode with the layers
    averaging :obj:`draws` draws (then back to the deterministic
    evaluation)."""
    assert layer.set_draws is not None
    model.eval()
    layer.set_draws(model, draws)
    try:
        with torch.no_grad():
            return forward()
    finally:
        layer.set_draws(model, layer.mean_draws)


def _short(value: Any) -> str:
    return f'{value:g}' if isinstance(value, float) else str(value)


def _kernel_of(layer: TrainLayer, options: Dict[str, Any]) -> str:
    # The kernel the options give the layer; MIKAN's layers name none:
    # theirs is 'implicit'.
    return options.get('kernel', layer.defaults.get('kernel', 'implicit'))


def _floored(kernel: str) -> bool:
    return kernel in random_feature_kernels()


def _kernel_arguments(settings: Dict[str, Any],
                      names: Tuple[str, ...]) -> Dict[str, Any]:
    # The options in names, and the floor of a random-feature kernel, which
    # a checkpoint then records (its default has changed once).
    arguments = _pick(settings, names)
    if _floored(settings.get('kernel', 'implicit')):
        arguments['kernel_kwargs'] = dict(eps=settings['kernel_eps'])
    return arguments


def _set_mikan_draws(model: torch.nn.Module, draws: int) -> None:
    from ikgat.nn import MIKANConv, MIKANTransformerConv
    for module in model.modules():
        if isinstance(module, (MIKANConv, MIKANTransformerConv)):
            module.kernel.num_samples = draws


def _set_kep_draws(model: torch.nn.Module, draws: int) -> None:
    from ikgat.nn import KEPGATConv
    for module in model.modules():
        if isinstance(module, KEPGATConv):
            module.num_samples = draws


def _pick(settings: Dict[str, Any],
          names: Tuple[str, ...]) -> Dict[str, Any]:
    return {name: settings[name] for name in names}


#: The layers of ``ikgat train --layer``, by command-line name.
TRAIN_LAYERS: Dict[str, TrainLayer] = {
    'gat': TrainLayer(
        'GATConv', "PyG's GATConv, the baseline", {},
        lambda settings: {}),
    'ikgat': TrainLayer(
        'IKGATConv', 'IKGATConv with a kernel of ikgat.kernels',
        dict(kernel='direct', p=2.0, num_spectral_points=64,
             kernel_eps=DEFAULT_EPS),
        lambda settings: _kernel_arguments(
            settings, ('kernel', 'p', 'num_spectral_points')),
        kernel_terms=True),
    'mikan': TrainLayer(
        'MIKANConv', 'MIKANConv, implicit kernels tied by a copula',
        dict(p=2.0, num_spectral_points=64, num_samples=10, kl_weight=0.1,
             kernel_eps=DEFAULT_EPS),
        lambda settings: _kernel_arguments(settings,
                                           ('p', 'num_spectral_points')),
        set_draws=_set_mikan_draws, mean_draws=1, kernel_terms=True),
    'kep': TrainLayer(
        'KEPGATConv', 'KEPGATConv, a sparse variational GP pair',
        dict(num_samples=10, kl_weight=0.01, ksvd_weight=0.1),
        lambda settings: dict(num_samples=0),
        set_draws=_set_kep_draws, mean_draws=0),
    'transformer': TrainLayer(
        'IKTransformerConv', 'IKTransformerConv, TransformerConv\'s '
        'attention with a kernel that pairs query and key',
        dict(kernel='direct', p=2.0, num_spectral_points=64,
             kernel_eps=DEFAULT_EPS),
        lambda settings: _kernel_arguments(
            settings, ('kernel', 'p', 'num_spectral_points')),
        kernel_terms=True, kernels=tuple(vector_kernels()),
        self_loops=True),
    'mikan-transformer': TrainLayer(
        'MIKANTransformerConv', 'MIKANTransformerConv, the transformer '
        'form of mikan',
        dict(p=2.0, num_spectral_points=64, num_samples=10, kl_weight=0.1,
             kernel_eps=DEFAULT_EPS),
        lambda settings: _kernel_arguments(settings,
                                           ('p', 'num_spectral_points')),
        set_draws=_set_mikan_draws, mean_draws=1, kernel_terms=True,
        self_loops=True),
    'transformerconv': TrainLayer(
        'TransformerConv', "PyG's TransformerConv, the transformer layers' "
        'baseline', {}, lambda settings: {}, self_loops=True),
}
