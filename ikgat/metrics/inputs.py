"""What the metrics of :mod:`ikgat.metrics` accept: conversion and checks.

Every metric converts its arguments here before computing anything:
torch tensors or numpy arrays become detached tensors (float64 for scores
and probabilities, int64 for labels, bool for masks), and malformed input
raises :class:`ValueError` naming the offending shape or value and how to
fix it.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import torch
from torch import Tensor

ArrayLike: TypeAlias = Tensor | np.ndarray

#: Largest allowed ``|sum(probs[i]) - 1|`` for a row of probabilities.
PROBABILITY_SUM_TOLERANCE = 1e-4


def _as_tensor(values: ArrayLike, name: str) -> Tensor:
    if isinstance(values, Tensor):
        tensor = values.detach()
    else:
        tensor = torch.as_tensor(values)
    if tensor.numel() == 0:
        raise ValueError(
            f"{name} is empty (shape {tuple(tensor.shape)}); "
            "pass at least one sample."
        )
    return tensor


def _as_real(
    values: ArrayLike, name: str, ndim: int, layout: str, fix: str
) -> Tensor:
    """A real tensor with ``ndim`` dimensions, as float64.

    ``layout`` says what the dimensions hold and ``fix`` how to reshape
    other input; both go into the message of a wrong shape.
    """
    tensor = _as_tensor(values, name)
    if tensor.ndim != ndim:
        raise ValueError(
            f"{name} must be {layout}, got shape {tuple(tensor.shape)}; "
            f"{fix}."
        )
    if tensor.is_complex():
        raise ValueError(
            f"{name} must be real-valued, got dtype {tensor.dtype}."
        )
    return tensor.to(torch.float64)


def as_scores(values: ArrayLike, name: str) -> Tensor:
    """1-D finite real scores as float64."""
    scores = _as_real(
        values, name, 1, "1-D with one value per sample",
        "flatten it or pass probs.max(dim=1).values",
    )
    if not torch.isfinite(scores).all():
        raise ValueError(
            f"{name} contains NaN or infinite values; remove or replace them."
        )
    return scores


def as_binary(values: ArrayLike, name: str, num_samples: int) -> Tensor:
    """1-D boolean mask of length ``num_samples`` (accepts bool or 0/1 values)."""
    mask = _as_tensor(values, name)
    if mask.ndim != 1 or mask.shape[0] != num_samples:
        raise ValueError(
            f"{name} must have shape ({num_samples},) to match the scores, "
            f"got shape {tuple(mask.shape)}."
        )
    if mask.dtype != torch.bool:
        is_zero_or_one = (mask == 0) | (mask == 1)
        if not is_zero_or_one.all():
            bad_value = mask[~is_zero_or_one][0].item()
            raise ValueError(
                f"{name} must be boolean or contain only 0 and 1, found "
                f"{bad_value!r}; pass e.g. predictions == labels."
            )
        mask = mask == 1
    return mask


def as_matrix(values: ArrayLike, name: str) -> Tensor:
    """2-D ``(num_samples, num_classes)`` real matrix without NaN, as float64."""
    matrix = _as_real(
        values, name, 2, "2-D with shape (num_samples, num_classes)",
        f"for a single sample use {name}[None]",
    )
    if torch.isnan(matrix).any():
        raise ValueError(
            f"{name} contains NaN values; remove or replace them."
        )
    return matrix


def as_probabilities(values: ArrayLike) -> Tensor:
    """2-D rows of class probabilities: non-negative, each summing to 1."""
    probs = as_matrix(values, "probs")
    if not torch.isfinite(probs).all():
        raise ValueError(
            "probs contains infinite values; pass softmax outputs."
        )
    if (probs < 0).any():
        raise ValueError(
            f"probs contains negative values (minimum {probs.min().item():.6g}); "
            "pass softmax outputs, not logits."
        )
    deviation = (probs.sum(dim=1) - 1.0).abs()
    worst_row = int(deviation.argmax())
    if deviation[worst_row] > PROBABILITY_SUM_TOLERANCE:
        raise ValueError(
            f"each row of probs must sum to 1 (tolerance "
            f"{PROBABILITY_SUM_TOLERANCE}), but row {worst_row} sums to "
            f"{probs[worst_row].sum().item():.6g}; pass softmax outputs, e.g. "
            "logits.softmax(dim=1)."
        )
    return probs


def as_labels(
    values: ArrayLike, num_samples: int, num_classes: int
) -> Tensor:
    """1-D integer class indices in ``[0, num_classes)``, as int64."""
    labels = _as_tensor(values, "labels")
    if labels.ndim != 1:
        raise ValueError(
            f"labels must be 1-D class indices, got shape {tuple(labels.shape)}; "
            "for one-hot labels pass labels.argmax(dim=1)."
        )
    if (
        labels.dtype == torch.bool
        or labels.is_floating_point()
        or labels.is_complex()
    ):
        raise ValueError(
            f"labels must have an integer dtype, got {labels.dtype}; "
            "pass class indices, e.g. labels.long()."
        )
    if labels.shape[0] != num_samples:
        raise ValueError(
            f"labels has {labels.shape[0]} entries but there are {num_samples} "
            "samples (rows); pass one label per row."
        )
    labels = labels.to(torch.int64)
    out_of_range = (labels < 0) | (labels >= num_classes)
    if out_of_range.any():
        bad_label = int(labels[out_of_range][0])
        raise ValueError(
            f"labels must lie in [0, {num_classes - 1}] for {num_classes} "
            f"classes, found {bad_label}; check the label encoding or the "
            "number of columns."
        )
    return labels


def require_both_classes(positives: Tensor, metric_name: str) -> None:
    num_positives = int(positives.sum())
    if num_positives == 0 or num_positives == positives.numel():
        present = "positive" if num_positives else "negative"
        raise ValueError(
            f"{metric_name} is undefined when all {positives.numel()} samples "
            f"are {present}; it needs both positives and negatives."
        )
