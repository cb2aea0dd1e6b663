r"""The harness shared by the studies in :mod:`benchmarks`:

* :mod:`~benchmarks.harness.registry`: the models table and the GAT paper's
  protocol (benchmark configuration; the layers know nothing of it);
* :mod:`~benchmarks.harness.data`: the Planetoid data of a run;
* :mod:`~benchmarks.harness.runtime`: seeds, devices and threads;
* :mod:`~benchmarks.harness.results`: results CSV files (fsync'ed rows,
  validated on resume) and Markdown reports;
* :mod:`~benchmarks.harness.progress`: progress over runs and epochs;
* :mod:`~benchmarks.harness.statistics`: mean, std and Student-t intervals;
* :mod:`~benchmarks.harness.measurement`: timing and memory of steps;
* :mod:`~benchmarks.harness.provenance`: the git commit of the checkout.
"""
