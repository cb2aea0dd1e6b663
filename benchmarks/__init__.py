r"""The lab: studies of :mod:`ikgat`, run from a checkout's root as
``python -m benchmarks.<study>`` (not part of the installed package).

Accuracy and correctness:

* :mod:`~benchmarks.planetoid`: the GAT protocol over seeds on Cora,
  CiteSeer and PubMed, the validation-only search, and the Markdown summary
  (:mod:`~benchmarks.summary`);
* :mod:`~benchmarks.tuned`: the tables from tuned configurations: every
  layer's options searched with one trial budget (the search of ``ikgat
  tune``), the best evaluated on seeds or fixed splits the search never
  used, and paired with its PyG baseline;
* :mod:`~benchmarks.spectral_points`: runs at another number of spectral
  points paired by seed with the Planetoid table's (the evidence for a
  default R);
* :mod:`~benchmarks.ogbn`: the same on OGB's node-property datasets;
* :mod:`~benchmarks.exactness`: the figures behind the correctness claims;
* :mod:`~benchmarks.explainers`: PyG's explainers on every layer;
* :mod:`~benchmarks.batch_dependence`: a graph's outputs alone and in a
  batch of graphs;
* :mod:`~benchmarks.sampled_vs_full`: outputs on neighbour-sampled
  subgraphs against the full graph.

Uncertainty and what the models learned:

* :mod:`~benchmarks.uncertainty`, :mod:`~benchmarks.kep_diagnostics`,
  :mod:`~benchmarks.mikan_draws`: calibration and uncertainty;
* :mod:`~benchmarks.eval_stability`: how steady each layer's evaluation
  output is in PyG's ``examples/gat.py``, against GATConv's;
* :mod:`~benchmarks.figures`: the figures of the inspection guide
  (docs/guides/inspection.md).

Time and memory on CPU:

* :mod:`~benchmarks.speed` (with :mod:`~benchmarks.speed_steps`),
  :mod:`~benchmarks.scale`, :mod:`~benchmarks.contention`: time and memory
  against GATConv;
* :mod:`~benchmarks.transformer_speed`: time and memory against PyG's
  TransformerConv;
* :mod:`~benchmarks.epoch_speed`: a whole training epoch of the GAT recipe
  with every layer, beside the PyG layer it replaces;
* :mod:`~benchmarks.startup`: importing ikgat against importing PyG, and
  ``ikgat --help``;
* :mod:`~benchmarks.node_floor`: the node terms' time against a floor from
  this machine's measured sine, cosine and multiply-add rates;
* :mod:`~benchmarks.compile_pays`: where compiling the CPU node tables
  pays;
* :mod:`~benchmarks.minibatch`: mini-batch (neighbour-sampled) training
  throughput, and the speed-up from 1 to 2 data-parallel processes.

The GPU path, checked without a GPU:

* :mod:`~benchmarks.compile_breaks`: graph breaks and recompilations under
  :func:`torch.compile`;
* :mod:`~benchmarks.launches`: operations per CUDA step, counted on CPU;
* :mod:`~benchmarks.gpu_memory`: CUDA memory predicted on the ``meta``
  device;
* :mod:`~benchmarks.gpu_compile`: every Triton kernel compiled for sm_90 and
  sm_80, with its registers and spills;
* :mod:`~benchmarks.gpu_model`: a cost model of every Triton kernel.
* :mod:`~benchmarks.gpu_layers`: every GPU layer measurement, beside the
  cost model's prediction, in one committed file;
* :mod:`~benchmarks.gpu_profile`: a layer step's device time, kernel by
  kernel (torch.profiler).

On a GPU:

* :mod:`~benchmarks.gpu_speed`: one layer and the fused attention against
  the copy bandwidth;
* :mod:`~benchmarks.cuda_study`: the whole GPU study in one command.

:mod:`benchmarks.harness` holds what the studies share.  Results go to
``benchmarks/results/``.  Imports flow one way: benchmarks import
:mod:`ikgat`, never the reverse.
"""
