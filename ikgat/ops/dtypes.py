r"""The dtypes in which the node terms accumulate, found without dispatched
operations where nothing changes.

:func:`torch.promote_types` goes through the dispatcher: one more host-side
operation per call in every step of a GPU layer, where the result is almost
always the dtype it was given.
"""
import torch


def promote_types(first: torch.dtype, second: torch.dtype) -> torch.dtype:
    r""":func:`torch.promote_types`, without its dispatched operation where
    the result is :obj:`first`: equal dtypes, or float64 or float32 with a
    narrower float."""
    if first == second or (first == torch.float64 and second.is_floating_point
                           ) or (first == torch.float32 and second in (
                               torch.float16, torch.bfloat16)):
        return first
    return torch.promote_types(first, second)


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    r"""The dtype in which logits, norms and softmaxes accumulate: float32
    for float16 and bfloat16 (float16 overflows at 65504 and bfloat16 keeps
    8 significant bits), the dtype itself for float32 and float64."""
    return promote_types(dtype, torch.float32)
