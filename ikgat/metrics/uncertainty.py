"""Uncertainty metrics for classifiers: ranking, calibration and proper scores.

Every function accepts torch tensors or numpy arrays (converted with
:func:`torch.as_tensor`; tensors are detached), computes in float64 and
returns a plain Python ``float``. Nothing is differentiable.

Conventions
-----------
* **Fractions, not percentages.** Every metric is returned on its natural
  scale (accuracy 0.93, not 93).
* **Shapes.** ``probs`` / ``logits`` are ``(num_samples, num_classes)``;
  ``labels`` are 1-D integer class indices; scores, confidences and masks are
  1-D with one entry per sample.
* **Confidence** is the maximum softmax probability (MSP), ``probs.max(1)``.
  The prediction is ``argmax`` over classes; among equal maxima the lowest
  class index wins (``torch.argmax`` behaviour).
* **Ties in rankings** never depend on the order of the input:

  - :func:`aurc` treats samples with equal confidence as one block and uses
    the *expected* risk under a uniformly random order inside the block
    (equivalently, the average of the AURC over all tie-breaks);
  - :func:`auroc` counts a tied (positive, negative) pair as 1/2;
  - :func:`fpr_at_tpr` and :func:`aupr` only place thresholds at distinct
    score values, so tied samples are accepted or rejected together.
* **Thresholds.** A sample is predicted positive when ``score >= threshold``.
* **Validation** (:mod:`ikgat.metrics.inputs`). Malformed input raises
  :class:`ValueError` naming the offending shape or value and how to fix it.
  Probabilities must be non-negative and each row must sum to 1 within
  :data:`PROBABILITY_SUM_TOLERANCE`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ikgat.metrics.inputs import (
    PROBABILITY_SUM_TOLERANCE,
    ArrayLike,
    as_binary,
    as_labels,
    as_matrix,
    as_probabilities,
    as_scores,
    require_both_classes,
)

__all__ = [
    "NLL_PROBABILITY_FLOOR",
    "PROBABILITY_SUM_TOLERANCE",
    "accuracy",
    "aupr",
    "aupr_error",
    "aupr_success",
    "aurc",
    "auroc",
    "brier",
    "eaurc",
    "ece",
    "fpr_at_tpr",
    "nll",
    "uncertainty_report",
]

#: :func:`nll` clamps the probability of the true class to at least this
#: value, so a confident mistake costs ``-ln(1e-12) ~ 27.6`` instead of inf.
NLL_PROBABILITY_FLOOR = 1e-12


# --------------------------------------------------------------------------
# Shared steps (the input checks are in ikgat.metrics.inputs)
# --------------------------------------------------------------------------


def _confidence_and_correct(
    probs: Tensor, labels: Tensor
) -> tuple[Tensor, Tensor]:
    confidence, predictions = probs.max(dim=1)
    return confidence, predictions == labels


def _counts_at_thresholds(
    scores: Tensor, positives: Tensor
) -> tuple[Tensor, Tensor]:
    """Cumulative (true positives, false positives) at each distinct score.

    Thresholds are the distinct score values in descending order; entry ``j``
    counts the samples with ``score >= threshold_j``.
    """
    sorted_scores, order = torch.sort(scores, descending=True, stable=True)
    sorted_positives = positives[order].to(torch.float64)
    _, block_sizes = torch.unique_consecutive(
        sorted_scores, return_counts=True
    )
    block_ends = torch.cumsum(block_sizes, dim=0) - 1
    true_positives = torch.cumsum(sorted_positives, dim=0)[block_ends]
    false_positives = (block_ends + 1).to(torch.float64) - true_positives
    return true_positives, false_positives


# --------------------------------------------------------------------------
# Accuracy
# --------------------------------------------------------------------------


def accuracy(probs_or_logits: ArrayLike, labels: ArrayLike) -> float:
    """Fraction of samples whose arg-max class equals the label.

    ``accuracy = (1/n) * sum_i [argmax_c s_ic == y_i]``. Any scores work
    (probabilities or logits); among equal maxima the lowest class index is
    the prediction.
    """
    scores = as_matrix(probs_or_logits, "probs_or_logits")
    labels = as_labels(labels, scores.shape[0], scores.shape[1])
    return (scores.argmax(dim=1) == labels).to(torch.float64).mean().item()


# --------------------------------------------------------------------------
# Selective classification: risk-coverage
# --------------------------------------------------------------------------


def aurc(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Area under the risk-coverage curve (lower is better).

    Sort the ``n`` samples by confidence, most confident first. The risk at
    coverage ``k/n`` is the fraction of errors among the ``k`` most confident
    samples, and ``AURC = (1/n) * sum_{k=1..n} errors(k) / k``.

    Ties: a block of samples with equal confidence has no defined internal
    order, so ``errors(k)`` inside a block is its expectation under a
    uniformly random order of the block, ``errors_before_block +
    errors_in_block * (k - block_start) / block_size``. The result equals the
    average AURC over all tie-breaks and does not depend on input order.
    """
    confidence = as_scores(confidence, "confidence")
    errors = ~as_binary(correct, "correct", confidence.shape[0])
    num_samples = confidence.shape[0]

    sorted_confidence, order = torch.sort(
        confidence, descending=True, stable=True
    )
    sorted_errors = errors[order].to(torch.float64)
    _, block_sizes = torch.unique_consecutive(
        sorted_confidence, return_counts=True
    )
    block_ends = torch.cumsum(block_sizes, dim=0)
    block_starts = block_ends - block_sizes
    errors_through_block = torch.cumsum(sorted_errors, dim=0)[block_ends - 1]
    errors_in_block = torch.diff(
        errors_through_block, prepend=errors_through_block.new_zeros(1)
    )
    errors_before_block = errors_through_block - errors_in_block

    block_of_position = torch.repeat_interleave(
        torch.arange(block_sizes.numel()), block_sizes
    )
    coverage_counts = torch.arange(1, num_samples + 1, dtype=torch.float64)
    fraction_of_block_taken = (
        coverage_counts - block_starts[block_of_position]
    ) / block_sizes[block_of_position]
    expected_errors = (
        errors_before_block[block_of_position]
        + errors_in_block[block_of_position] * fraction_of_block_taken
    )
    return (expected_errors / coverage_counts).mean().item()


def _optimal_aurc(num_samples: int, num_errors: int) -> float:
    """AURC of the ideal ranking (all correct samples before all errors).

    With ``c = n - e`` correct samples the risk is 0 for ``k <= c`` and
    ``(k - c) / k`` afterwards, so ``AURC* = (1/n) * sum_{k=c+1..n} (k - c)/k``.
    """
    num_correct = num_samples - num_errors
    coverage_counts = torch.arange(
        num_correct + 1, num_samples + 1, dtype=torch.float64
    )
    return (
        (coverage_counts - num_correct) / coverage_counts
    ).sum().item() / num_samples


def eaurc(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Excess AURC: ``aurc(confidence, correct) - AURC*`` (0 for a perfect ranking).

    ``AURC*`` is the AURC of the optimal ranking with the same number of
    errors ``e`` out of ``n``, computed exactly from the discrete sequence
    ``AURC* = (1/n) * sum_{k=n-e+1..n} (k - n + e)/k`` rather than from its
    large-``n`` limit ``r + (1 - r) ln(1 - r)`` with error rate ``r = e/n``.
    """
    confidence = as_scores(confidence, "confidence")
    correct = as_binary(correct, "correct", confidence.shape[0])
    num_errors = int((~correct).sum())
    excess = aurc(confidence, correct) - _optimal_aurc(
        confidence.shape[0], num_errors
    )
    # No ranking beats the optimal one, so the excess is >= 0; the two sums
    # add the same terms in different orders, and a perfect ranking's
    # difference can round to -1e-16 (7 samples, 6 errors): clamp it.
    return max(excess, 0.0)


# --------------------------------------------------------------------------
# Ranking metrics (misclassification and OOD detection)
# --------------------------------------------------------------------------


def auroc(scores: ArrayLike, positives: ArrayLike) -> float:
    """Area under the ROC curve, in its Mann-Whitney form.

    ``AUROC = P(s_pos > s_neg) + 1/2 * P(s_pos == s_neg)`` over all
    (positive, negative) pairs. For misclassification detection pass the
    confidence as score and ``correct`` as positives; for OOD detection pass
    the in-distribution score and the in-distribution mask (or the reverse).
    Raises ValueError when only one class is present (the metric is undefined).
    """
    scores = as_scores(scores, "scores")
    positives = as_binary(positives, "positives", scores.shape[0])
    require_both_classes(positives, "AUROC")

    true_positives, false_positives = _counts_at_thresholds(scores, positives)
    num_negatives = false_positives[-1]
    positives_in_block = torch.diff(
        true_positives, prepend=true_positives.new_zeros(1)
    )
    negatives_in_block = torch.diff(
        false_positives, prepend=false_positives.new_zeros(1)
    )
    negatives_below_block = num_negatives - false_positives
    pairs_won = (
        positives_in_block * (negatives_below_block + 0.5 * negatives_in_block)
    ).sum()
    return (pairs_won / (true_positives[-1] * num_negatives)).item()


def fpr_at_tpr(
    scores: ArrayLike, positives: ArrayLike, tpr: float = 0.95
) -> float:
    """False positive rate at the first threshold whose TPR reaches ``tpr``.

    Thresholds run over the distinct scores from high to low, a sample being
    predicted positive when ``score >= threshold``. The result is the FPR at
    the highest threshold with ``TPR >= tpr`` -- the lowest FPR any threshold
    achieves while keeping ``TPR >= tpr`` -- without interpolation between
    thresholds. ``tpr=0.95`` gives the usual FPR95.
    Raises ValueError when only one class is present (the metric is undefined).
    """
    if not 0.0 < tpr <= 1.0:
        raise ValueError(
            f"tpr must lie in (0, 1], got {tpr!r}; e.g. tpr=0.95."
        )
    scores = as_scores(scores, "scores")
    positives = as_binary(positives, "positives", scores.shape[0])
    require_both_classes(positives, "FPR at TPR")

    true_positives, false_positives = _counts_at_thresholds(scores, positives)
    true_positive_rates = true_positives / true_positives[-1]
    first_reaching = int(torch.nonzero(true_positive_rates >= tpr)[0])
    return (false_positives[first_reaching] / false_positives[-1]).item()


def aupr(scores: ArrayLike, positives: ArrayLike) -> float:
    """Area under the precision-recall curve as average precision.

    ``AP = sum_j (R_j - R_{j-1}) * P_j`` over the distinct scores taken as
    thresholds from high to low, with ``R_0 = 0`` and precision ``P_j`` and
    recall ``R_j`` of the rule ``score >= threshold_j`` (the step-wise
    definition of ``sklearn.metrics.average_precision_score``, no trapezoids).
    Raises ValueError when only one class is present (the metric is undefined).
    """
    scores = as_scores(scores, "scores")
    positives = as_binary(positives, "positives", scores.shape[0])
    require_both_classes(positives, "AUPR")

    true_positives, false_positives = _counts_at_thresholds(scores, positives)
    precision = true_positives / (true_positives + false_positives)
    recall = true_positives / true_positives[-1]
    recall_gain = torch.diff(recall, prepend=recall.new_zeros(1))
    return (recall_gain * precision).sum().item()


def aupr_success(confidence: ArrayLike, correct: ArrayLike) -> float:
    """AUPR with correct predictions as positives, ranked by ``confidence``."""
    return aupr(confidence, correct)


def aupr_error(confidence: ArrayLike, correct: ArrayLike) -> float:
    """AUPR with errors as positives, ranked by ``-confidence``."""
    confidence = as_scores(confidence, "confidence")
    correct = as_binary(correct, "correct", confidence.shape[0])
    return aupr(-confidence, ~correct)


# --------------------------------------------------------------------------
# Calibration and proper scoring rules
# --------------------------------------------------------------------------


def ece(probs: ArrayLike, labels: ArrayLike, num_bins: int = 15) -> float:
    """Expected calibration error over the max-probability confidence.

    ``ECE = sum_b (n_b / n) * |acc_b - conf_b|`` where bin ``b`` (``b =
    1..num_bins``) is the right-closed interval ``((b-1)/num_bins,
    b/num_bins]`` of MSP confidence, ``acc_b`` the accuracy and ``conf_b``
    the mean confidence of its ``n_b`` samples; empty bins contribute 0.
    A confidence exactly on an edge goes to the lower bin (0.2 with 5 bins is
    in (0.0, 0.2]). Edges are ``i / num_bins`` in float64; float32 inputs are
    compared at their float32 value.
    """
    if (
        isinstance(num_bins, bool)
        or not isinstance(num_bins, int)
        or num_bins < 1
    ):
        raise ValueError(
            f"num_bins must be a positive integer, got {num_bins!r}."
        )
    probs = as_probabilities(probs)
    labels = as_labels(labels, probs.shape[0], probs.shape[1])
    confidence, correct = _confidence_and_correct(probs, labels)

    upper_edges = torch.arange(1, num_bins + 1, dtype=torch.float64) / num_bins
    # right=False: index i satisfies upper_edges[i-1] < conf <= upper_edges[i];
    # the clamp keeps a confidence above 1 by rounding in the last bin.
    bin_index = torch.bucketize(confidence, upper_edges, right=False).clamp(
        max=num_bins - 1
    )
    correct_per_bin = torch.bincount(
        bin_index, weights=correct.to(torch.float64), minlength=num_bins
    )
    confidence_per_bin = torch.bincount(
        bin_index, weights=confidence, minlength=num_bins
    )
    # |sum(correct) - sum(conf)| / n == (n_b / n) * |acc_b - conf_b|
    return (
        (correct_per_bin - confidence_per_bin).abs().sum() / probs.shape[0]
    ).item()


def nll(probs: ArrayLike, labels: ArrayLike) -> float:
    """Mean negative log-likelihood of the true class.

    ``NLL = -(1/n) * sum_i ln max(p_{i, y_i}, NLL_PROBABILITY_FLOOR)``; the
    clamp at ``1e-12`` keeps a zero probability finite.
    """
    probs = as_probabilities(probs)
    labels = as_labels(labels, probs.shape[0], probs.shape[1])
    true_class_probs = probs.gather(1, labels[:, None]).squeeze(1)
    return (
        -true_class_probs.clamp(min=NLL_PROBABILITY_FLOOR).log().mean().item()
    )


def brier(probs: ArrayLike, labels: ArrayLike) -> float:
    """Multi-class Brier score: ``(1/n) * sum_i sum_c (p_ic - [c == y_i])^2``.

    It lies in ``[0, 2]``; for two classes it is twice the binary Brier score.
    """
    probs = as_probabilities(probs)
    labels = as_labels(labels, probs.shape[0], probs.shape[1])
    one_hot = torch.nn.functional.one_hot(labels, probs.shape[1]).to(
        torch.float64
    )
    return (probs - one_hot).pow(2).sum(dim=1).mean().item()


# --------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------


def uncertainty_report(
    probs: ArrayLike, labels: ArrayLike
) -> dict[str, float]:
    """All metrics of this module from softmax outputs, as plain fractions.

    Confidence is the MSP and ``correct`` is ``argmax == label``. Keys, in
    order: ``accuracy``, ``aurc``, ``eaurc``, ``auroc`` (correct as positive),
    ``fpr95`` (:func:`fpr_at_tpr` with correct as positive, ``tpr=0.95``),
    ``aupr_success``, ``aupr_error``, ``ece`` (15 bins), ``nll``, ``brier``.
    None is a percentage. When every prediction is correct, or every one is
    wrong, the four ranking metrics ``auroc``, ``fpr95``, ``aupr_success`` and
    ``aupr_error`` are undefined and reported as ``nan``.
    """
    probs = as_probabilities(probs)
    labels = as_labels(labels, probs.shape[0], probs.shape[1])
    confidence, correct = _confidence_and_correct(probs, labels)
    has_both_outcomes = bool(correct.any()) and not bool(correct.all())

    return {
        "accuracy": accuracy(probs, labels),
        "aurc": aurc(confidence, correct),
        "eaurc": eaurc(confidence, correct),
        "auroc": auroc(confidence, correct) if has_both_outcomes else math.nan,
        "fpr95": fpr_at_tpr(confidence, correct, 0.95)
        if has_both_outcomes
        else math.nan,
        "aupr_success": aupr_success(confidence, correct)
        if has_both_outcomes
        else math.nan,
        "aupr_error": aupr_error(confidence, correct)
        if has_both_outcomes
        else math.nan,
        "ece": ece(probs, labels),
        "nll": nll(probs, labels),
        "brier": brier(probs, labels),
    }
