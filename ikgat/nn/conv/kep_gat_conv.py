r"""Bayesian graph attention through kernel-eigen pair sparse variational
Gaussian processes (KEP-SVGP adapted to sparse neighbourhoods)."""
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.typing import (
    Adj,
    OptPairTensor,
    OptTensor,
    Size,
    SparseTensor,
)
from torch_geometric.utils import is_sparse, softmax

from ikgat.nn.conv.docstrings import shared_docstring
from ikgat.nn.conv.gat_base import (
    GATConvBase,
    adjacency_edges,
    takes_gat_conv_parameters,
    without_autocast,
)
from ikgat.nn.conv.kep_posterior import KEPPosterior
from ikgat.nn.conv.kernel_attention import LeanPathSwitches

# ksvd_loss lives in ikgat.nn.losses; importable from here as documented:
from ikgat.nn.losses import ksvd_loss  # noqa: F401
from ikgat.nn.svgp_sample import svgp_pair_sample
from ikgat.ops.aggregation import attention_aggregate
from ikgat.ops.edge_softmax import kernel_edge_softmax


@shared_docstring
class KEPGATConv(KEPPosterior, LeanPathSwitches, GATConvBase):
    r"""Bayesian graph attention after the `"Self-Attention through
    Kernel-Eigen Pair Sparse Variational Gaussian Processes"
    <https://arxiv.org/abs/2402.01476>`_ paper (KEP-SVGP, ICML 2024),
    adapted to sparse neighbourhoods; a drop-in replacement for
    :class:`torch_geometric.nn.conv.GATConv` whose output is a sample of a
    pair of sparse variational Gaussian processes.

    **Attention kernel.**  Per head, with :math:`q_i = \mathbf{\Theta}_t
    \mathbf{x}_i` (targets, queries) and :math:`k_j = \mathbf{\Theta}_s
    \mathbf{x}_j` (sources, keys), the attention is GATConv's,

    .. math::
        \kappa_{ij} = \alpha_{i,j} = \operatorname{softmax}_{j \in
        \mathcal{N}(i) \cup \{i\}}\left(\mathrm{LeakyReLU}\left(
        \mathbf{a}_t^\top q_i + \mathbf{a}_s^\top k_j
        \,(+\, \mathbf{a}_e^\top\mathbf{\Theta}_e\mathbf{e}_{i,j})\right)
        \right),

    an asymmetric, non-negative kernel that is non-zero on edges only (edge
    features, with :obj:`edge_dim`, enter the logits as in GATConv, and
    the attention dropout acts in all the neighbourhood sums below); write
    :math:`K = [\kappa_{ij}]` (targets :math:`\times` sources).  It has an
    exact feature-space factorisation :math:`\kappa_{ij} =
    \phi_q(i)^\top\phi_k(j)` in the space of edges:
    :math:`\phi_q(i) = \sum_{j} \sqrt{\kappa_{ij}}\,\mathbf{1}_{(j,i)}` and
    :math:`\phi_k(j) = \sum_{i} \sqrt{\kappa_{ij}}\,\mathbf{1}_{(j,i)}`.

    **Kernel SVD, primal and dual.**  KSVD (Suykens, 2016; Primal-Attention,
    Chen et al., 2023) looks for primal weights :math:`W_e, W_r` and
    singular values :math:`\Lambda = \mathrm{diag}(\lambda_1, \dots,
    \lambda_s) \succ 0` with projection scores (the two adjoint eigen-feature
    maps) :math:`e(i) = W_e^\top\phi_q(i)`, :math:`r(j) = W_r^\top\phi_k(j)`
    that make the primal objective

    .. math::
        J = \tfrac12 \sum_i e(i)^\top\Lambda^{-1}e(i)
        + \tfrac12 \sum_j r(j)^\top\Lambda^{-1}r(j)
        - \operatorname{Tr}(W_e^\top W_r)

    stationary.  Its stationarity conditions give the weights in dual form,
    :math:`W_e = \Phi_k^\top H_r`, :math:`W_r = \Phi_q^\top H_e`, with dual
    vectors solving :math:`K H_r = H_e\Lambda`, :math:`K^\top H_e =
    H_r\Lambda` (the singular vectors), and :math:`J = 0` at every
    stationary point.  In the dual form of canonical attention the dual
    vectors :math:`H_r` are the values (Primal-Attention), and this layer
    takes both sides node-wise from GATConv's projections, so the rank is
    :math:`s = C` per head:

    .. math::
        h_r(j) = k_j, \qquad h_e(i) = q_i;

    the eigen-feature maps are attention-weighted neighbourhood sums, the
    first one exactly GATConv's aggregation, and the trace is a sum over the
    targets:

    .. math::
        e(i) = \sum_{j \in \mathcal{N}(i) \cup \{i\}} \kappa_{ij}\, k_j
        \;(= (K H_r)_i), \qquad
        r(j) = \sum_{i:\, j \in \mathcal{N}(i) \cup \{i\}} \kappa_{ij}\,
        q_i \;(= (K^\top H_e)_j), \qquad
        \operatorname{Tr}(W_e^\top W_r) = \sum_i h_e(i)^\top e(i).

    :meth:`~ikgat.nn.conv.kep_posterior.KEPPosterior.ksvd_loss` is
    :math:`\sum_h (J_h / N_t)^2` over the heads, with
    :math:`N_t` target nodes: zero at the KSVD stationary points (the
    authors minimise :math:`J^2` too).  Its gradient reaches the singular
    values only (:math:`e`, :math:`r` and :math:`h_e` enter it detached):
    it fits :math:`\Lambda` to the attention kernel of the current
    features instead of bending the features towards a stationary point,
    which cost accuracy (Cora, validation split, seed 0, weight 0.1:
    76.4% when the loss reaches the features, 80.2% detached, 80.8%
    without the loss).

    **Sparse variational GP pair.**  Each branch :math:`b \in \{e, r\}` and
    output channel :math:`d` is a GP with the rank-:math:`s` kernel
    :math:`b(x)^\top b(x')`, written :math:`f_d(x) = b(x)^\top
    \Lambda^{-1}u_d` with inducing variables :math:`u_d \sim
    \mathcal{N}(0, \Lambda^2)` (so :math:`\mathrm{Cov}(f_d(x), u_d) =
    b(x)^\top\Lambda` and :math:`K_{uu} = \Lambda^2`: only a diagonal matrix
    is inverted).  With :math:`q(u_d) = \mathcal{N}(m_d, S_d)`,
    :math:`S_d = L_d L_d^\top`, the posterior is exact (the conditional
    variance of a rank-:math:`s` GP given :math:`u` is zero), and the
    reparameterised sample and the KL are

    .. math::
        F_{b,d}(x) = b(x)^\top\Lambda^{-1} m_d
        + b(x)^\top\Lambda^{-1} L_d\, \varepsilon_{x,d},
        \quad \varepsilon_{x,d} \sim \mathcal{N}(0, I_s),

        \mathrm{KL} = \sum_{b,h,d} \tfrac12\left[\|\Lambda^{-1}L_d\|_F^2
        + \|\Lambda^{-1}m_d\|^2 - s + \log|\Lambda^2| - \log|S_d|\right].

    Each :math:`(x, d)` is drawn from its marginal :math:`\mathcal{N}(
    b^\top\Lambda^{-1}m_d, \|L_d^\top\Lambda^{-1}b\|^2)` with one standard
    normal, the distribution of the authors' :math:`s`-dimensional
    :math:`\varepsilon_{x,d}` at :math:`1/s` of the random numbers.

    The two branches are merged by a sum on the targets; the source-side
    sample is carried to the targets by the attention kernel itself (the
    operator that maps functions on sources to functions on targets):

    .. math::
        \mathbf{x}^{\prime}_i = F_e(i) + \sum_{j \in \mathcal{N}(i) \cup
        \{i\}} \kappa_{ij}\, F_r(j) \quad \text{per head, then concatenated
        or averaged, plus residual and bias as in GATConv},

    where the source-side GP reads :math:`\bar r(j) = r(j) / \max(1, c_j)`,
    :math:`c_j = \sum_i \kappa_{ij}` the attention that source :math:`j`
    receives: :math:`e(i)` is a convex combination of the :math:`h_r`, but
    :math:`r(j)` grows with the out-degree of :math:`j`, and hubs would
    otherwise dominate.  (The KSVD objective uses :math:`r` itself.)

    **Departures from the paper** (the first three forced by graphs and
    sparsity, the others simplifications):

    - *Kernel*: the paper applies KSVD to the transformer's dense attention
      kernel :math:`\hat q_i^\top \hat k_j`; here it is GATConv's sparse
      attention on the edges (so :obj:`return_attention_weights` returns
      GAT-style weights).
    - *No positional landmarks*: the authors build the primal weights from
      tokens at fixed sequence positions (:math:`W_e = X_{\text{landmarks}}
      ^\top w_e`), which is not permutation-invariant; here the dual vectors
      are node-wise (the values :math:`k_j`, :math:`q_i`), and the graph
      enters through the neighbourhood sums :math:`K H_r`,
      :math:`K^\top H_e`.  Everything is permutation-equivariant.
    - *Merging*: in a transformer a token is both query and key, so the paper
      adds :math:`e(x_n) + r(x_n)` at the same token.  On a (possibly
      bipartite) graph :math:`r` lives on the sources, so its GP sample is
      carried to the targets by :math:`K`; the two branches have separate
      variational parameters (the paper shares one :math:`q(u)`), and the
      source side is rescaled by the attention mass :math:`c_j` (dense
      softmax attention spreads it evenly; a sparse graph's hubs do not).
    - *Dual vectors*: the authors learn :math:`s` directions on normalised
      queries and keys; here the dual vectors are GATConv's values
      themselves (:math:`s = C`), so the posterior mean keeps GATConv's
      value path.
    - *Outputs*: the GPs output the :math:`C` channels of each head directly
      (:math:`m_d`, :math:`L_d` per channel) instead of :math:`s` outputs
      followed by a linear map.  The posterior means start at
      :math:`m = \Lambda` (the identity read-out), so the layer starts as
      GATConv's aggregation plus the adjoint branch.
    - *Prior*: :math:`u \sim \mathcal{N}(0, \Lambda^2)` matches the
      mean :math:`b^\top\Lambda^{-1}m` and the covariance the authors'
      code samples from (and their KL); the prior over functions is then
      :math:`f_d = b(x)^\top v`, :math:`v \sim \mathcal{N}(0, I)`.
    - *Evaluation*: :math:`S` Monte-Carlo draws of the layer output are
      averaged in closed form: the output is linear in the noise, so the
      average of :math:`S` independent draws has exactly the distribution of
      one draw with :math:`\varepsilon / \sqrt{S}`, which is what is drawn.

    **Training.**  Minimise, per training node,

    .. code-block:: python

        out = model(x, edge_index)
        loss = (F.cross_entropy(out[train], y[train])
                + eta_ksvd * ikgat.nn.ksvd_loss(model)
                + beta * ikgat.nn.kl_divergence(model) / num_train)

    where the helpers sum the layers'
    :meth:`~ikgat.nn.conv.kep_posterior.KEPPosterior.ksvd_loss` and
    :meth:`~ikgat.nn.conv.kep_posterior.KEPPosterior.kl_divergence` over
    the model's layers (the authors use :math:`\eta_{ksvd} = 1` with the
    summed branches).  Leave :obj:`inducing_log_scale_diag`,
    :obj:`inducing_scale_offdiag` and :obj:`log_singular_values` out of
    weight decay: the KL regularises them, and decaying a log-scale pulls
    the posterior spread towards :math:`e^0 = 1`.

    **Numbers.**  As in :class:`~ikgat.IKGATConv`, the projections,
    attention, neighbourhood sums and samples run in at least float32 for a
    float16 or bfloat16 model or under :func:`torch.autocast`, and the
    attention weights and output are rounded once, to GATConv's dtypes.  The
    adjoint sums :math:`r(j)` and :math:`c_j` and the KSVD loss leave out
    non-finite terms, so a NaN or infinite input row makes NaN only the
    output rows that attend to it, as in GATConv.

    **Sampled subgraphs.**  The adjoint branch :math:`r(j)`, :math:`c_j`
    sums over the *out*-edges of :math:`j`, which in-neighbour sampling
    (``NeighborLoader``) drops: on a subgraph, even one holding every
    in-neighbour, a target's output differs from its full-graph output
    (:attr:`local_to_in_neighbourhood` is :obj:`False`, and the mini-batch
    tools of :mod:`ikgat.training` warn once).  Training on such subgraphs
    trains the layer on truncated adjoint sums; layer-wise evaluation
    (:meth:`ikgat.models.TwoLayerGAT.inference`) runs this layer on the
    whole graph at once, which gives exactly its full-graph output.

    **Randomness.**  Training draws one sample per forward pass.  Evaluation
    averages :obj:`num_samples` draws (:obj:`num_samples=0` returns the
    posterior mean, deterministic).  Pass ``generator=`` to :meth:`forward`
    for reproducible draws: with a generator seeded the same way (or the
    same ``torch.manual_seed``), evaluation with :obj:`num_samples=1` gives
    the same output.  The noise is drawn node by node, so a node's draw does
    not depend on the nodes after it: in a mini-batch of graphs no graph's
    output depends on the others (every sum runs over a node's own edges),
    and with the same seed the first graph gets the output it gets alone.

    Args:
        {gatconv_arguments}
        num_samples (int, optional): Monte-Carlo draws averaged in
            evaluation; :obj:`0` returns the posterior mean.
            (default: :obj:`1`)
        init_scale (float, optional): Initial posterior standard deviation
            relative to the prior, :math:`L_d = \text{init\_scale}\cdot
            \Lambda` at initialisation. (default: :obj:`0.1`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing`.

    {gatconv_shapes}
    """
    @takes_gat_conv_parameters
    def __init__(
        self,
        *args,
        num_samples: int = 1,
        init_scale: float = 0.1,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)  # GATConv's parameters
        self._init_posterior(num_samples, init_scale)
        self.reset_parameters()

    local_to_in_neighbourhood = False
    #: Whether GATConv's attention weights come from
    #: :func:`~ikgat.ops.edge_softmax.kernel_edge_softmax` (edge chunks)
    #: instead of :meth:`edge_update`, and the three neighbourhood sums
    #: (:math:`e`, :math:`r` with :math:`c`, and the merged sample) from
    #: :func:`~ikgat.ops.aggregation.attention_aggregate` instead of
    #: ``propagate``, where they equal PyG's path: a plain ``edge_index``
    #: tensor on CPU, outside explain mode and ``torch.compile``, no hook on
    #: the steps they skip.  A PubMed epoch of the GAT recipe (one thread, AMD
    #: EPYC, interleaved with GATConv in one process) took 2.0 times
    #: GATConv's with them and 2.2 times through PyG's steps (626-628
    #: against 708-710 ms); on Cora 1.42-1.43 against 1.43-1.48 times.
    lean_edge_softmax: bool = True
    lean_aggregation: bool = True

    @property
    def sampling_caveat(self) -> Optional[str]:
        return (f'{type(self).__name__}: the adjoint branch sums over each '
                f'source\'s out-edges, which in-neighbour sampling drops, so '
                f'outputs on sampled subgraphs differ from full-graph '
                f'outputs even with fan-out -1; layer-wise evaluation '
                f'(TwoLayerGAT.inference) runs this layer on the whole graph')

    # --------------------------------------------------------------- forward

    def forward(
        self,
        x: Union[Tensor, OptPairTensor],
        edge_index: Adj,
        edge_attr: OptTensor = None,
        size: Size = None,
        return_attention_weights: Optional[bool] = None,
        batch: Union[OptTensor, Tuple[Tensor, Tensor]] = None,
        batch_size: Optional[int] = None,
        *,
        generator: Optional[torch.Generator] = None,
    ) -> Union[Tensor, Tuple[Tensor, Tuple[Tensor, Tensor]], Tuple[
            Tensor, SparseTensor]]:
        r"""Runs the forward pass of the module.

        Args:
            {forward_graph_arguments}
            size ((int, int), optional): The shape of the adjacency matrix.
                With ``x=(x_src, None)`` and no :obj:`size`, the number of
                targets is read from :obj:`edge_index`, a host
                synchronisation on CUDA. (default: :obj:`None`)
            {gatconv_return_attention_weights}
            batch (torch.Tensor or (torch.Tensor, torch.Tensor), optional):
                The sorted graph index of every node (of the source and the
                target nodes if bipartite) for a mini-batch of graphs, as
                :class:`~ikgat.IKGATConv` takes it; checked, and not needed:
                every sum runs over a node's own edges and the noise is
                drawn per node, so no graph's output depends on the others.
                (default: :obj:`None`)
            batch_size (int, optional): The number of graphs in
                :obj:`batch`. (default: :obj:`None`)
            generator (torch.Generator, optional): The source of the
                Gaussian noise of the samples; the global generator if
                :obj:`None`. (default: :obj:`None`)
        """
        batch, batch_size = self._given_batch(batch, batch_size)
        self._check_inputs(x, edge_index, edge_attr, size, batch)
        self._check_batch_size(batch, batch_size)
        x_src, x_dst, res, projection_dtype = self._project(x)
        edge_index, edge_attr = self._add_self_loops(edge_index, edge_attr,
                                                     x_src, x_dst, size)
        coo, num_src, num_dst = self._coo(edge_index, x_src, x_dst, size)
        # The lean paths on CPU where they equal PyG's steps.  Elsewhere
        # PyG's steps: their edge chunks would make a GPU step's launches
        # grow with the graph; and while torch.compile traces, Inductor
        # fuses PyG's steps itself:
        lean = ((False, False) if x_src.device.type != 'cpu'
                or torch.compiler.is_compiling() else
                self._lean_paths(edge_index))
        # From the projections to the output in at least float32, autocast
        # or not; attention weights and output then in GATConv's dtypes.
        alpha_dtype, out_dtype = self._gat_dtypes(projection_dtype)
        with without_autocast(x_src.device):
            alpha, out = self._attend_and_sample(coo, x_src, x_dst,
                                                 edge_attr, num_src, num_dst,
                                                 generator, lean)
        out = self._add_residual_and_bias(out.to(out_dtype), res)
        return self._output(out, edge_index, alpha.to(alpha_dtype),
                            return_attention_weights)

    def _neighbourhood_sum(self, coo: Tensor, alpha: Tensor, x: Tensor,
                           num_src: int, num_dst: int, lean: bool) -> Tensor:
        r""":math:`\sum_j \kappa_{ij} x_j` per target, :math:`(N_t, H,
        C)`: PyG's ``propagate``, or its lean equal."""
        if lean:
            return attention_aggregate(alpha, x, coo, num_dst)
        # propagate_type: (x: OptPairTensor, alpha: Tensor)
        return self.propagate(coo, x=(x, None), alpha=alpha,
                              size=(num_src, num_dst))

    def _attend_and_sample(self, coo: Tensor, x_src: Tensor,
                           x_dst: OptTensor, edge_attr: OptTensor,
                           num_src: int, num_dst: int,
                           generator: Optional[torch.Generator],
                           lean: Tuple[bool, bool] = (False, False)
                           ) -> Tuple[Tensor, Tensor]:
        r"""GATConv's attention :math:`\kappa` over the edges :obj:`coo`
        and the merged sample :math:`F_e(i) + \sum_j \kappa_{ij} F_r(j)`
        per head, :math:`(N_t, H, C)`, in the dtype of :obj:`x_src`; stores
        the KSVD loss.  :obj:`lean`: whether the edge softmax and the
        neighbourhood sums take the lean paths
        (:meth:`~ikgat.nn.conv.kernel_attention.LeanPathSwitches._lean_paths`)."""
        H = self.heads
        dtype = x_src.dtype
        pair_size = (num_src, num_dst)
        softmax_lean, aggregation_lean = lean
        gat_logit_src = (x_src * self.att_src.to(dtype)).sum(dim=-1)
        gat_logit_dst = None if x_dst is None else (
            x_dst * self.att_dst.to(dtype)).sum(-1)
        if softmax_lean:
            # GATConv's logit from the gates alone, in edge chunks (a
            # missing target projection is a zero gate for every target):
            gate_dst = (gat_logit_src.new_zeros(1, H, 1)
                        if gat_logit_dst is None else
                        gat_logit_dst.unsqueeze(-1))
            alpha = F.dropout(
                kernel_edge_softmax(gat_logit_src.unsqueeze(-1), gate_dst,
                                    coo, num_dst, self._edge_gate(edge_attr),
                                    self.negative_slope),
                p=self.dropout, training=self.training)
        else:
            # edge_updater_type: (gate: OptPairTensor, edge_attr: OptTensor)
            alpha = self.edge_updater(coo,
                                      gate=(gat_logit_src, gat_logit_dst),
                                      edge_attr=edge_attr, size=pair_size)

        # Dual vectors: the values, h_r(j) = k_j and h_e(i) = q_i; without
        # target features q_i = 0, so h_e = 0 and r = 0.
        h_r = x_src
        h_e = (x_src.new_zeros(num_dst, H, self.rank) if x_dst is None else
               x_dst)
        # e = K H_r (sum over the in-edges of each target), and
        # r = K^T H_e (sum over the out-edges of each source):
        e = self._neighbourhood_sum(coo, alpha, h_r, num_src, num_dst,
                                    aggregation_lean)
        src, dst = coo[0], coo[1]
        # A non-finite input row makes the attention of every target it
        # feeds NaN, as in GATConv.  The adjoint sums over the targets of a
        # source (r and c_j below) would carry that NaN to every source of
        # those targets and, through K, to their targets; they leave out
        # the non-finite terms instead (a mask on the device, no host
        # synchronisation), so the NaN rows of the output are GATConv's.
        finite_alpha = _finite_or_zero(alpha).unsqueeze(-1)  # [E, H, 1]
        h_e = _finite_or_zero(h_e)
        # r(j) and c_j in one sum over the out-edges of each source:
        with_ones = torch.cat([h_e, h_e.new_ones(num_dst, H, 1)], dim=-1)
        if aggregation_lean:  # the same sum with the edges reversed
            r_and_mass = attention_aggregate(finite_alpha.squeeze(-1),
                                             with_ones, coo.flip(0), num_src)
        else:
            r_and_mass = with_ones.new_zeros(
                num_src, H, self.rank + 1).index_add(
                    0, src, with_ones.index_select(0, dst) * finite_alpha)
        r, mass = r_and_mass.split([self.rank, 1], dim=-1)

        # J = 1/2 sum e^T Lambda^-1 e + 1/2 sum r^T Lambda^-1 r - Tr(We^T Wr)
        # with Tr(W_e^T W_r) = Tr(H_r^T K^T H_e) = sum_i h_e(i)^T e(i); it
        # trains Lambda only (see the class docstring).  Sums over the
        # graph, without its non-finite rows:
        with torch.no_grad():
            e_const = _finite_or_zero(e)
            squares = torch.cat([e_const, r]).square().sum(0)  # [H, s]
            trace = (h_e * e_const).sum((0, 2))  # [H]
        inv = (-self.log_singular_values.to(dtype)).exp()  # Lambda^-1 [H, s]
        twice_J = torch.sub((squares * inv).sum(-1), trace, alpha=2.0)
        self._ksvd_loss = torch.dot(twice_J, twice_J) / (
            2 * max(num_dst, 1))**2

        # The attention a source receives, c_j = sum_i kappa_ij, ranges
        # from ~0 to the number of its out-edges; the source-side GP reads
        # r(j) / max(1, c_j), as bounded as e(i) (a convex combination).
        r_bounded = r / mass.clamp(min=1.0)
        f_e, f_r = svgp_pair_sample(
            (e, r_bounded), self.log_singular_values.to(dtype),
            self.inducing_mean.to(dtype),
            self.inducing_scale_offdiag.to(dtype),
            self.inducing_log_scale_diag.to(dtype),
            self._noise(num_dst, num_src, e, generator))
        # The source-side sample reaches the targets through K:
        out = self._neighbourhood_sum(coo, alpha, f_r, num_src, num_dst,
                                      aggregation_lean) + f_e
        return alpha, out

    def edge_update(self, gate_j: Tensor, gate_i: OptTensor,
                    edge_attr: OptTensor, index: Tensor, ptr: OptTensor,
                    dim_size: Optional[int]) -> Tensor:
        alpha = gate_j if gate_i is None else gate_j + gate_i
        if index.numel() == 0:
            return alpha
        edge_gate = self._edge_gate(edge_attr)
        if edge_gate is not None:
            alpha = alpha + edge_gate
        alpha = F.leaky_relu(alpha, self.negative_slope)
        alpha = softmax(alpha, index, ptr, dim_size)
        return F.dropout(alpha, p=self.dropout, training=self.training)

    # --------------------------------------------------------------- helpers

    def _check_batch_size(self,
                          batch: Union[OptTensor, Tuple[Tensor, Tensor]],
                          batch_size: Optional[int]) -> None:
        r"""Check :obj:`batch_size` where :obj:`batch` is given (the vectors
        are checked with the other inputs)."""
        if torch.compiler.is_compiling() or batch is None:
            return
        name = type(self).__name__
        if batch_size is not None and (isinstance(batch_size, bool) or
                                       not isinstance(batch_size, int)
                                       or batch_size < 1):
            raise ValueError(f"{name}: 'batch_size' must be a positive "
                             f"integer, the number of graphs (got "
                             f"{batch_size!r})")

    def _coo(self, edge_index: Adj, x_src: Tensor, x_dst: OptTensor,
             size: Size) -> Tuple[Tensor, int, int]:
        r"""The edges as a ``[2, E]`` (source, target) tensor in the order of
        the adjacency's values (so attention weights can be written back into
        a sparse adjacency), and the numbers of source and target nodes."""
        if is_sparse(edge_index):  # adj_t: (targets, sources)
            return (adjacency_edges(edge_index), edge_index.size(1),
                    edge_index.size(0))
        num_src = x_src.size(0) if size is None else size[0]
        if size is not None:
            num_dst = size[1]
        elif x_dst is not None:
            num_dst = x_dst.size(0)
        else:  # as MessagePassing: from the largest target index, a host
            # synchronisation on CUDA (the output's row count is read from
            # the data); passing size=(N_s, N_t) avoids it, as for GATConv.
            num_dst = int(edge_index[1].max()) + 1 if edge_index.numel() else 0
        return edge_index, num_src, num_dst

def _finite_or_zero(values: Tensor) -> Tensor:
    return torch.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)
