r"""IKA's stationary random-feature kernel (fixed spectral samples)."""
from typing import List, Optional

import torch
from torch import Tensor

from ikgat.kernels.base import Kernel, check_positive
from ikgat.kernels.random_features import (
    check_node_path,
    fourier_estimate,
    fourier_log_similarity,
)


def check_num_features(owner: str, num_features: int) -> int:
    if (isinstance(num_features, bool) or not isinstance(num_features, int)
            or num_features < 1):
        raise ValueError(f"{owner}: 'num_features' (the number R of spectral "
                         f"points per head) must be a positive integer "
                         f"(got {num_features!r})")
    return num_features


class RandomFourierKernel(Kernel):
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
        heads (int): Number of heads :math:`H`.
        channels (int): Channels per head :math:`C`.
        num_features (int, optional): :math:`R`. (default: :obj:`64`)
        lengthscale (float, optional): :math:`l`. (default: :obj:`1.0`)
        eps (float, optional): :math:`\epsilon` in
            :math:`\log(f^2 + \epsilon)`. (default: :obj:`1e-5`)
        node_path (str, optional): How the node-wise term is evaluated:
            :obj:`"eager"` (fused and memory-lean, cosines recomputed in
            backward), :obj:`"compile"` (the same through
            :func:`torch.compile`, fastest on CPU once compiled) or
            :obj:`"plain"` (stores :math:`N \times H \times 2R` features;
            supports double backward). (default: :obj:`"eager"`)
    """
    #: Number of spectral point sets :math:`m` in the feature map.
    num_sets = 1
    #: Whether the spectral points are learned parameters (else buffers).
    learnable = False

    def __init__(self, heads: int, channels: int, num_features: int = 64,
                 lengthscale: float = 1.0, eps: float = 1e-5,
                 node_path: str = 'eager'):
        super().__init__(heads, channels)
        owner = type(self).__name__
        self.node_path = check_node_path(owner, node_path)
        self.num_features = check_num_features(owner, num_features)
        self.lengthscale = check_positive(owner, 'lengthscale', lengthscale)
        self.eps = check_positive(owner, 'eps', eps)
        self.set_names = ['spectral_points'] if self.num_sets == 1 else [
            f'spectral_points_{index + 1}' for index in range(self.num_sets)
        ]
        for name in self.set_names:
            points = torch.empty(heads, num_features, 2 * channels)
            if self.learnable:
                self.register_parameter(name, torch.nn.Parameter(points))
            else:
                self.register_buffer(name, points)
        self.reset_parameters()

    @property
    def spectral_point_sets(self) -> List[Tensor]:
        r"""The spectral point sets, each of shape :math:`(H, R, 2C)`."""
        return [getattr(self, name) for name in self.set_names]

    def reset_parameters(self):
        self.redraw_spectral_points()

    @torch.no_grad()
    def redraw_spectral_points(self,
                               generator: Optional[torch.Generator] = None):
        r"""Draw fresh :math:`w \sim \mathcal{N}(0, I/(2l^2))` in place
        (for learned points: re-initialise them from that distribution)."""
        std = 1.0 / (2.0**0.5 * self.lengthscale)
        for points in self.spectral_point_sets:
            points.normal_(0.0, std, generator=generator)

    def similarity(self, x: Tensor, y: Tensor) -> Tensor:
        return fourier_estimate(x, y, self.spectral_point_sets)**2

    def log_similarity(self, x: Tensor, anchor: Tensor, side: int,
                       slopes: Tensor) -> Tensor:
        # The spectral points follow the dtype of x: the layer evaluates
        # the node terms in float32 for a float16 or bfloat16 model.
        sets = [points.to(x.dtype) for points in self.spectral_point_sets]
        return fourier_log_similarity(x, anchor, side, slopes, sets,
                                      self.eps, node_path=self.node_path)

    def extra_repr(self) -> str:
        return (f'{super().extra_repr()}, num_features={self.num_features}, '
                f'lengthscale={self.lengthscale}')
