"""benchmarks/mikan_draws.py on a tiny synthetic graph (seconds)."""
import torch

from benchmarks.mikan_draws import (
    draw_spread,
    one_draw_per_pass,
    predictive_rules,
    render,
)
from benchmarks.uncertainty import UncertaintyConfig, build
from ikgat.data import toy_citation_graph

PROTOCOL = dict(lr=0.01, weight_decay=5e-4, hidden=4, heads=2, out_heads=1,
                dropout=0.6)


def tiny_mikan():
    torch.manual_seed(0)
    config = UncertaintyConfig(mikan_num_features=8, mikan_num_samples=3)
    return build('mikan', 12, 3, PROTOCOL, config).eval(), config


def test_draws_vary_only_inside_the_context():
    data = toy_citation_graph()
    model, _ = tiny_mikan()
    with torch.no_grad():
        before = model(data.x, data.edge_index)
        again = model(data.x, data.edge_index)
    torch.testing.assert_close(before, again)  # z = mu: deterministic
    logits = draw_spread(model, data, passes=4)
    assert logits.shape == (4, 48, 3)
    assert logits.std(0).max() > 0  # each pass draws its points
    with torch.no_grad():  # restored afterwards
        torch.testing.assert_close(model(data.x, data.edge_index), before)
    with one_draw_per_pass(model), torch.no_grad():
        assert not torch.equal(model(data.x, data.edge_index),
                               model(data.x, data.edge_index))


def test_predictive_rules_report():
    data = toy_citation_graph()
    model, config = tiny_mikan()
    rules = predictive_rules(model, data, config, passes=6)
    assert len(rules) == 5 and rules['spread']['draw_std'] > 0
    for name, row in rules.items():
        if name != 'spread':
            assert 0 <= row['accuracy'] <= 1 and row['nll'] > 0
    spread = dict(draw_std=0.5, logit_std=1.0)
    text = render('Tiny', [0], {0: rules}, {0: spread}, 'cmd', 'abc',
                  config)
    assert '| 0 | initial | 0.5000 | 1.0000 |' in text
    assert '3 draws averaged in each layer (benchmark)' in text
