r"""The interface every similarity kernel follows, in its two pairings.

**Node against anchor** (:class:`ikgat.IKGATConv`, ``pairing='anchor'``).

Kernel attention pairs every node vector with the *anchor* :math:`c\,a`: the
attention vector :math:`a = [a_{dst} \,\|\, a_{src}] \in \mathbb{R}^{2C}` of a
head, scaled by the LeakyReLU slope :math:`c \in \{1, \text{negative_slope}\}`.
Target nodes enter as :math:`q_i = [x_i \,\|\, 0]` (``is_source=False``)
and source nodes as :math:`k_j = [0 \,\|\, x_j]` (``is_source=True``).  A
kernel therefore only
needs to evaluate :math:`\log \mathrm{sim}(\text{node vector}, c_t a)` once per
node, head and slope: this is the node-wise factorisation that keeps the edge
work at :math:`O(|\mathcal{E}| H)`.

**Node against node** (:class:`ikgat.IKTransformerConv`,
``pairing='vectors'``).  Scaled dot-product attention pairs a query
:math:`q_i \in \mathbb{R}^C` with a key :math:`k_j` (or :math:`k_j +
e_{ij}` with edge features), so the kernel is evaluated once per edge and
head: :meth:`Kernel.edge_log_similarity`, built on
:meth:`Kernel.pair_log_similarity`.  The vectors have :math:`C`
coordinates, not :math:`2C`, so a kernel is built for one pairing
(:attr:`Kernel.dimension`); spectral points, their density and the copula
are the same code in both.

**The protocol of each pairing.**  What a kernel implements, and what the
layers call:

.. list-table::
   :header-rows: 1

   * - Pairing
     - A kernel implements
     - It may override
     - The layers call
   * - ``'anchor'``
     - :meth:`~Kernel.similarity` (the definition on :math:`2C` vectors)
       and :meth:`~Kernel.log_similarity` (node-wise against the scaled
       anchors)
     - :attr:`~Kernel.node_norm_coefficient` with
       :meth:`~Kernel.reduced_log_similarity`;
       :meth:`~Kernel.node_log_similarities` (to share work between the
       two sides)
     - :meth:`~Kernel.node_log_similarities`
   * - ``'vectors'`` (declares :attr:`~Kernel.pairs_vectors`)
     - :meth:`~Kernel.pair_log_similarity` (query against key), besides
       the two above
     - :meth:`~Kernel.reduced_pair_log_similarity`;
       :meth:`~Kernel.edge_log_similarity` (no per-edge features);
       :meth:`~Kernel.pair_feature_map` (declares
       :attr:`~Kernel.has_pair_feature_map`)
     - :meth:`~Kernel.edge_log_similarity`, or
       :meth:`~Kernel.pair_feature_map` for the fused attention

**Draws.**  A :attr:`~Kernel.stochastic` kernel draws its spectral points
per graph with :meth:`Kernel.draw`, which returns a
:class:`~ikgat.kernels.draws.Draws`; the layer holds it for the step and
passes it as ``draws=`` to every entry point above.  Every entry point
takes ``draws`` (keyword only); the deterministic kernels draw nothing
(:obj:`None`) and ignore it.  Without ``draws``, a stochastic kernel
evaluates at :attr:`~Kernel.last_draws`, the draws of its last
:meth:`~Kernel.draw` (what :meth:`~Kernel.kl_divergence` and
:meth:`~Kernel.spectral_points_per_graph` report by default).
"""
import functools
import inspect
import warnings
from typing import Any, Callable, List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from ikgat.deprecation import moved_names
from ikgat.kernels.anchor import (  # noqa: F401 (also importable here)
    pad_node_vectors,
    scaled_anchor_distance_sq,
    scaled_anchor_dot,
    split_anchor,
)
from ikgat.kernels.draws import Draws

#: The two ways a kernel pairs vectors: a node with the scaled attention
#: vector (``'anchor'``, GAT; vectors of :math:`2C` coordinates) or a query
#: with a key (``'vectors'``, dot-product attention; :math:`C` coordinates).
PAIRINGS = ('anchor', 'vectors')

#: The similarity entry points of :class:`Kernel`; each takes ``draws``
#: (keyword only).
ENTRY_POINTS = ('similarity', 'log_similarity', 'reduced_log_similarity',
                'node_log_similarities', 'pair_log_similarity',
                'reduced_pair_log_similarity', 'edge_log_similarity',
                'pair_feature_map')


class PairFeatureMap(NamedTuple):
    r"""The node tables of a kernel whose pairwise logit is a function of one
    dot product, from :meth:`Kernel.pair_feature_map`:
    :meth:`~Kernel.reduced_pair_log_similarity` of :math:`q_i` and
    :math:`k_j` is :math:`\lambda(c\, U_i^\top V_j)`, with
    :math:`\lambda(t) = t` (``link='identity'``) or :math:`\log(t^2 +
    \epsilon)` (``link='log_square'``), the links of
    :mod:`ikgat.ops.transformer_attention`."""
    query: Tensor  #: :math:`U`, :math:`(N_t, H', D)`
    key: Tensor  #: :math:`V`, :math:`(N_s, H', D)`
    link: str  #: ``'identity'`` or ``'log_square'``
    scale: float  #: :math:`c`
    eps: float  #: :math:`\epsilon` of ``'log_square'``
    #: Stacked sets of spectral points :math:`(m, H', R, D)`, or
    #: :obj:`None`: with points, :obj:`query` and :obj:`key` are the vectors
    #: themselves and the tables are their random features
    #: :math:`U = \phi(q)`, :math:`V = \phi(k)`
    #: (:func:`~ikgat.kernels.random_features.fourier_features`), which the
    #: fused attention computes inside its kernels instead of gathering them.
    points: Optional[Tensor] = None


class Kernel(torch.nn.Module):
    r"""Base class of the similarity kernels :math:`\mathrm{sim}(x, y) \ge 0`.

    Subclasses implement :meth:`similarity` (on full :math:`2C` vectors, the
    reference definition) and :meth:`log_similarity` (node-wise against the
    scaled anchors); the layers of the ``'anchor'`` pairing call
    :meth:`node_log_similarities`.

    Kernels that declare :attr:`pairs_vectors` also implement
    :meth:`pair_log_similarity` (query against key) and may override
    :meth:`edge_log_similarity` to evaluate it over a graph's edges without
    per-edge feature tensors; the layers of the ``'vectors'`` pairing call
    :meth:`edge_log_similarity` (or :meth:`pair_feature_map`).  The module
    docstring tabulates both protocols.

    A :attr:`stochastic` kernel draws its spectral points per forward pass
    with :meth:`draw`; every entry point takes those draws as ``draws=``.

    Args:
        heads (int): Number of attention heads :math:`H`.
        channels (int): Channels per head :math:`C`.
        pairing (str, optional): One of :data:`PAIRINGS`; vectors have
            :math:`2C` coordinates for ``'anchor'`` and :math:`C` for
            ``'vectors'`` (:attr:`dimension`). (default: :obj:`'anchor'`)
    """
    # Capabilities, declared by each kernel class (the layers, the
    # inspection tools and the tests read these flags; nothing probes for
    # methods):

    #: Whether the layer multiplies the similarity by the magnitude term.
    uses_magnitude: bool = True
    #: Whether :meth:`draw` draws random spectral points per graph
    #: (variational kernels), which the similarities then take as
    #: ``draws=``; such kernels also define ``num_samples`` (the draws
    #: averaged in evaluation).
    stochastic: bool = False
    #: Whether the kernel is a random-feature estimate with spectral points,
    #: returned by :meth:`spectral_points_per_graph`; such kernels take the
    #: number :math:`R` of spectral points per head as
    #: ``num_spectral_points``, the node-wise evaluation as ``node_path``,
    #: and have a ``lengthscale``.
    has_spectral_points: bool = False
    #: :math:`R` of a kernel with spectral points built without
    #: ``num_spectral_points``.
    default_num_spectral_points: int = 64
    #: Whether :meth:`redraw_spectral_points` redraws them in place.
    can_redraw: bool = False
    #: Whether :meth:`kl_divergence` is the KL term of a variational kernel.
    has_kl: bool = False
    #: The :math:`\epsilon` inside :math:`\log(\mathrm{sim} + \epsilon)`
    #: of :meth:`log_similarity` (kernels that can reach zero set it).
    eps: float = 0.0
    #: Whether the kernel pairs two vectors (:meth:`pair_log_similarity`),
    #: so that :class:`ikgat.IKTransformerConv` can use it.
    pairs_vectors: bool = False
    #: Whether :meth:`pair_feature_map` gives node tables whose dot product
    #: makes the pairwise logit (the fused attention of
    #: :class:`ikgat.IKTransformerConv`).
    has_pair_feature_map: bool = False

    def __init_subclass__(cls, **kwargs: Any):
        # A kernel written before the entry points took draws= keeps
        # working (it is deterministic: it gets draws=None), with a warning:
        super().__init_subclass__(**kwargs)
        for name in ENTRY_POINTS:
            method = cls.__dict__.get(name)
            if (callable(method) and 'draws'
                    not in inspect.signature(method).parameters):
                warnings.warn(
                    f'{cls.__name__}.{name} takes no draws= argument; '
                    f'every similarity entry point of a Kernel takes '
                    f'draws: Optional[Draws] = None (keyword only); this '
                    f'form is deprecated', DeprecationWarning, stacklevel=2)
                setattr(cls, name, _ignoring_draws(method))

    def __init__(self, heads: int, channels: int, *,
                 pairing: str = 'anchor'):
        super().__init__()
        for name, value in (('heads', heads), ('channels', channels)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{type(self).__name__}: '{name}' must be a "
                                 f"positive integer (got {value!r})")
        if pairing not in PAIRINGS:
            raise ValueError(f"{type(self).__name__}: unknown 'pairing' "
                             f"{pairing!r}; choose one of {list(PAIRINGS)}")
        if pairing == 'vectors' and not self.pairs_vectors:
            raise ValueError(f"{type(self).__name__} does not pair two "
                             f"vectors (pairs_vectors is False); implement "
                             f"pair_log_similarity or use a kernel that "
                             f"does")
        self.heads = heads
        self.channels = channels
        self.pairing = pairing

    @property
    def dimension(self) -> int:
        r"""The number of coordinates of the vectors the kernel pairs:
        :math:`2C` against the anchor, :math:`C` query against key."""
        return 2 * self.channels if self.pairing == 'anchor' else self.channels

    def reset_parameters(self):
        r"""Re-initialise learnable parameters or random spectral points."""

    #: The draws of the last :meth:`draw` (:obj:`None` before the first,
    #: and always for a kernel that is not :attr:`stochastic`): what
    #: :meth:`kl_divergence` and :meth:`spectral_points_per_graph` report
    #: of the last forward pass, and where the entry points evaluate when
    #: no ``draws`` are given.  The layers pass their draws instead.
    last_draws: Optional[Draws] = None

    def draw(self, x_src: Tensor, x_dst: Optional[Tensor] = None,
             batch_src: Optional[Tensor] = None,
             batch_dst: Optional[Tensor] = None, num_graphs: int = 1,
             sample: bool = False, num_draws: int = 1, *,
             generator: Optional[torch.Generator] = None,
             summary: Optional[Tensor] = None) -> Optional[Draws]:
        r"""Draw the spectral points of one forward pass from the source and
        target projections :math:`(N, H, C)` and their graph indices, graph
        by graph, and return them for the ``draws=`` of the entry points
        (:obj:`num_draws` samples stacked along the heads, for
        :meth:`node_log_similarities` of projections repeated as many times
        along the heads); :obj:`summary` replaces the summary of the nodes
        given (the full graph's).  :obj:`None` for a kernel that is not
        :attr:`stochastic` (the default): it draws nothing."""
        return None

    def prepare(self, x_src: Tensor, x_dst: Optional[Tensor],
                batch_src: Optional[Tensor], batch_dst: Optional[Tensor],
                num_graphs: int, sample: bool, num_draws: int = 1,
                generator: Optional[torch.Generator] = None) -> None:
        r"""Deprecated: :meth:`draw`, whose draws the entry points then use
        by default (:attr:`last_draws`); pass them as ``draws=`` instead."""
        self._deprecated_prepare(x_src, x_dst, batch_src, batch_dst,
                                 num_graphs, sample, num_draws,
                                 generator=generator)

    def _deprecated_prepare(self, *args: Any, **kwargs: Any) -> None:
        r"""What :meth:`prepare` does, whatever order a kernel's
        :meth:`prepare` takes its arguments in (the implicit kernel's took
        :obj:`generator` before :obj:`num_draws`): warn, at the line that
        called :meth:`prepare`, and :meth:`draw` with :obj:`args` and
        :obj:`kwargs`."""
        warnings.warn(f'{type(self).__name__}.prepare is deprecated; use '
                      f'draws = kernel.draw(...) and pass draws= to the '
                      f'similarities', DeprecationWarning, stacklevel=3)
        self.draw(*args, **kwargs)

    def _given_draws(self, draws: Optional[Draws]) -> Draws:
        r""":obj:`draws`, else :attr:`last_draws`; raises if neither."""
        if draws is None:
            draws = self.last_draws
        if draws is None:
            raise RuntimeError('No spectral points yet: run a forward pass')
        return draws

    def spectral_points_per_graph(self, draws: Optional[Draws] = None
                                  ) -> List[Tensor]:
        r"""The spectral point sets, each of shape :math:`(G, H, R, D)`:
        for a :attr:`stochastic` kernel those of :obj:`draws` per graph
        (default: of the last forward pass, :attr:`last_draws`), the
        fixed or learned ones (:math:`G = 1`) otherwise.  Only for kernels
        with :attr:`has_spectral_points`."""
        raise TypeError(f"The kernel {type(self).__name__} has no spectral "
                        f"points (has_spectral_points is False)")

    def redraw_spectral_points(self,
                               generator: Optional[torch.Generator] = None):
        r"""Redraw the spectral points in place.  Only for kernels with
        :attr:`can_redraw`."""
        raise TypeError(f"The kernel {type(self).__name__} has no spectral "
                        f"points to redraw (can_redraw is False)")

    def kl_divergence(self, draws: Optional[Draws] = None) -> Tensor:
        r"""The KL divergence of :obj:`draws` (default: of the last forward
        pass, :attr:`last_draws`) to the prior.  Only for kernels with
        :attr:`has_kl`."""
        raise TypeError(f"The kernel {type(self).__name__} has no KL term "
                        f"(has_kl is False)")

    def similarity(self, x: Tensor, y: Tensor, *,
                   draws: Optional[Draws] = None) -> Tensor:
        r"""Evaluate :math:`\mathrm{sim}(x, y)` row by row.

        Args:
            x (torch.Tensor): Vectors of shape :math:`(*, H, 2C)`.
            y (torch.Tensor): Vectors broadcastable to :obj:`x`.
            draws (Draws, optional): The draws of a :attr:`stochastic`
                kernel (:meth:`draw`; default :attr:`last_draws`), their
                first graph's; ignored by the other kernels.

        Returns:
            torch.Tensor of shape :math:`(*, H)`.
        """
        raise NotImplementedError

    def log_similarity(self, x: Tensor, anchor: Tensor, is_source: bool,
                       slopes: Tensor, *,
                       draws: Optional[Draws] = None) -> Tensor:
        r"""Evaluate :math:`\log\mathrm{sim}(v_n, c_t a_h)` node-wise.

        Args:
            x (torch.Tensor): Node projections of shape :math:`(N, H, C)`.
            anchor (torch.Tensor): Attention vectors
                :math:`a_h = [a_{dst} \| a_{src}]` of shape :math:`(H, 2C)`.
            is_source (bool): :obj:`False` if :math:`v_n = [x_n \| 0]`
                (targets), :obj:`True` if :math:`v_n = [0 \| x_n]`
                (sources).
            slopes (torch.Tensor): The scales :math:`c_t`, shape :math:`(T,)`.
            draws (Draws, optional): The draws of a :attr:`stochastic`
                kernel (:meth:`draw`; default :attr:`last_draws`); ignored
                by the other kernels.

        Returns:
            torch.Tensor of shape :math:`(N, H, T)`.
        """
        raise NotImplementedError

    @property
    def node_norm_coefficient(self) -> float:
        r"""The coefficient :math:`\gamma` of the node's own squared norm in
        :math:`\log\mathrm{sim}(v_n, c_t a) = r_{n,t} + \gamma\|v_n\|_2^2`
        (see :meth:`reduced_log_similarity`); :obj:`0` unless a kernel
        declares otherwise (the RBF kernel: :math:`-1/(2l^2)`)."""
        return 0.0

    def reduced_log_similarity(self, x: Tensor, anchor: Tensor,
                               is_source: bool, slopes: Tensor, *,
                               draws: Optional[Draws] = None) -> Tensor:
        r"""Evaluate :math:`r_{n,h,t} = \log\mathrm{sim}(v_n, c_t a_h) -
        \gamma\|v_n\|_2^2` node-wise, :math:`\gamma` =
        :attr:`node_norm_coefficient`; same arguments and shape as
        :meth:`log_similarity`, which it equals for :math:`\gamma = 0` (the
        default).

        A kernel whose log-similarity holds :math:`\gamma\|v_n\|^2` returns
        the rest here, so that the layer adds that term exactly once: it
        cancels against the magnitude :math:`\tfrac12\|v_n\|_2^2` (RBF,
        :math:`l = 1`, :math:`p = 2`), and on the target side it is constant
        over a softmax group and is left out.  Adding and then subtracting
        two huge squared norms would lose every digit of the logit.
        """
        return self.log_similarity(x, anchor, is_source, slopes,
                                   draws=draws)

    def node_log_similarities(self, x_dst: Tensor, x_src: Tensor,
                              anchor: Tensor, slopes: Tensor,
                              reduced_source: bool, *,
                              draws: Optional[Draws] = None
                              ) -> Tuple[Tensor, Tensor]:
        r"""Both sides of the attention in one call, the entry point of the
        ``'anchor'`` pairing: the targets'
        :meth:`reduced_log_similarity` (:obj:`x_dst`, ``is_source=False``)
        and the sources' :meth:`reduced_log_similarity` if
        :obj:`reduced_source`, else their :meth:`log_similarity`
        (:obj:`x_src`, ``is_source=True``).  A kernel overrides it to share
        work between the two sides (the random-feature kernels compute their
        anchor features once).  With :obj:`draws` of :math:`S` draws
        stacked (:meth:`draw`), the projections and anchors are repeated
        :math:`S` times along the heads."""
        source = (self.reduced_log_similarity if reduced_source else
                  self.log_similarity)
        return (self.reduced_log_similarity(x_dst, anchor, False, slopes,
                                            draws=draws),
                source(x_src, anchor, True, slopes, draws=draws))

    def pair_log_similarity(self, query: Tensor, key: Tensor, *,
                            draws: Optional[Draws] = None) -> Tensor:
        r"""Evaluate :math:`\log\mathrm{sim}(q, k)` row by row, query
        against key (``pairing='vectors'``).

        Args:
            query (torch.Tensor): Vectors of shape :math:`(*, H, C)`.
            key (torch.Tensor): Vectors of the same shape.
            draws (Draws, optional): As for :meth:`similarity`.

        Returns:
            torch.Tensor of shape :math:`(*, H)`.
        """
        raise TypeError(f"The kernel {type(self).__name__} does not pair two "
                        f"vectors (pairs_vectors is False)")

    def reduced_pair_log_similarity(self, query: Tensor, key: Tensor, *,
                                    draws: Optional[Draws] = None
                                    ) -> Tensor:
        r""":math:`\log\mathrm{sim}(q, k) - \gamma(\|q\|_2^2 +
        \|k\|_2^2)`, :math:`\gamma` = :attr:`node_norm_coefficient`: the
        pairwise counterpart of :meth:`reduced_log_similarity` (for the RBF
        kernel :math:`q^\top k / l^2`, so that the layer never adds and
        subtracts huge squared norms)."""
        return self.pair_log_similarity(query, key, draws=draws)

    def edge_log_similarity(self, query: Tensor, key: Tensor, src: Tensor,
                            dst: Tensor,
                            edge_key: Optional[Tensor] = None, *,
                            draws: Optional[Draws] = None) -> Tensor:
        r"""The entry point of the ``'vectors'`` pairing: return
        :meth:`reduced_pair_log_similarity` of every edge
        :math:`j \to i`, between :math:`q_i` and :math:`k_j` (plus
        :math:`e_{ij}`), of shape :math:`(E, H)`.

        Args:
            query (torch.Tensor): Target vectors :math:`(N_t, H, C)`.
            key (torch.Tensor): Source vectors :math:`(N_s, H, C)`.
            src (torch.Tensor): The source :math:`j` of each edge, :math:`(E,)`.
            dst (torch.Tensor): The target :math:`i` of each edge, :math:`(E,)`.
            edge_key (torch.Tensor, optional): Per-edge terms
                :math:`e_{ij}` added to the keys, :math:`(E, H, C)`.
            draws (Draws, optional): The draws of a :attr:`stochastic`
                kernel (:meth:`draw`; default :attr:`last_draws`), each
                graph's for its own edges; ignored by the other kernels.

        By default the vectors are gathered per edge (:math:`E \times H
        \times C`, as dot-product attention itself); the random-feature
        kernels override it so that no :math:`E \times H \times 2R`
        features are formed.
        """
        key_j = key.index_select(0, src)
        if edge_key is not None:
            key_j = key_j + edge_key
        return self.reduced_pair_log_similarity(query.index_select(0, dst),
                                                key_j, draws=draws)

    def pair_feature_map(self, query: Tensor, key: Tensor, *,
                         draws: Optional[Draws] = None) -> PairFeatureMap:
        r"""The node tables :math:`U` of the queries :math:`(N_t, H, C)` and
        :math:`V` of the keys :math:`(N_s, H, C)`, with
        :meth:`reduced_pair_log_similarity` :math:`= \lambda(c\, U_i^\top
        V_j)` (see :class:`PairFeatureMap`).  A stochastic kernel gives
        every draw of :obj:`draws` (:meth:`draw`; default
        :attr:`last_draws`), stacked along the heads (:math:`H' = S H`,
        draw after draw).  Only for kernels with
        :attr:`has_pair_feature_map`."""
        raise TypeError(f"The kernel {type(self).__name__} has no pair "
                        f"feature map (has_pair_feature_map is False)")

    def extra_repr(self) -> str:
        pairing = '' if self.pairing == 'anchor' else ", pairing='vectors'"
        return f'heads={self.heads}, channels={self.channels}{pairing}'


def _ignoring_draws(method: Callable[..., Any]) -> Callable[..., Any]:
    r""":obj:`method`, an entry point written without ``draws``, taking
    ``draws=None`` (a deterministic kernel's)."""
    @functools.wraps(method)
    def entry_point(self, *args: Any, draws: Optional[Draws] = None,
                    **kwargs: Any) -> Any:
        if draws is not None:
            raise TypeError(f'{type(self).__name__}.{method.__name__} '
                            f'takes no draws')
        return method(self, *args, **kwargs)
    return entry_point


# The argument checks, importable from here before they had their module
# (ikgat.kernels.arguments), for one release:
__getattr__ = moved_names(__name__, {
    name: ('ikgat.kernels.arguments', name) for name in (
        'check_positive', 'check_num_spectral_points',
        'DeprecatedNumFeatures')})
