r"""Seeds, devices, threads and compiled models of benchmark runs."""
import random
from typing import Iterable, List, Optional

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    r"""Seed Python's, NumPy's and torch's global generators."""
    random.seed(seed)
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)


def parse_seeds(text: str) -> List[int]:
    r"""``'20'`` → 0..19; ``'0-19'`` → 0..19; ``'3,5,10-12'`` → 3, 5,
    10, 11, 12."""
    text = str(text).strip()
    if text.isdigit():
        return list(range(int(text)))
    seeds: List[int] = []
    for part in text.split(','):
        part = part.strip()
        try:
            if '-' in part:
                low, high = (int(v) for v in part.split('-'))
                if high < low:
                    raise ValueError
                seeds.extend(range(low, high + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ValueError(
                f'Invalid seeds {text!r}: give a count (20), a range (0-19) '
                f'or a list (0,3,10-12)') from None
    return list(dict.fromkeys(seeds))


def compact_seeds(seeds: Iterable[int]) -> str:
    r"""The inverse of :func:`parse_seeds`: ``[0, 1, 2, 5]`` → ``'0-2,5'``,
    ``[3]`` → ``'3-3'``."""
    values = sorted(set(int(s) for s in seeds))
    parts, start = [], None
    for i, value in enumerate(values):
        if start is None:
            start = value
        if i + 1 == len(values) or values[i + 1] != value + 1:
            parts.append(str(start) if start == value else f'{start}-{value}')
            start = None
    text = ','.join(parts)
    # One seed alone would read as a count ('3' is 0-2): write it as a range.
    return f'{text}-{text}' if text.isdigit() else text


def resolve_device(device: str = 'auto') -> torch.device:
    if device == 'auto':
        device = 'cuda' if torch.cuda.is_available() else 'cpu'
    return torch.device(device)


def set_threads(threads: Optional[int]) -> None:
    r"""``torch.set_num_threads(threads)`` unless :obj:`threads` is
    :obj:`None` or 0."""
    if threads:
        torch.set_num_threads(threads)


#: Compilations of one function that dynamo allows in a session: every layer
#: of a class shares the code of its ``forward``, and each layer is compiled
#: for itself (and again with gradients off); at dynamo's default of 8 the
#: later layers of a session silently ran eagerly.
RECOMPILE_LIMIT = 64


def compiled(model: torch.nn.Module) -> torch.nn.Module:
    r""":obj:`model` through :func:`torch.compile` with dynamic shapes, with
    dynamo's per-function recompile limit raised to
    :data:`RECOMPILE_LIMIT` for the session."""
    torch._dynamo.config.recompile_limit = max(
        torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    return torch.compile(model, dynamic=True)
