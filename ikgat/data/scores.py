r"""How a dataset scores a model: a callable of ``(logits, y, mask)`` that
returns a float, higher is better, with the ``name`` shown in logs.

The training loop selects its epoch on the validation split's score, so
that a dataset scored by ROC-AUC selects by ROC-AUC, with no branch on the
dataset in the loop."""
from torch import Tensor


class Accuracy:
    r"""The share of the nodes in :obj:`mask` whose arg-max logit is their
    label."""
    name = 'accuracy'

    def __call__(self, logits: Tensor, y: Tensor, mask: Tensor) -> float:
        return float((logits[mask].argmax(-1) == y[mask]).float().mean())


class ROCAUC:
    r"""The area under the ROC curve of the positive class's probability
    (class 1 of a two-class output) over the nodes in :obj:`mask`
    (:func:`ikgat.metrics.auroc`)."""
    name = 'ROC-AUC'

    def __call__(self, logits: Tensor, y: Tensor, mask: Tensor) -> float:
        from ikgat.metrics.uncertainty import auroc
        positive = logits[mask].softmax(-1)[:, 1]
        return auroc(positive, y[mask] == 1)


class OGBEvaluator:
    r"""The score of OGB's own :class:`~ogb.nodeproppred.Evaluator` of the
    dataset :obj:`name` (accuracy for ``ogbn-arxiv`` and
    ``ogbn-products``).

    Args:
        name (str): The OGB dataset, e.g. ``'ogbn-arxiv'``.
    """
    def __init__(self, name: str):
        from ogb.nodeproppred import Evaluator
        self.evaluator = Evaluator(name)
        self.key = self.evaluator.eval_metric
        self.name = f'OGB {self.key}'

    def __call__(self, logits: Tensor, y: Tensor, mask: Tensor) -> float:
        return float(self.evaluator.eval({
            'y_true': y[mask].view(-1, 1).cpu(),
            'y_pred': logits[mask].argmax(-1, keepdim=True).cpu(),
        })[self.key])
