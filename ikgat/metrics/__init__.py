r"""Uncertainty metrics for classifiers: ranking, calibration and proper
scores (:mod:`~ikgat.metrics.uncertainty`), on inputs checked by
:mod:`~ikgat.metrics.inputs`."""
from ikgat.metrics.inputs import PROBABILITY_SUM_TOLERANCE
from ikgat.metrics.uncertainty import (
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

__all__ = [
    'NLL_PROBABILITY_FLOOR', 'PROBABILITY_SUM_TOLERANCE', 'accuracy', 'aupr',
    'aupr_error', 'aupr_success', 'aurc', 'auroc', 'brier', 'eaurc', 'ece',
    'fpr_at_tpr', 'nll', 'uncertainty_report'
]
