r"""IKA's stationary random-feature kernel (fixed spectral samples)."""
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from ikgat.kernels.arguments import (
    DeprecatedNumFeatures,
    check_num_spectral_points,
    check_positive,
    renamed_num_features,
)
from ikgat.kernels.base import Kernel, PairFeatureMap
from ikgat.kernels.docstrings import shared_docstring
from ikgat.kernels.draws import Draws
from ikgat.kernels.random_features import (
    DEFAULT_EPS,
    check_node_path,
    fourier_estimate,
    fourier_log_similarities,
    fourier_log_similarity,
    fourier_pair_feature_map,
)
from ikgat.ops.edge_fourier import edge_fourier_log_similarity


@shared_docstring
class RandomFourierKernel(DeprecatedNumFeatures, Kernel):
    r"""The stationary random-feature kernel of Implicit Kernel Attention

    .. math::
        \mathrm{sim}(x, y) = f(x, y)^2, \qquad
        f(x, y) = \frac{1}{R} \sum_{r=1}^R \cos\left(w_r^\top (x - y)\right),

    with fixed spectral points :math:`w_r \sim \mathcal{N}(0, I/(2l^2))`.
    By Bochner's theorem :math:`f \to \exp(-\|x - y\|^2/(4l^2))` as
    :math:`R \to \infty`, so :math:`\mathrm{sim} \to \exp(-\|x-y\|^2/(2l^2))`,
    the RBF kernel (IKA, Prop. 3).  The spectral points are a registered
    buffer (saved in the state dict) and are redrawn only on request.

    Args:
        {random_fourier_arguments}
    """
    #: Number of spectral point sets :math:`m` in the feature map.
    num_sets = 1
    #: Whether the spectral points are learned parameters (else buffers).
    learnable = False
    has_spectral_points = True
    can_redraw = True
    pairs_vectors = True
    has_pair_feature_map = True

    def __init__(self, heads: int, channels: int,
                 num_spectral_points: Optional[int] = None,
                 lengthscale: float = 1.0,
                 eps: float = DEFAULT_EPS, node_path: str = 'eager', *,
                 num_features: Optional[int] = None,
                 pairing: str = 'anchor'):
        super().__init__(heads, channels, pairing=pairing)
        owner = type(self).__name__
        num_spectral_points = renamed_num_features(
            owner, old_value=num_features, new_value=num_spectral_points)
        if num_spectral_points is None:
            num_spectral_points = self.default_num_spectral_points
        self.node_path = check_node_path(owner, node_path)
        self.num_spectral_points = check_num_spectral_points(
            owner, num_spectral_points)
        self.lengthscale = check_positive(owner, 'lengthscale', lengthscale)
        self.eps = check_positive(owner, 'eps', eps)
        self.set_names = ['spectral_points'] if self.num_sets == 1 else [
            f'spectral_points_{index + 1}' for index in range(self.num_sets)
        ]
        for name in self.set_names:
            points = torch.empty(heads, num_spectral_points, self.dimension)
            if self.learnable:
                self.register_parameter(name, torch.nn.Parameter(points))
            else:
                self.register_buffer(name, points)
        self.reset_parameters()

    @property
    def spectral_point_sets(self) -> List[Tensor]:
        r"""The spectral point sets, each of shape :math:`(H, R, D)`
        (:math:`D` = :attr:`dimension`)."""
        return [getattr(self, name) for name in self.set_names]

    def spectral_points_per_graph(self, draws: Optional[Draws] = None
                                  ) -> List[Tensor]:
        r"""The spectral point sets, each of shape :math:`(1, H, R, D)`
        (fixed or learned: :obj:`draws` is ignored)."""
        return [points.unsqueeze(0) for points in self.spectral_point_sets]

    def reset_parameters(self):
        self.redraw_spectral_points()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata,
                              strict, missing_keys, unexpected_keys,
                              error_msgs):
        # Saved points of another R: say which R to build (torch's own
        # message names only the shapes; 'direct''s default R changed):
        for name in self.set_names:
            saved = state_dict.get(prefix + name)
            if (isinstance(saved, Tensor) and saved.dim() == 3
                    and saved.size(1) != self.num_spectral_points):
                error_msgs.append(
                    f"{type(self).__name__}: {prefix + name} holds "
                    f"{saved.size(1)} spectral points per head, this kernel "
                    f"{self.num_spectral_points}; build the layer with "
                    f"num_spectral_points={saved.size(1)} (the default R of "
                    f"kernel='direct' is 16 since ikgat 0.2.0, 64 before)")
                break
        super()._load_from_state_dict(state_dict, prefix, local_metadata,
                                      strict, missing_keys, unexpected_keys,
                                      error_msgs)

    @torch.no_grad()
    def redraw_spectral_points(self,
                               generator: Optional[torch.Generator] = None):
        r"""Draw fresh :math:`w \sim \mathcal{N}(0, I/(2l^2))` in place
        (for learned points: re-initialise them from that distribution)."""
        std = 1.0 / (2.0**0.5 * self.lengthscale)
        for points in self.spectral_point_sets:
            points.normal_(0.0, std, generator=generator)

    def similarity(self, x: Tensor, y: Tensor, *,
                   draws: Optional[Draws] = None) -> Tensor:
        return fourier_estimate(x, y, self.spectral_point_sets)**2

    def pair_log_similarity(self, query: Tensor, key: Tensor, *,
                            draws: Optional[Draws] = None) -> Tensor:
        return (self.similarity(query, key) + self.eps).log()

    def edge_log_similarity(self, query: Tensor, key: Tensor, src: Tensor,
                            dst: Tensor,
                            edge_key: Optional[Tensor] = None, *,
                            draws: Optional[Draws] = None) -> Tensor:
        points = torch.stack([points.to(query.dtype)
                              for points in self.spectral_point_sets])
        return edge_fourier_log_similarity(query, key, points.unsqueeze(0),
                                           src, dst, self.eps, edge_key)

    def pair_feature_map(self, query: Tensor, key: Tensor, *,
                         draws: Optional[Draws] = None) -> PairFeatureMap:
        points = torch.stack([points.to(query.dtype)
                              for points in self.spectral_point_sets])
        return fourier_pair_feature_map(query, key, points, self.eps)

    def log_similarity(self, x: Tensor, anchor: Tensor, is_source: bool,
                       slopes: Tensor, *,
                       draws: Optional[Draws] = None) -> Tensor:
        # The spectral points follow the dtype of x: the layer evaluates
        # the node terms in float32 for a float16 or bfloat16 model.
        sets = [points.to(x.dtype) for points in self.spectral_point_sets]
        return fourier_log_similarity(x, anchor, is_source, slopes, sets,
                                      self.eps, node_path=self.node_path)

    def node_log_similarities(self, x_dst: Tensor, x_src: Tensor,
                              anchor: Tensor, slopes: Tensor,
                              reduced_source: bool, *,
                              draws: Optional[Draws] = None
                              ) -> Tuple[Tensor, Tensor]:
        # No node norm to reduce (gamma = 0): one call, one set of anchor
        # features for both sides.
        sets = [points.to(x_src.dtype) for points in self.spectral_point_sets]
        return fourier_log_similarities(x_dst, x_src, anchor, slopes, sets,
                                        self.eps, node_path=self.node_path)

    def extra_repr(self) -> str:
        return (f'{super().extra_repr()}, '
                f'num_spectral_points={self.num_spectral_points}, '
                f'lengthscale={self.lengthscale}')
