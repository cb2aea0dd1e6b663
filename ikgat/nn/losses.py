r"""The losses of the variational and KSVD layers, summed over a model:
:func:`kl_divergence` (the KL term of the ELBO) and :func:`ksvd_loss` (the
KSVD objective of :class:`~ikgat.KEPGATConv`)."""
import torch
from torch import Tensor


def kl_divergence(model: torch.nn.Module) -> Tensor:
    r"""Return :math:`\sum_m \mathrm{KL}_m` over the modules of :obj:`model`
    that define ``kl_divergence()``, the KL of their last forward pass; a
    zero scalar when there are none.

    The outermost module that defines the method accounts for everything
    below it (a layer reports its kernel's KL), so nothing is counted twice.
    The training loss of a variational model is
    ``nll + beta * kl_divergence(model)``.

    Example:
        >>> import torch
        >>> from ikgat import IKGATConv, MIKANConv
        >>> from ikgat.nn import kl_divergence
        >>> x = torch.randn(5, 6)
        >>> edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
        >>> deterministic = IKGATConv(6, 4, heads=2, kernel='rbf')
        >>> kl_divergence(deterministic)
        tensor(0.)
        >>> conv = MIKANConv(6, 4, heads=2)
        >>> out = conv(x, edge_index)          # training mode: one draw
        >>> bool(kl_divergence(conv) > 0)
        True
    """
    return sum_outermost(model, 'kl_divergence')


def sum_outermost(model: torch.nn.Module, method: str) -> Tensor:
    r"""Return the sum of ``module.<method>()`` over the outermost modules of
    :obj:`model` that define :obj:`method` (a module below one that defines
    it is not counted again); a zero scalar when there are none."""
    owners = []
    for name, module in model.named_modules():
        if not callable(getattr(module, method, None)):
            continue
        if any(owner == '' or name.startswith(owner + '.')
               for owner, _ in owners):
            continue
        owners.append((name, module))
    if owners:
        return torch.stack([getattr(module, method)().reshape(())
                            for _, module in owners]).sum()
    parameter = next(model.parameters(), None)
    return torch.zeros((), device=None if parameter is None else
                       parameter.device)


def ksvd_loss(model: torch.nn.Module) -> Tensor:
    r"""Return :math:`\sum_m L_{\mathrm{ksvd}, m}` over the modules of
    :obj:`model` that define ``ksvd_loss()`` (the KSVD losses of their last
    forward pass); a zero scalar when there are none.  As
    :func:`ikgat.nn.kl_divergence`, the outermost module defining the method
    accounts for everything below it.  Training adds
    ``eta_ksvd * ksvd_loss(model)`` to the loss."""
    return sum_outermost(model, 'ksvd_loss')
