r"""The lab: studies of :mod:`ikgat`, run from a checkout's root as
``python -m benchmarks.<study>`` (not part of the installed package).

* :mod:`~benchmarks.planetoid`: the GAT protocol over seeds on Cora,
  CiteSeer and PubMed, the validation-only search, and the Markdown summary
  (:mod:`~benchmarks.summary`);
* :mod:`~benchmarks.ogbn`: the same on OGB's node-property datasets;
* :mod:`~benchmarks.uncertainty`, :mod:`~benchmarks.kep_diagnostics`,
  :mod:`~benchmarks.mikan_draws`: calibration and uncertainty;
* :mod:`~benchmarks.speed` (with :mod:`~benchmarks.speed_steps`),
  :mod:`~benchmarks.scale`, :mod:`~benchmarks.contention`: time and memory;
* :mod:`~benchmarks.minibatch`: mini-batch (neighbour-sampled) training
  throughput, and the speed-up from 1 to 2 data-parallel processes;
* :mod:`~benchmarks.exactness`: the figures behind the correctness claims;
* :mod:`~benchmarks.figures`: the figures of the inspection guide
  (docs/guides/inspection.md).

:mod:`benchmarks.harness` holds what the studies share.  Results go to
``benchmarks/results/``.  Imports flow one way: benchmarks import
:mod:`ikgat`, never the reverse.
"""
