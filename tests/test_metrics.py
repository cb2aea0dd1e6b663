"""Tests for ikgat.metrics: hand-worked examples, scikit-learn cross-checks, errors."""

import itertools
import math

import numpy as np
import pytest
import torch
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    log_loss,
    mean_squared_error,
    roc_auc_score,
    roc_curve,
)

from ikgat.metrics import (
    NLL_PROBABILITY_FLOOR,
    accuracy,
    aupr,
    aupr_error,
    aupr_success,
    aurc,
    auroc,
    brier,
    eaurc,
    ece,
    fpr_at_tpr,
    nll,
    uncertainty_report,
)


def random_probs(
    rng: np.random.Generator, num_samples: int, num_classes: int
) -> np.ndarray:
    logits = rng.normal(scale=2.0, size=(num_samples, num_classes))
    return torch.as_tensor(logits).softmax(dim=1).numpy()


def tied_scores(rng: np.random.Generator, num_samples: int) -> np.ndarray:
    # Only 8 distinct values, so most samples share their score with others.
    return rng.integers(0, 8, size=num_samples) / 8.0


# --------------------------------------------------------------------------
# accuracy
# --------------------------------------------------------------------------


def test_accuracy_hand_example_with_logits():
    # argmax rows: [2,1]->0, [0,3]->1, [1,0]->0; labels 0,1,1 -> 2 of 3 right.
    logits = torch.tensor([[2.0, 1.0], [0.0, 3.0], [1.0, 0.0]])
    assert accuracy(logits, torch.tensor([0, 1, 1])) == pytest.approx(2 / 3)


def test_accuracy_tie_in_argmax_picks_lowest_class():
    # [0.5, 0.5] predicts class 0.
    probs = np.array([[0.5, 0.5], [0.5, 0.5]])
    assert accuracy(probs, np.array([0, 1])) == pytest.approx(0.5)


@pytest.mark.parametrize("seed", [0, 1])
def test_accuracy_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    probs = random_probs(rng, 200, 5)
    labels = rng.integers(0, 5, size=200)
    expected = accuracy_score(labels, probs.argmax(axis=1))
    assert accuracy(probs, labels) == pytest.approx(expected, abs=1e-12)


# --------------------------------------------------------------------------
# aurc / eaurc
# --------------------------------------------------------------------------


def naive_aurc_in_given_order(confidence, correct):
    """Stable sort by confidence (ties keep input order), then mean of risks."""
    order = sorted(range(len(confidence)), key=lambda i: -confidence[i])
    errors = 0
    risks = []
    for k, index in enumerate(order, start=1):
        errors += not correct[index]
        risks.append(errors / k)
    return sum(risks) / len(risks)


def test_aurc_and_eaurc_hand_example():
    # Sorted errors: [0, 1, 0, 1]; cumulative errors [0, 1, 1, 2].
    # Risks: 0/1, 1/2, 1/3, 2/4 -> AURC = (0 + 1/2 + 1/3 + 1/2) / 4 = 1/3.
    # Optimal (2 correct first): risks 0, 0, 1/3, 2/4 -> (5/6) / 4 = 5/24.
    # E-AURC = 1/3 - 5/24 = 1/8.
    confidence = torch.tensor([0.9, 0.8, 0.7, 0.6])
    correct = torch.tensor([True, False, True, False])
    assert aurc(confidence, correct) == pytest.approx(1 / 3, abs=1e-12)
    assert eaurc(confidence, correct) == pytest.approx(1 / 8, abs=1e-12)


def test_aurc_ties_use_expected_risk_and_ignore_input_order():
    # Block {0.9: correct}, block {0.5: correct, 0.5: error}.
    # k=1: 0; k=2: expected errors 0 + 1 * (1/2) -> risk 1/4; k=3: 1/3.
    # AURC = (0 + 1/4 + 1/3) / 3 = 7/36.
    # Same as averaging the two tie-breaks: (0+0+1/3)/3 = 1/9 and
    # (0+1/2+1/3)/3 = 5/18, mean (2/18 + 5/18)/2 = 7/36.
    expected = 7 / 36
    assert aurc([0.9, 0.5, 0.5], [1, 1, 0]) == pytest.approx(
        expected, abs=1e-12
    )
    assert aurc([0.5, 0.5, 0.9], [0, 1, 1]) == pytest.approx(
        expected, abs=1e-12
    )
    # Optimal: 2 correct then 1 error -> (0 + 0 + 1/3) / 3 = 1/9.
    assert eaurc([0.5, 0.5, 0.9], [0, 1, 1]) == pytest.approx(
        7 / 36 - 1 / 9, abs=1e-12
    )


def test_aurc_with_ties_equals_mean_over_all_orders():
    rng = np.random.default_rng(3)
    confidence = [0.2, 0.7, 0.2, 0.7, 0.7, 0.4]
    correct = list(rng.integers(0, 2, size=6).astype(bool))
    per_order = [
        naive_aurc_in_given_order(
            [confidence[i] for i in perm], [correct[i] for i in perm]
        )
        for perm in itertools.permutations(range(6))
    ]
    assert aurc(confidence, correct) == pytest.approx(
        float(np.mean(per_order)), abs=1e-12
    )


def test_aurc_without_ties_matches_naive_definition():
    rng = np.random.default_rng(4)
    confidence = rng.permutation(50) / 50.0
    correct = rng.random(50) < 0.7
    expected = naive_aurc_in_given_order(list(confidence), list(correct))
    assert aurc(confidence, correct) == pytest.approx(expected, abs=1e-12)


def test_eaurc_is_zero_for_perfect_ranking_and_optimum_near_closed_form():
    # Perfect ranking: every correct sample more confident than every error.
    num_samples, num_errors = 4000, 1000
    confidence = torch.linspace(1.0, 0.0, num_samples)
    correct = torch.arange(num_samples) < num_samples - num_errors
    assert eaurc(confidence, correct) == pytest.approx(0.0, abs=1e-12)
    # Its AURC approaches r + (1 - r) ln(1 - r) as n grows (r = 0.25).
    rate = num_errors / num_samples
    assert aurc(confidence, correct) == pytest.approx(
        rate + (1 - rate) * math.log(1 - rate), abs=1e-3
    )


def test_eaurc_is_never_negative_from_round_off():
    # The AURC and its optimum add the same terms in different orders; for
    # perfect rankings of every size up to 60 the difference may round
    # below zero (7 samples, 6 errors: -1.1e-16), the excess may not.
    for num_samples in range(2, 61):
        for num_errors in range(1, num_samples):
            correct = torch.arange(num_samples) < num_samples - num_errors
            confidence = torch.linspace(
                1.0, 0.0, num_samples, dtype=torch.float64
            )
            assert eaurc(confidence, correct) >= 0.0, (num_samples, num_errors)


def test_aurc_all_correct_and_all_wrong():
    assert aurc([0.9, 0.4], [1, 1]) == 0.0
    assert aurc([0.9, 0.4], [0, 0]) == 1.0
    assert eaurc([0.9, 0.4], [0, 0]) == pytest.approx(0.0, abs=1e-12)


# --------------------------------------------------------------------------
# auroc / fpr_at_tpr / aupr
# --------------------------------------------------------------------------


def test_auroc_hand_example_with_tie():
    # Positive-negative pairs: (0.9,0.7)=1, (0.9,0.3)=1, (0.7,0.7)=1/2,
    # (0.7,0.3)=1 -> 3.5 / 4 = 0.875.
    scores = torch.tensor([0.9, 0.7, 0.7, 0.3])
    positives = torch.tensor([1, 1, 0, 0])
    assert auroc(scores, positives) == pytest.approx(0.875, abs=1e-12)


def test_auroc_perfect_reversed_and_constant():
    assert auroc([0.9, 0.8, 0.1], [1, 1, 0]) == 1.0
    assert auroc([0.1, 0.2, 0.9], [1, 1, 0]) == 0.0
    assert auroc([0.5, 0.5, 0.5], [1, 0, 1]) == 0.5


def test_fpr_at_tpr_hand_example():
    # Positives [1,1,0,1,0,0] (P=3, N=3) at thresholds 0.9..0.4:
    #   0.9: TPR 1/3 FPR 0 | 0.8: TPR 2/3 FPR 0 | 0.7: TPR 2/3 FPR 1/3
    #   0.6: TPR 1   FPR 1/3  <- first with TPR >= 0.95, FPR95 = 1/3.
    # For tpr=0.5 the first threshold is 0.8, FPR 0.
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    positives = np.array([1, 1, 0, 1, 0, 0])
    assert fpr_at_tpr(scores, positives) == pytest.approx(1 / 3, abs=1e-12)
    assert fpr_at_tpr(scores, positives, tpr=0.5) == 0.0
    assert fpr_at_tpr(scores, positives, tpr=1.0) == pytest.approx(
        1 / 3, abs=1e-12
    )


def test_fpr_at_tpr_accepts_tied_samples_together():
    # Threshold 0.9: TPR 1/2 FPR 0; threshold 0.5 admits both tied samples:
    # TPR 1, FPR 1/2 -> FPR95 = 1/2 (no interpolation inside the tie).
    assert fpr_at_tpr([0.9, 0.5, 0.5, 0.1], [1, 1, 0, 0]) == 0.5


def test_aupr_hand_examples():
    # Scores 0.9..0.6 with positives [1,0,1,0] (P=2):
    #   0.9: P=1 R=1/2 | 0.8: P=1/2 R=1/2 | 0.7: P=2/3 R=1 | 0.6: P=1/2 R=1
    #   AP = 1/2 * 1 + 0 + 1/2 * 2/3 + 0 = 5/6.
    assert aupr([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]) == pytest.approx(
        5 / 6, abs=1e-12
    )
    # With a tie, positives [0,1,0,1] on scores [0.9,0.5,0.5,0.1]:
    #   0.9: P=0 R=0 | 0.5: TP=1 FP=2 P=1/3 R=1/2 | 0.1: P=1/2 R=1
    #   AP = 1/2 * 1/3 + 1/2 * 1/2 = 5/12.
    assert aupr([0.9, 0.5, 0.5, 0.1], [0, 1, 0, 1]) == pytest.approx(
        5 / 12, abs=1e-12
    )


def test_aupr_success_and_error_hand_example():
    confidence = torch.tensor([0.9, 0.8, 0.7, 0.6])
    correct = torch.tensor([True, True, False, True])
    # Success (positives = correct, 3 of them), by confidence:
    #   0.9: P=1 R=1/3 | 0.8: P=1 R=2/3 | 0.7: P=2/3 R=2/3 | 0.6: P=3/4 R=1
    #   AP = 1/3 + 1/3 + 0 + 1/3 * 3/4 = 11/12.
    assert aupr_success(confidence, correct) == pytest.approx(
        11 / 12, abs=1e-12
    )
    # Error (positive = the 0.7 error), by -confidence: -0.6 (correct) first,
    # then -0.7 (error): P=1/2 R=1 -> AP = 1/2.
    assert aupr_error(confidence, correct) == pytest.approx(1 / 2, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ranking_metrics_match_sklearn_on_tied_random_data(seed):
    rng = np.random.default_rng(seed)
    scores = tied_scores(rng, 300)
    positives = rng.random(300) < 0.3 + 0.4 * scores  # informative but noisy
    assert auroc(scores, positives) == pytest.approx(
        roc_auc_score(positives, scores), abs=1e-12
    )
    assert aupr(scores, positives) == pytest.approx(
        average_precision_score(positives, scores), abs=1e-12
    )
    false_positive_rates, true_positive_rates, _ = roc_curve(
        positives, scores, drop_intermediate=False
    )
    for target in (0.5, 0.95):
        first_reaching = np.searchsorted(
            true_positive_rates, target, side="left"
        )
        assert fpr_at_tpr(scores, positives, tpr=target) == pytest.approx(
            false_positive_rates[first_reaching], abs=1e-12
        )


def test_ranking_metrics_accept_torch_float32_and_numpy_bool():
    rng = np.random.default_rng(5)
    scores = tied_scores(rng, 100).astype(np.float32)
    positives = rng.random(100) < 0.5
    from_numpy = auroc(scores, positives)
    from_torch = auroc(
        torch.from_numpy(scores), torch.from_numpy(positives).long()
    )
    assert (
        from_numpy
        == from_torch
        == pytest.approx(roc_auc_score(positives, scores))
    )


def test_aupr_error_matches_sklearn_on_negated_confidence():
    rng = np.random.default_rng(6)
    confidence = tied_scores(rng, 200)
    correct = rng.random(200) < 0.8
    assert aupr_error(confidence, correct) == pytest.approx(
        average_precision_score(~correct, -confidence), abs=1e-12
    )
    assert aupr_success(confidence, correct) == pytest.approx(
        average_precision_score(correct, confidence), abs=1e-12
    )


# --------------------------------------------------------------------------
# ece / nll / brier
# --------------------------------------------------------------------------


def test_ece_hand_example_with_right_closed_bins():
    # 5 bins: (0,.2], (.2,.4], (.4,.6], (.6,.8], (.8,1].
    #   conf .9 correct            -> bin (.8,1]:  acc 1,   conf .9,  gap .1,  share 1/4
    #   conf .7 wrong, .8 correct  -> bin (.6,.8]: acc 1/2, conf .75, gap .25, share 1/2
    #   conf .6 correct            -> bin (.4,.6]: acc 1,   conf .6,  gap .4,  share 1/4
    # ECE = .025 + .125 + .1 = 0.25 (0.8 and 0.6 sit on right edges).
    probs = torch.tensor(
        [[0.9, 0.1], [0.7, 0.3], [0.4, 0.6], [0.2, 0.8]], dtype=torch.float64
    )
    labels = torch.tensor([0, 1, 1, 1])
    assert ece(probs, labels, num_bins=5) == pytest.approx(0.25, abs=1e-12)


def test_ece_is_zero_when_confidence_matches_accuracy_per_bin():
    # Two samples at confidence 0.5, one right one wrong -> acc .5 = conf .5.
    probs = np.array([[0.5, 0.5], [0.5, 0.5]])
    assert ece(probs, np.array([0, 1])) == pytest.approx(0.0, abs=1e-12)


def test_ece_matches_loop_reference():
    rng = np.random.default_rng(7)
    probs = random_probs(rng, 500, 4)
    labels = rng.integers(0, 4, size=500)
    confidence = probs.max(axis=1)
    correct = probs.argmax(axis=1) == labels
    expected = 0.0
    for b in range(15):
        in_bin = (confidence > b / 15) & (confidence <= (b + 1) / 15)
        if in_bin.any():
            gap = abs(correct[in_bin].mean() - confidence[in_bin].mean())
            expected += in_bin.mean() * gap
    assert ece(probs, labels) == pytest.approx(expected, abs=1e-12)


def test_nll_and_brier_hand_example():
    probs = torch.tensor([[0.5, 0.5], [0.25, 0.75]], dtype=torch.float64)
    labels = torch.tensor([0, 1])
    # NLL = -(ln 0.5 + ln 0.75) / 2 = (0.693147 + 0.287682) / 2 = 0.490415.
    assert nll(probs, labels) == pytest.approx(0.4904146, abs=1e-6)
    # Brier: (0.5-1)^2 + 0.5^2 = 0.5; 0.25^2 + (0.75-1)^2 = 0.125; mean 0.3125.
    assert brier(probs, labels) == pytest.approx(0.3125, abs=1e-12)


def test_nll_clamps_zero_probability():
    # p(true) = 0 -> -ln(1e-12) ~ 27.631, finite.
    value = nll(np.array([[1.0, 0.0]]), np.array([1]))
    assert value == pytest.approx(-math.log(NLL_PROBABILITY_FLOOR))
    assert value == pytest.approx(27.6310211, abs=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
def test_nll_and_brier_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    num_classes = 6
    probs = random_probs(rng, 300, num_classes)
    labels = rng.integers(0, num_classes, size=300)
    assert nll(probs, labels) == pytest.approx(
        log_loss(labels, probs, labels=list(range(num_classes))), abs=1e-10
    )
    one_hot = np.eye(num_classes)[labels]
    # mean_squared_error averages over all n * C entries; Brier sums over C.
    assert brier(probs, labels) == pytest.approx(
        num_classes * mean_squared_error(one_hot, probs), abs=1e-12
    )


# --------------------------------------------------------------------------
# uncertainty_report
# --------------------------------------------------------------------------


def test_uncertainty_report_hand_example():
    # MSP 0.9 (class 0, correct), 0.8 (class 1, wrong), 0.7 (class 0, correct),
    # 0.6 (class 1, wrong): same ranking as the AURC hand example.
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.4, 0.6]])
    labels = np.array([0, 0, 0, 0])
    report = uncertainty_report(probs, labels)
    assert list(report) == [
        "accuracy",
        "aurc",
        "eaurc",
        "auroc",
        "fpr95",
        "aupr_success",
        "aupr_error",
        "ece",
        "nll",
        "brier",
    ]
    assert report["accuracy"] == pytest.approx(0.5)
    assert report["aurc"] == pytest.approx(1 / 3)
    assert report["eaurc"] == pytest.approx(1 / 8)
    # Correct {0.9, 0.7} vs wrong {0.8, 0.6}: pairs won 1+1+0+1 = 3 of 4.
    assert report["auroc"] == pytest.approx(0.75)
    # TPR reaches 1 at threshold 0.7, where the 0.8 error is accepted: FPR 1/2.
    assert report["fpr95"] == pytest.approx(0.5)
    assert report["aupr_success"] == pytest.approx(5 / 6)
    # Errors by -conf: -0.6 (err) P=1 R=1/2, -0.7, -0.8 (err) P=2/3 R=1 -> 5/6.
    assert report["aupr_error"] == pytest.approx(5 / 6)
    # 15 bins: 0.9 (acc 1), 0.8 (acc 0), 0.7 (acc 1), 0.6 (acc 0) each alone:
    # gaps .1 + .8 + .3 + .6 = 1.8, / 4 = 0.45.
    assert report["ece"] == pytest.approx(0.45)
    # NLL: -(ln .9 + ln .2 + ln .7 + ln .4) / 4.
    assert report["nll"] == pytest.approx(
        -(math.log(0.9 * 0.2 * 0.7 * 0.4)) / 4
    )
    # Brier: 2*(.1^2 + .8^2 + .3^2 + .6^2) / 4 = 2 * 1.1 / 4 = 0.55.
    assert report["brier"] == pytest.approx(0.55)


def test_uncertainty_report_marks_undefined_ranking_metrics_nan():
    probs = np.array([[0.9, 0.1], [0.2, 0.8]])
    report = uncertainty_report(probs, np.array([0, 1]))  # all correct
    assert (
        report["accuracy"] == 1.0
        and report["aurc"] == 0.0
        and report["eaurc"] == 0.0
    )
    for key in ("auroc", "fpr95", "aupr_success", "aupr_error"):
        assert math.isnan(report[key])
    assert all(isinstance(value, float) for value in report.values())


# --------------------------------------------------------------------------
# Error cases
# --------------------------------------------------------------------------

VALID_PROBS = np.array([[0.7, 0.3], [0.4, 0.6]])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: nll(VALID_PROBS, np.array([0, 1, 1])),
            r"labels has 3 entries but there are 2",
        ),
        (
            lambda: auroc([0.1, 0.2, 0.3], [1, 0]),
            r"positives must have shape \(3,\)",
        ),
        (
            lambda: aurc([0.1, 0.2], [1, 0, 1]),
            r"correct must have shape \(2,\)",
        ),
        (
            lambda: ece(np.array([0.7, 0.3]), np.array([0])),
            r"probs must be 2-D.*shape \(2,\)",
        ),
        (
            lambda: accuracy(np.ones((2, 2, 2)), np.array([0, 1])),
            r"must be 2-D.*\(2, 2, 2\)",
        ),
        (
            lambda: brier(VALID_PROBS, np.array([0, 2])),
            r"labels must lie in \[0, 1\].*found 2",
        ),
        (lambda: brier(VALID_PROBS, np.array([-1, 0])), r"found -1"),
        (lambda: nll(VALID_PROBS, np.array([0.0, 1.0])), r"integer dtype"),
        (
            lambda: nll(np.array([[0.7, 0.2], [0.5, 0.5]]), np.array([0, 1])),
            r"row 0 sums to 0\.9.*softmax",
        ),
        (
            lambda: ece(np.array([[2.0, -1.0]]), np.array([0])),
            r"negative.*softmax",
        ),
        (
            lambda: nll(np.zeros((0, 3)), np.array([], dtype=np.int64)),
            r"probs is empty",
        ),
        (
            lambda: aurc(np.array([]), np.array([], dtype=bool)),
            r"confidence is empty",
        ),
        (
            lambda: auroc([0.2, 0.9], [1, 1]),
            r"AUROC is undefined when all 2 samples are positive",
        ),
        (lambda: aupr([0.2, 0.9], [0, 0]), r"AUPR is undefined.*negative"),
        (lambda: aupr_success([0.2, 0.9], [1, 1]), r"AUPR is undefined"),
        (lambda: fpr_at_tpr([0.2, 0.9], [0, 0]), r"FPR at TPR is undefined"),
        (
            lambda: fpr_at_tpr([0.2, 0.9], [0, 1], tpr=0.0),
            r"tpr must lie in \(0, 1\]",
        ),
        (lambda: auroc([0.2, 0.9], [0, 2]), r"only 0 and 1, found 2"),
        (lambda: auroc([0.2, float("nan")], [0, 1]), r"NaN or infinite"),
        (
            lambda: ece(VALID_PROBS, np.array([0, 1]), num_bins=0),
            r"num_bins must be a positive",
        ),
    ],
)
def test_bad_input_raises_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
