"""Values kept with an edge_index tensor (ikgat.nn.graph_cache): valid for
the same tensor object, version and key; shared by the layers; freed with
the tensor."""
import gc
import weakref

import pytest
import torch

from ikgat import IKGATConv
from ikgat.models import TwoLayerGAT
from ikgat.nn import graph_cache
from ikgat.nn.conv.checks import INDICES_IN_RANGE
from ikgat.nn.conv.gat_base import SELF_LOOPS
from ikgat.nn.conv.ikgat_conv import CSR_WITH_SELF_LOOPS


def test_a_value_holds_for_the_same_tensor_version_and_key():
    edge_index = torch.tensor([[0, 1], [1, 2]])
    calls = []

    def compute():
        calls.append(1)
        return torch.ones(3)

    value = graph_cache.cached(edge_index, 'kind', 3, compute)
    assert graph_cache.cached(edge_index, 'kind', 3, compute) is value
    assert graph_cache.lookup(edge_index, 'other kind', 3) is None
    assert graph_cache.lookup(edge_index, 'kind', 4) is None  # another key
    assert graph_cache.lookup(edge_index.clone(), 'kind', 3) is None
    edge_index[0, 0] = 2  # in place: a new version
    assert graph_cache.lookup(edge_index, 'kind', 3) is None
    graph_cache.cached(edge_index, 'kind', 3, compute)
    assert len(calls) == 2
    graph_cache.clear()
    assert graph_cache.lookup(edge_index, 'kind', 3) is None


def test_values_are_freed_with_their_tensor():
    edge_index = torch.tensor([[0, 1], [1, 2]])
    value = weakref.ref(graph_cache.store(edge_index, 'kind', 0,
                                          torch.ones(3)))
    assert value() is not None
    del edge_index
    gc.collect()
    assert value() is None


@pytest.mark.parametrize('fused', ['always', False])
def test_the_layers_of_a_model_share_what_they_derive_from_the_graph(
        fused, monkeypatch):
    # Off the CPU (here 'meta', as on CUDA), what the layers derive from one
    # graph is computed once for both layers and every step: the CSR with
    # the self-loops added in the sort (fused path), or the self-looped
    # edges (the other path; stored here, since computing them reads
    # values, which meta tensors do not have).
    meta = torch.device('meta')
    model = TwoLayerGAT(6, 4, 3, IKGATConv, heads=2, dropout=0.0)
    for conv in (model.conv1, model.conv2):
        conv.fused_attention = fused
    model = model.to(meta)
    edge_index = torch.randint(0, 10, (2, 30), device=meta)
    if not fused:
        graph_cache.store(edge_index, SELF_LOOPS, 10, (
            torch.arange(30, device=meta),
            torch.randint(0, 10, (2, 40), device=meta)))
    asked, computed = [], []
    cached = graph_cache.cached

    def counting(tensor, kind, key, compute):
        asked.append(kind)
        return cached(tensor, kind, key,
                      lambda: computed.append(kind) or compute())

    monkeypatch.setattr(graph_cache, 'cached', counting)
    for _ in range(2):
        model(torch.zeros(10, 6, device=meta), edge_index)
    # The device-side assertion that the indices are in range, too, runs
    # once for the graph:
    kind = CSR_WITH_SELF_LOOPS if fused else SELF_LOOPS
    assert asked == [INDICES_IN_RANGE, kind] * 4
    assert computed == [INDICES_IN_RANGE] + ([kind] if fused else [])
    if fused:
        csr = graph_cache.lookup(edge_index, kind, (10, 10, 10))
        assert csr.self_loops == 10 and csr.src.shape == (40, )


def test_inference_tensors_are_computed_every_time():
    with torch.inference_mode():
        edge_index = torch.tensor([[0, 1], [1, 2]])
    calls = []
    for _ in range(2):
        graph_cache.cached(edge_index, 'kind', 0,
                           lambda: calls.append(1) or torch.ones(1))
    assert len(calls) == 2


def test_nothing_computed_in_inference_mode_is_kept():
    # Inference-mode tensors cannot be saved for backward: a model evaluated
    # under inference_mode must not leave them for another one that trains.
    edge_index = torch.tensor([[0, 1], [1, 2]])
    with torch.inference_mode():
        value = graph_cache.cached(edge_index, 'kind', 0,
                                   lambda: torch.ones(1))
    assert value.is_inference()
    assert graph_cache.lookup(edge_index, 'kind', 0) is None
    stored = graph_cache.cached(edge_index, 'kind', 0, lambda: torch.ones(1))
    with torch.inference_mode():  # a normal value is found there too
        assert graph_cache.cached(edge_index, 'kind', 0,
                                  lambda: torch.zeros(1)) is stored


def test_a_layer_trains_after_another_was_evaluated_in_inference_mode():
    # (With edge features the fused path saves the CSR's permutation for
    # backward.)
    meta = torch.device('meta')
    x = torch.randn(10, 6, device=meta)
    edge_index = torch.randint(0, 10, (2, 30), device=meta)
    edge_attr = torch.randn(30, 2, device=meta)
    evaluated, trained = (IKGATConv(6, 4, heads=2, edge_dim=2,
                                    add_self_loops=False).to(meta)
                          for _ in range(2))
    for conv in (evaluated, trained):
        conv.fused_attention = 'always'
    with torch.inference_mode():
        evaluated(x, edge_index, edge_attr)
    trained(x.requires_grad_(), edge_index, edge_attr).sum().backward()
    assert x.grad is not None
