r"""A node-classification dataset as ikgat trains on it: one graph, its
splits, how it is scored and what the model's output looks like."""
import copy
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from torch import Tensor
from torch_geometric.data import Data


@dataclass
class NodeDataset:
    r"""One graph with the properties that training reads from it instead
    of branching on its name.

    Args:
        name (str): The name ``--dataset`` takes, e.g. ``'Cora'``.
        data (torch_geometric.data.Data): The graph, with ``x``,
            ``edge_index``, ``y`` and the masks ``train_mask``, ``val_mask``
            and ``test_mask``, 1-D for one split or ``(N, num_splits)``.
        num_classes (int): The output channels of the model.
        score (callable): ``score(logits, y, mask) -> float``, higher is
            better, with a ``name`` (:mod:`ikgat.data.scores`).
        out_heads (int, optional): Heads of the output layer (8 for PubMed
            in the GAT paper). (default: :obj:`1`)
        batch_size (int, optional): Seed nodes per mini-batch step when the
            graph is too large for full-batch training. (default:
            :obj:`None`, full batch)
        fan_out (tuple, optional): In-neighbours sampled per node at each
            hop with :obj:`batch_size`. (default: :obj:`(10, 10)`)
        normalize_features (bool, optional): Whether the features were
            row-normalised. (default: :obj:`False`)
    """
    name: str
    data: Data
    num_classes: int
    score: Callable[[Tensor, Tensor, Tensor], float]
    out_heads: int = 1
    batch_size: Optional[int] = None
    fan_out: Tuple[int, int] = (10, 10)
    normalize_features: bool = False

    @property
    def num_features(self) -> int:
        return self.data.num_features

    @property
    def num_splits(self) -> int:
        r"""The number of fixed splits (columns of the masks)."""
        mask = self.data.train_mask
        return 1 if mask.dim() == 1 else mask.size(1)

    def split(self, index: int = 0) -> Data:
        r"""The graph with the masks of split :obj:`index` (1-D)."""
        if not 0 <= index < self.num_splits:
            raise ValueError(f'{self.name} has {self.num_splits} split(s), '
                             f'numbered 0 to {self.num_splits - 1} (got '
                             f'{index})')
        if self.num_splits == 1:
            return self.data
        data = copy.copy(self.data)
        for key in ('train_mask', 'val_mask', 'test_mask'):
            data[key] = self.data[key][:, index]
        return data
