r"""The KL term of the ELBO, summed over a model's variational layers."""
import torch
from torch import Tensor


def kl_divergence(model: torch.nn.Module) -> Tensor:
    r"""Return :math:`\sum_m \mathrm{KL}_m` over the modules of :obj:`model`
    (itself included) that define ``kl_divergence()``, the KL of their last
    forward pass; a zero scalar when there are none.

    The training loss of a variational model is
    ``nll + beta * kl_divergence(model)``.
    """
    terms = [
        module.kl_divergence() for module in model.modules()
        if callable(getattr(module, 'kl_divergence', None))
    ]
    if terms:
        return torch.stack([term.reshape(()) for term in terms]).sum()
    parameter = next(model.parameters(), None)
    return torch.zeros((), device=None if parameter is None else
                       parameter.device)
