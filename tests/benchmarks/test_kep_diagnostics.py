"""benchmarks/kep_diagnostics.py on a tiny synthetic graph (seconds)."""
import torch

from benchmarks.harness.data import BenchData
from benchmarks.kep_diagnostics import (
    VARIANTS,
    build_variant,
    logit_curve,
    predictive_rules,
    render,
)
from benchmarks.uncertainty import UncertaintyConfig, extra_loss
from ikgat.data import toy_citation_graph

PROTOCOL = dict(lr=0.01, weight_decay=5e-4, hidden=4, heads=2, out_heads=1,
                dropout=0.6)


def test_frozen_read_out_stays_and_the_rest_trains():
    data = toy_citation_graph()
    bench = BenchData('Tiny', data, data.num_features, 3)
    config = UncertaintyConfig()
    torch.manual_seed(0)
    model = build_variant('kep, m frozen', bench, PROTOCOL, config)
    mean = model.conv1.inducing_mean.detach().clone()
    weight = model.conv1.lin.weight.detach().clone()
    points = logit_curve(model, data, PROTOCOL,
                         extra_loss('kep', model, config, 12), epochs=4,
                         every=2)
    assert [p['epoch'] for p in points] == [2, 4]
    assert all(p['logit_std'] > 0 and 0 <= p['acc'] <= 1 for p in points)
    assert torch.equal(model.conv1.inducing_mean, mean)
    assert not torch.equal(model.conv1.lin.weight, weight)


def test_predictive_rules_and_report():
    data = toy_citation_graph()
    bench = BenchData('Tiny', data, data.num_features, 3)
    torch.manual_seed(0)
    model = build_variant('kep', bench, PROTOCOL, UncertaintyConfig())
    rules = predictive_rules(model, data, seed=0, draws=12)
    assert len(rules) == 5 and rules['noise']['noise_std'] > 0
    for name, row in rules.items():
        if name != 'noise':
            assert 0 <= row['accuracy'] <= 1 and row['nll'] > 0
    # The posterior mean is the deterministic output (num_samples=0):
    model.eval()
    with torch.no_grad():
        probs = model(data.x, data.edge_index).softmax(-1)
    mask = data.val_mask
    expected = (probs[mask].argmax(-1) == data.y[mask]).double().mean()
    assert abs(rules['posterior mean']['accuracy'] - float(expected)) < 1e-12
    curves = {(0, v): [dict(epoch=1, nll=1.0, acc=0.5, logit_std=0.1)]
              for v in VARIANTS}
    text = render('Tiny', [0], 1, curves, {0: rules}, 'cmd', 'abc')
    assert '| 1 | 1.000 / 50.0 / 0.10 |' in text
    assert 'logits averaged, 10 draws (benchmark)' in text
