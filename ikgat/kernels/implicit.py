r"""IKAN: an implicit spectral density inferred variationally."""
import math
from typing import List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from ikgat.kernels.arguments import (
    DeprecatedNumFeatures,
    check_num_spectral_points,
    check_positive,
    renamed_num_features,
)
from ikgat.kernels.base import Kernel, PairFeatureMap
from ikgat.kernels.copula import cholesky_factor, correlated_noise
from ikgat.kernels.draws import Draws
from ikgat.kernels.graph_summary import finite_mean, finite_sums, graph_summary  # noqa: F401 (also here)
from ikgat.kernels.implicit_deprecated import DeprecatedDrawState
from ikgat.kernels.latent_noise import latent_noise
from ikgat.kernels.random_features import (
    DEFAULT_EPS,
    check_node_path,
    fourier_estimate,
    fourier_log_similarities,
    fourier_log_similarity,
    fourier_pair_feature_map,
)
from ikgat.kernels.spectral_transform import symmetric_spectral_points
from ikgat.ops.edge_fourier import edge_fourier_log_similarity

#: :math:`|\log\sigma|` is clamped at this bound (:math:`\sigma` between
#: :math:`4.5 \cdot 10^{-5}` and :math:`2.2 \cdot 10^4`): far from the
#: initial :math:`\log\sigma_p \approx -1.15` and from anything training
#: reaches on Planetoid, but it keeps :math:`\sigma`, the spectral points and
#: the KL finite when the graph summary is huge (features scaled by
#: :math:`10^5`).
LOG_STD_BOUND = 10.0


class ImplicitSpectralKernel(DeprecatedDrawState, DeprecatedNumFeatures,
                             Kernel):
    r"""IKAN: the non-stationary random-feature kernel whose spectral points
    are drawn, per graph and per forward pass, from an implicit density
    inferred from the graph

    .. math::
        h_s = \left[\operatorname{mean}_i q_i \,\|\, \operatorname{mean}_j
        k_j\right], \quad
        (\mu, \log\sigma) = \mathrm{MLP}(h_s), \quad
        \tilde z \sim \mathcal{N}(\mu, \sigma^2), \quad
        z = [\tilde z \,\|\, -\tilde z], \quad
        w = \operatorname{sign}(z)\, g_\psi(|z|),

    for :math:`R/2` points in each of the two sets :math:`w_1, w_2` of the
    non-stationary feature map (see
    :class:`~ikgat.kernels.NonStationaryRandomFourierKernel`), so the
    similarity :math:`\mathrm{sim}(x, y) = (\phi(x)^\top\phi(y) / 4R)^2`
    uses an exactly symmetric sample (:math:`w` and :math:`-w` both present),
    as a real spectral density is.  The summary :math:`h_s` is taken per head
    over the nodes of each graph (the ``batch`` vector), so each graph of a
    mini-batch gets its own spectral points.  :math:`g_\psi(t) = s\,t +
    \mathrm{MLP}_\psi(t)` acts element-wise; it starts as the linear map
    that turns the prior :math:`\mathcal{N}(0, \sigma_p^2)` into
    :math:`\mathcal{N}(0, 1/(2l^2))`, the spectral density of the RBF kernel.

    In training :math:`\tilde z = \mu + \sigma \odot (L\epsilon)`,
    :math:`\epsilon \sim \mathcal{N}(0, I)` (reparameterised), where
    :math:`L = I` for IKAN and, with :obj:`copula=True` (MIKAN), :math:`L` is
    the learned Cholesky factor of a correlation matrix across heads: a
    Gaussian copula with Gaussian marginals.  :math:`L` is a global parameter
    rather than a function of the graph: the dependence between heads is a
    property of the model, one matrix that can be read off and plotted, and
    the data already moves every head's marginal through :math:`\mu(h_s),
    \sigma(h_s)`.  :math:`L` is the row-normalised lower triangle
    :math:`\tilde L = I + \operatorname{tril}(A, -1)`, so its rows have unit
    norm (unit diagonal of :math:`LL^\top`) and its diagonal is positive; it
    starts at :math:`A = 0`, :math:`L = I`.  In
    evaluation :math:`\tilde z = \mu` unless :obj:`num_samples > 1`, in which
    case the layer averages the attention weights of that many samples.
    :meth:`kl_divergence` returns the analytic
    :math:`\mathrm{KL}(q(\tilde z \mid h_s) \,\|\, \mathcal{N}(0,
    \sigma_p^2 I))` of the last forward pass, summed over heads and latent
    coordinates and averaged over the graphs of the batch.

    Numbers: the summary :math:`h_s` averages the nodes with finite
    projections only, so a NaN or infinite input row spoils only the rows
    that attend to it, as in GATConv (the mask is computed on the device, no
    host synchronisation); :math:`\log\sigma` is clamped to
    :math:`[-10, 10]` (``LOG_STD_BOUND``), inactive in normal training, so
    that huge inputs give finite spectral points and a finite KL; and
    :meth:`draw` computes in the dtype of its inputs, which the layer
    makes float32 for a float16 or bfloat16 model.

    Sampled subgraphs: :math:`h_s` is the mean over the nodes a forward
    pass gets, so on a neighbour-sampled subgraph a seed's output depends
    on which other nodes were sampled (in training it is a batch statistic,
    as in batch normalisation).  For evaluation,
    :meth:`ikgat.IKGATConv.full_graph_summary` passes the full graph's
    :math:`h_s` to :meth:`draw` (its :obj:`summary`), and a subgraph holding every
    in-neighbour then gives the full graph's outputs.

    Evaluation: each pair :math:`\pm w` adds the same term twice to the
    estimate, so the draws hold the distinct half :math:`s(\tilde z)`
    (:attr:`Draws.mirrored <ikgat.kernels.draws.Draws.mirrored>`) and the
    similarities are computed from those :math:`R/2` points: exactly the
    estimate of all :math:`R`, with half the sines and cosines.

    Training: three choices keep the evaluation output as steady from epoch
    to epoch as GATConv's in any training loop (PyG's ``examples/gat.py``
    with this kernel swapped in: ``benchmarks.eval_stability``).
    :math:`h_s` enters the inference network detached: it conditions the
    density, and a gradient through a mean over all nodes added the same
    rank-one term to every node's projection gradient.  The network's
    readout is divided by its width :math:`K`, :math:`(\mu - \bar\mu_h,
    \log\sigma - \log\sigma_p) = V\,\mathrm{ELU}(\cdot)/K + b`, so that an
    Adam step moves :math:`\mu` as far as a step of the head means
    :math:`\bar\mu_h` does, not :math:`K` times farther.  And
    :math:`\log\sigma` is read relative to the prior's, so that weight
    decay pulls :math:`\sigma` towards :math:`\sigma_p`, where the KL term
    has its optimum, and not towards 1.

    Args:
        heads (int): Number of heads :math:`H`.
        channels (int): Channels per head :math:`C`.
        num_spectral_points (int, optional): :math:`R`, even (formerly
            ``num_features``, still accepted with a
            :class:`DeprecationWarning`). (default: :obj:`None`, 64)
        hidden_channels (int, optional): Width of the inference network.
            (default: :obj:`64`)
        prior_scale (float, optional): :math:`\sigma_p`; the authors use the
            prior variance :math:`0.1`. (default: :obj:`0.1 ** 0.5`)
        lengthscale (float, optional): :math:`l` of the initial spectral
            density. (default: :obj:`1.0`)
        num_samples (int, optional): Monte-Carlo samples averaged in
            evaluation; :obj:`1` means :math:`\tilde z = \mu`.
            (default: :obj:`1`)
        eps (float, optional): :math:`\epsilon` in
            :math:`\log(f^2 + \epsilon)`, the similarity's floor
            (:data:`~ikgat.kernels.random_features.DEFAULT_EPS`).
            (default: :obj:`1e-2`)
        node_path (str, optional): How the node-wise term is evaluated, one
            of :obj:`~ikgat.kernels.random_features.NODE_PATHS` (the fused
            paths apply when all nodes share one sample).
            (default: :obj:`"eager"`)
        copula (bool, optional): Tie the heads by a learned Gaussian copula
            (MIKAN). (default: :obj:`False`)
    """
    stochastic = True
    has_spectral_points = True
    has_kl = True
    num_sets = 2
    pairs_vectors = True
    has_pair_feature_map = True

    def __init__(self, heads: int, channels: int,
                 num_spectral_points: Optional[int] = None,
                 hidden_channels: int = 64, prior_scale: float = 0.1**0.5,
                 lengthscale: float = 1.0, num_samples: int = 1,
                 eps: float = DEFAULT_EPS, copula: bool = False,
                 node_path: str = 'eager', *,
                 num_features: Optional[int] = None,
                 pairing: str = 'anchor'):
        super().__init__(heads, channels, pairing=pairing)
        owner = type(self).__name__
        num_spectral_points = renamed_num_features(
            owner, old_value=num_features, new_value=num_spectral_points)
        if num_spectral_points is None:
            num_spectral_points = self.default_num_spectral_points
        check_num_spectral_points(owner, num_spectral_points)
        if num_spectral_points % 2:
            raise ValueError(f"{owner}: 'num_spectral_points' must be even, "
                             f"as the sample is [z, -z] (got "
                             f"{num_spectral_points})")
        for name, value in (('hidden_channels', hidden_channels),
                            ('num_samples', num_samples)):
            if isinstance(value, bool) or not isinstance(value,
                                                         int) or value < 1:
                raise ValueError(f"{owner}: '{name}' must be a positive "
                                 f"integer (got {value!r})")
        self.num_spectral_points = num_spectral_points
        self.prior_scale = check_positive(owner, 'prior_scale', prior_scale)
        self.lengthscale = check_positive(owner, 'lengthscale', lengthscale)
        self.num_samples = num_samples
        self.eps = check_positive(owner, 'eps', eps)
        self.node_path = check_node_path(owner, node_path)
        # Latent coordinates per head: two sets of R/2 points in R^D.
        self.latent_dim = (self.num_sets * (num_spectral_points // 2) *
                           self.dimension)

        self.encoder_hidden = torch.nn.Linear(2 * channels, hidden_channels)
        self.encoder_readout = torch.nn.Linear(hidden_channels,
                                           2 * self.latent_dim)
        self.head_mean = Parameter(torch.empty(heads, self.latent_dim))
        self.transform_hidden = torch.nn.Linear(1, 16)
        self.transform_out = torch.nn.Linear(16, 1)
        self.raw_transform_scale = Parameter(torch.empty(()))
        self.copula = bool(copula)
        if self.copula:
            self.raw_correlation = Parameter(torch.empty(heads, heads))
        else:
            self.register_parameter('raw_correlation', None)

        #: The draws of the last :meth:`draw` (see
        #: :attr:`Kernel.last_draws`).
        self.last_draws: Optional[Draws] = None
        # The summary set through the deprecated fixed_summary:
        self._fixed_summary: Optional[Tensor] = None
        self.reset_parameters()

    def reset_parameters(self):
        self.encoder_hidden.reset_parameters()
        # The outputs start near zero, whatever the width (the readout
        # divides by it): mu at the head means, sigma at the prior's.
        torch.nn.init.normal_(self.encoder_readout.weight,
                              std=1e-3 * self.encoder_readout.in_features)
        torch.nn.init.zeros_(self.encoder_readout.bias)
        # Per-head means start as a prior draw, so heads start different:
        torch.nn.init.normal_(self.head_mean, std=self.prior_scale)
        self.transform_hidden.reset_parameters()
        torch.nn.init.normal_(self.transform_out.weight, std=1e-3)
        torch.nn.init.zeros_(self.transform_out.bias)
        scale = 1.0 / (math.sqrt(2.0) * self.lengthscale * self.prior_scale)
        with torch.no_grad():  # softplus^-1(scale)
            self.raw_transform_scale.fill_(scale + math.log(-math.expm1(
                -scale)))
        if self.raw_correlation is not None:
            torch.nn.init.zeros_(self.raw_correlation)

    def __getstate__(self):
        # The last forward's sample is part of an autograd graph: copies and
        # pickles of the module start without it.
        state = super().__getstate__()
        state.update(last_draws=None, _fixed_summary=None)
        return state

    def correlation_cholesky(self) -> Tensor:
        r"""The Cholesky factor :math:`L` of the correlation across heads,
        :math:`(H, H)`; the identity for IKAN."""
        return self._correlation_cholesky(self.head_mean.dtype)

    def _correlation_cholesky(self, dtype: torch.dtype) -> Tensor:
        if self.raw_correlation is None:
            return torch.eye(self.heads, device=self.head_mean.device,
                             dtype=dtype)
        return cholesky_factor(self.raw_correlation.to(dtype))

    def correlation(self) -> Tensor:
        r"""The copula's correlation matrix :math:`LL^\top`, :math:`(H, H)`."""
        cholesky = self.correlation_cholesky()
        return cholesky @ cholesky.t()

    def transform(self, magnitude: Tensor) -> Tensor:
        r""":math:`g_\psi(t) = \mathrm{softplus}(s)\, t +
        \mathrm{MLP}_\psi(t)`, element-wise (the map that
        :func:`~ikgat.kernels.spectral_transform.symmetric_spectral_points`
        applies to :math:`|z|`; for plots)."""
        hidden = torch.tanh(
            _linear(self.transform_hidden, magnitude.unsqueeze(-1)))
        scale = F.softplus(self.raw_transform_scale.to(magnitude.dtype))
        return (scale * magnitude +
                _linear(self.transform_out, hidden).squeeze(-1))

    def draw(self, x_src: Tensor, x_dst: Optional[Tensor] = None,
             batch_src: Optional[Tensor] = None,
             batch_dst: Optional[Tensor] = None, num_graphs: int = 1,
             sample: bool = False, num_draws: int = 1, *,
             generator: Optional[torch.Generator] = None,
             summary: Optional[Tensor] = None) -> Draws:
        r"""Infer :math:`q(\tilde z \mid h_s)` from the graph(s) and draw
        the spectral points of one forward pass (:math:`\tilde z = \mu`
        unless :obj:`sample`), returned for the ``draws=`` of the entry
        points and kept as :attr:`last_draws`.

        With :obj:`num_draws` :math:`S > 1` (and :obj:`sample`), :math:`S`
        independent samples share one summary and are stacked along the
        heads, draw after draw (:math:`S H` heads), for
        :meth:`node_log_similarities` of projections repeated :math:`S`
        times along the heads; :meth:`spectral_points` returns the first
        draw's (:meth:`Draws.select <ikgat.kernels.draws.Draws.select>`
        picks one).  :obj:`summary`, :math:`(1, H, 2C)`, is the :math:`h_s`
        of the full graph, used instead of the summary of the nodes given
        (one graph only)."""
        if summary is None:
            summary = self._fixed_summary
        if summary is not None:
            if num_graphs != 1:
                raise ValueError(
                    f'{type(self).__name__}: a fixed graph summary serves '
                    f'one graph, not a batch of {num_graphs}; leave batch '
                    f'out inside full_graph_summary()')
            summary = summary.to(x_src.dtype)
        else:
            # h_s is the condition of the density, not a path for
            # gradients: a gradient through a mean over all nodes adds one
            # rank-one term to every node's projection gradient, which made
            # the evaluation output swing from epoch to epoch (see Training
            # above).  So the summary reads detached projections (one
            # tensor where sources and targets share one):
            keys = x_src.detach()
            queries = (keys if x_dst is x_src else
                       None if x_dst is None else x_dst.detach())
            summary = graph_summary(keys, queries, batch_src, batch_dst,
                                    num_graphs)
        hidden = F.elu(_linear(self.encoder_hidden,
                               summary.view(-1, summary.size(-1))))
        mean, log_std = self._readout(hidden).view(
            num_graphs, self.heads, 2, self.latent_dim).unbind(2)
        mean = mean + self.head_mean.to(mean.dtype)
        log_std = log_std + math.log(self.prior_scale)
        # A clamp inactive in normal training; it bounds sigma for huge
        # summaries, where exp(log_std) overflowed to inf (and the KL too);
        # hardtanh is that clamp with a one-operation backward:
        log_std = F.hardtanh(log_std, -LOG_STD_BOUND, LOG_STD_BOUND)
        latent = mean  # mean, log_std: [G, H, D]
        if sample:
            noise = latent_noise(num_graphs, num_draws, self.heads,
                                 self.latent_dim, mean, generator)
            if self.raw_correlation is not None:
                noise = correlated_noise(self.raw_correlation.to(mean.dtype),
                                         noise)
            if num_draws == 1:  # (a product and a sum: a cheaper backward
                # than addcmul's, which scales both gradients by its value)
                latent = mean + log_std.exp() * noise.transpose(0, 1)
            else:  # [G, S, H, D]
                latent = torch.addcmul(mean.unsqueeze(1),
                                       log_std.exp().unsqueeze(1),
                                       noise.permute(2, 1, 0, 3))
        elif num_draws != 1:
            raise ValueError(f'{type(self).__name__}: num_draws={num_draws} '
                             f'needs sample=True (the mean is one draw)')
        half = self.num_spectral_points // 2
        latent = latent.reshape(num_graphs, num_draws * self.heads,
                                self.num_sets, half, self.dimension)
        # w = sign(z) g(|z|) for z = [z~, -z~], [G, H, sets, R, D]:
        dtype = latent.dtype
        # Only the distinct half s(z~) of the symmetric sample [w, -w]
        # (Draws.mirrored):
        points = symmetric_spectral_points(
            latent, None, self.transform_hidden.weight.view(-1).to(dtype),
            self.transform_hidden.bias.to(dtype),
            self.transform_out.weight.view(-1).to(dtype),
            self.transform_out.bias.to(dtype),
            self.raw_transform_scale.to(dtype))
        draws = Draws(points, points, (batch_dst, batch_src), mean, log_std,
                      summary, self.heads, mirrored=True)
        self.last_draws = draws
        return draws

    def _readout(self, hidden: Tensor) -> Tensor:
        r"""The inference network's last layer, :math:`(\mu - \bar\mu_h,
        \log\sigma - \log\sigma_p) = V h / K + b` for its :math:`K`
        inputs: divided by its width, so that an Adam step moves :math:`\mu`
        about as far as a step of the head means :math:`\bar\mu_h` does,
        not :math:`K` times farther (see Training in the class
        docstring)."""
        layer = self.encoder_readout
        return F.linear(hidden,
                        layer.weight.to(hidden.dtype) / layer.in_features,
                        layer.bias.to(hidden.dtype))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata,
                              *args, **kwargs):
        # ikgat 0.1 named the readout encoder_out and read out V h + b, b
        # holding log sigma itself: the same function in today's terms.
        weight = state_dict.pop(prefix + 'encoder_out.weight', None)
        bias = state_dict.pop(prefix + 'encoder_out.bias', None)
        if weight is not None:
            state_dict[prefix + 'encoder_readout.weight'] = (weight *
                                                             weight.size(1))
        if bias is not None:
            bias = bias.clone()
            bias[bias.numel() // 2:] -= math.log(self.prior_scale)
            state_dict[prefix + 'encoder_readout.bias'] = bias
        super()._load_from_state_dict(state_dict, prefix, local_metadata,
                                      *args, **kwargs)

    def spectral_points(self, draws: Optional[Draws] = None) -> List[Tensor]:
        r"""The spectral point sets of :obj:`draws` (default: of the last
        forward pass, :attr:`last_draws`), each of shape
        :math:`(G, H, R, D)`."""
        return self._given_draws(draws).spectral_points()

    def spectral_points_per_graph(self, draws: Optional[Draws] = None
                                  ) -> List[Tensor]:
        return self.spectral_points(draws)

    def similarity(self, x: Tensor, y: Tensor, *,
                   draws: Optional[Draws] = None) -> Tensor:
        points = [w[0] for w in self._given_draws(draws).distinct_sets()]
        return fourier_estimate(x, y, points)**2

    def pair_log_similarity(self, query: Tensor, key: Tensor, *,
                            draws: Optional[Draws] = None) -> Tensor:
        return (self.similarity(query, key, draws=draws) + self.eps).log()

    def edge_log_similarity(self, query: Tensor, key: Tensor, src: Tensor,
                            dst: Tensor,
                            edge_key: Optional[Tensor] = None, *,
                            draws: Optional[Draws] = None) -> Tensor:
        draws = self._given_draws(draws)
        dst_batch, src_batch = draws.batches
        return edge_fourier_log_similarity(
            query, key, draws.points.transpose(1, 2), src, dst, self.eps,
            edge_key, dst_batch, src_batch)

    def pair_feature_map(self, query: Tensor, key: Tensor, *,
                         draws: Optional[Draws] = None) -> PairFeatureMap:
        stacked = self._given_draws(draws).stacked
        if stacked.size(0) != 1:
            raise ValueError(f"{type(self).__name__}: the pair feature map "
                             f"needs one sample of spectral points for all "
                             f"nodes, not {stacked.size(0)} (one per "
                             f"graph); use edge_log_similarity")
        # Every draw, S H heads, draw after draw: (m, S H, R, D).
        points = stacked[0].transpose(0, 1)
        draws = points.size(1) // query.size(1)
        return fourier_pair_feature_map(query.repeat(1, draws, 1),
                                        key.repeat(1, draws, 1), points,
                                        self.eps)

    def log_similarity(self, x: Tensor, anchor: Tensor, is_source: bool,
                       slopes: Tensor, *,
                       draws: Optional[Draws] = None) -> Tensor:
        draws = self._given_draws(draws)
        return fourier_log_similarity(x, anchor, is_source, slopes,
                                      draws.distinct_sets(), self.eps,
                                      batch=draws.batches[int(is_source)],
                                      node_path=self.node_path)

    def node_log_similarities(self, x_dst: Tensor, x_src: Tensor,
                              anchor: Tensor, slopes: Tensor,
                              reduced_source: bool, *,
                              draws: Optional[Draws] = None
                              ) -> Tuple[Tensor, Tensor]:
        # No node norm to reduce (gamma = 0): one call, one set of anchor
        # features for both sides.
        draws = self._given_draws(draws)
        dst_batch, src_batch = draws.batches
        points = draws.points
        # Every draw's points (S H heads); one sample for all nodes goes
        # stacked, (m, H, R, D):
        sets: Union[Tensor, List[Tensor]] = (
            points.squeeze(0).transpose(0, 1)
            if points.size(0) == 1 else list(points.unbind(dim=2)))
        return fourier_log_similarities(x_dst, x_src, anchor, slopes, sets,
                                        self.eps, dst_batch, src_batch,
                                        node_path=self.node_path)

    def kl_divergence(self, draws: Optional[Draws] = None) -> Tensor:
        r"""The analytic KL of :obj:`draws` (default: of the last forward
        pass, :attr:`last_draws`; zero before the first) to the prior
        :math:`\mathcal{N}(0, \sigma_p^2 I)`.

        Per graph and latent coordinate the heads are jointly Gaussian,
        :math:`\mathcal{N}(\mu, \Sigma)` with :math:`\Sigma = D_\sigma L L^\top
        D_\sigma`, so with :math:`\operatorname{diag}(LL^\top) = 1`

        .. math::
            \mathrm{KL} = \tfrac12 \left[\frac{\sum_h \sigma_h^2 + \mu_h^2}
            {\sigma_p^2} - H + 2H\log\sigma_p - 2\sum_h \log\sigma_h
            - 2\sum_h \log L_{hh}\right].
        """
        if draws is None:
            draws = self.last_draws
        if draws is None:
            return self.head_mean.new_zeros(())
        mean, log_std = draws.mean, draws.log_std
        prior_var = self.prior_scale**2
        log_diag = self._correlation_cholesky(
            mean.dtype).diagonal().log().sum()
        per_coordinate = 0.5 * (
            ((2 * log_std).exp() + mean**2).sum(1) / prior_var - self.heads +
            2 * self.heads * math.log(self.prior_scale) -
            2 * log_std.sum(1) - 2 * log_diag)  # [G, D]
        return per_coordinate.sum(-1).mean()

    def extra_repr(self) -> str:
        return (f'{super().extra_repr()}, '
                f'num_spectral_points={self.num_spectral_points}, '
                f'prior_scale={self.prior_scale:.4g}, '
                f'num_samples={self.num_samples}, copula={self.copula}')


def _linear(layer: torch.nn.Linear, x: Tensor) -> Tensor:
    r""":obj:`layer` applied in the dtype of :obj:`x` (float32 inputs for a
    float16 or bfloat16 model; a no-op cast otherwise)."""
    bias = None if layer.bias is None else layer.bias.to(x.dtype)
    return F.linear(x, layer.weight.to(x.dtype), bias)
