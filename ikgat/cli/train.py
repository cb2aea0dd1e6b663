r"""``ikgat train``: train a two-layer model with one layer's options on
a dataset and print its scores."""
import argparse
import time

import torch
from torch.nn.parallel import DistributedDataParallel

from ikgat.atomic_writes import check_writable
from ikgat.cli.arguments import (
    CommandError,
    add_dataset_arguments,
    dataset_name,
    fan_out,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    probability,
    user_input,
)
from ikgat.data import load_dataset
from ikgat.kernels import KERNELS, vector_kernels
from ikgat.models import TwoLayerGAT
from ikgat.training.configuration import (
    SEARCH_SEEDS,
    TRAIN_DEFAULTS,
    read_config,
)
from ikgat.training.distributed import init_from_environment, world
from ikgat.training.layer_recipes import (
    LAYER_OPTIONS,
    TRAIN_LAYERS,
    evaluate_draws,
    resolve_settings,
)
from ikgat.training.loop import train_node_classifier, variational_adam
from ikgat.training.sampling import minibatch_training, require_sampler


def add_arguments(parser: argparse.ArgumentParser) -> None:
    r"""Add the options of ``ikgat train`` to :obj:`parser`."""
    add_dataset_arguments(parser, default=None)
    layers = parser.add_argument_group(
        'layer', 'the layer trained, and its options (each layer takes '
        'those that mean something for it; the others are refused)')
    layers.add_argument('--layer', default=None,
                        choices=list(TRAIN_LAYERS),
                        help='; '.join(f'{name}: {layer.help}' for name,
                                       layer in TRAIN_LAYERS.items())
                        + ' (default: ikgat)')
    # The layer options default to None: resolve_settings tells an option
    # given from one left out, and fills in the layer's own default.
    layers.add_argument('--kernel', default=None, choices=sorted(KERNELS),
                        help='ikgat, transformer: the similarity kernel '
                        '(default: direct; transformer takes the kernels '
                        'that pair query and key: '
                        f'{", ".join(vector_kernels())})')
    layers.add_argument('--p', type=positive_float, default=None,
                        help='ikgat, mikan, transformer, mikan-transformer: '
                        'the p of the L^p magnitude (default: 2)')
    layers.add_argument('--num-spectral-points', '--num-features',
                        dest='num_spectral_points', type=positive_int,
                        default=None, help='ikgat, mikan, transformer, '
                        'mikan-transformer: R, spectral points '
                        'per head of the random-feature kernels (default: '
                        '64; --num-features is its old name)')
    layers.add_argument('--num-samples', type=non_negative_int, default=None,
                        help='mikan, mikan-transformer, kep: draws averaged '
                        'in the final '
                        'evaluation, after the epoch is selected without '
                        'draws (default: 10; mikan at least 1, which is its '
                        'mean; kep 0 for its posterior mean)')
    layers.add_argument('--kl-weight', type=non_negative_float, default=None,
                        help='mikan, mikan-transformer, kep: beta of the '
                        'loss term beta * KL / training nodes (default: 0.1 '
                        'for mikan and mikan-transformer, 0.01 for kep)')
    layers.add_argument('--kernel-eps', type=positive_float, default=None,
                        help='ikgat, mikan, transformer, mikan-transformer '
                        'with a random-feature kernel (direct, implicit, '
                        'rff, rff_ns): epsilon, the floor of the '
                        'log-similarity log(f^2 + epsilon); lower lets an '
                        'edge sink further under its neighbours (default: '
                        '0.01; it was 1e-5 before 0.2.0)')
    layers.add_argument('--ksvd-weight', type=non_negative_float,
                        default=None, help='kep: eta of the loss term eta * '
                        'KSVD loss (default: 0.1)')
    parser.add_argument('--config', metavar='BEST.json', default=None,
                        help='a configuration written by `ikgat tune`: its '
                        'dataset, layer, layer options, hidden, heads, '
                        'dropout, lr and weight decay replace the defaults '
                        '(an option given here still wins)')
    # None: the configuration's value, else TRAIN_DEFAULTS (apply_config).
    parser.add_argument('--hidden', type=positive_int, default=None,
                        help='(default: 8)')
    parser.add_argument('--heads', type=positive_int, default=None,
                        help='(default: 8)')
    parser.add_argument('--dropout', type=probability, default=None,
                        help='(default: 0.6)')
    parser.add_argument('--lr', type=positive_float, default=None,
                        help='(default: 0.005)')
    parser.add_argument('--weight-decay', type=float, default=None,
                        help='(default: 5e-4)')
    parser.add_argument('--epochs', type=positive_int, default=1000)
    parser.add_argument('--patience', type=positive_int, default=100)
    parser.add_argument('--seed', type=non_negative_int, default=0,
                        help='the seed of the initialisation, dropout and '
                        'draws, below 1000000 (the seeds of `ikgat tune` '
                        'lie above; default: 0)')
    parser.add_argument('--batch-size', type=positive_int, default=None,
                        help='seed nodes per mini-batch step, sampled with '
                        'PyG\'s NeighborLoader (needs pyg-lib or '
                        'torch-sparse); split across processes under '
                        'torchrun (default: full-batch training, but 1024 '
                        'for ogbn-products)')
    parser.add_argument('--fan-out', type=fan_out, nargs=2, default=None,
                        metavar=('HOP1', 'HOP2'),
                        help='in-neighbours sampled per node at each hop '
                        'with --batch-size, -1 for all (default: 10 10, 15 10 '
                        'for ogbn-products)')
    parser.add_argument('--eval-batch-size', type=positive_int,
                        default=4096,
                        help='targets per step of the layer-wise evaluation '
                        'over the full graph after each mini-batch epoch '
                        '(default: 4096)')
    parser.add_argument('--device', default='cpu', choices=['cpu', 'cuda'],
                        help='cpu, or cuda (cuda:LOCAL_RANK under torchrun, '
                        'with the NCCL backend; gloo on cpu)')
    parser.add_argument('--compile', action='store_true',
                        help='train the model through torch.compile (the '
                        'first epochs compile; on a GPU the fused kernels '
                        'stay one operator each)')
    parser.add_argument('--threads', type=positive_int, default=None,
                        help='CPU threads of PyTorch (default: its own '
                        'choice, one per core); use 1 when other jobs run')
    parser.add_argument('--no-progress', dest='progress',
                        action='store_false', default=None,
                        help='no progress bar (it shows only on a terminal '
                        'anyway)')
    parser.add_argument('--save-checkpoint', metavar='PATH', default=None,
                        help='save the best-validation model, its settings '
                        'and a per-epoch log of the similarity and magnitude '
                        'terms (for `ikgat plot`) to PATH')
    parser.set_defaults(run=run_train)


def apply_config(args: argparse.Namespace) -> None:
    r"""Fill in the options left out of :obj:`args` from ``--config``
    (:func:`ikgat.training.configuration.read_config`), else from the
    defaults; refuse a seed of ``ikgat tune``'s searches."""
    config = None
    if args.config is not None:
        with user_input('--config: '):
            config = read_config(args.config)
            config.dataset = dataset_name(config.dataset)
    args.dataset = args.dataset or (config.dataset if config else 'Cora')
    args.layer = args.layer or (config.layer if config else 'ikgat')
    for name, default in TRAIN_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, getattr(config, name) if config else default)
    if config is not None and config.layer == args.layer:
        for option, value in config.layer_options.items():
            if option not in LAYER_OPTIONS:
                raise CommandError(f'--config {args.config}: unknown layer '
                                   f'option {option!r}; write it again with '
                                   f'`ikgat tune`')
            if getattr(args, option) is None:
                setattr(args, option, value)
    if args.seed in SEARCH_SEEDS:
        raise CommandError(f'--seed {args.seed} is a seed of `ikgat tune`\'s '
                           f'searches; evaluate with a seed below '
                           f'{SEARCH_SEEDS.start}')


def run_train(args: argparse.Namespace) -> None:
    r"""``ikgat train``: train a two-layer model on a Planetoid dataset
    with the parsed options, print the accuracies and, with
    ``--save-checkpoint``, write the checkpoint."""
    start = time.perf_counter()
    apply_config(args)
    layer = TRAIN_LAYERS[args.layer]
    with user_input():
        settings = resolve_settings(args.layer, {
            option: getattr(args, option) for option in LAYER_OPTIONS
            if getattr(args, option) is not None})
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    with user_input('--device: '):
        device = init_from_environment(args.device)
    rank, world_size = world()
    if args.save_checkpoint:
        with user_input('--save-checkpoint: '):
            check_writable(args.save_checkpoint)
    with user_input():
        dataset = load_dataset(args.dataset, args.root)
        data = dataset.split(args.split).to(device)
    if args.batch_size is None:
        args.batch_size = dataset.batch_size
    args.fan_out = list(args.fan_out or dataset.fan_out)
    if args.batch_size is not None:
        if args.batch_size < world_size:
            raise CommandError(f'--batch-size {args.batch_size} is smaller '
                               f'than the {world_size} processes; give each '
                               f'process at least one seed node')
        with user_input('--batch-size: '):
            require_sampler()
    torch.manual_seed(args.seed)
    conv_kwargs = layer.conv_kwargs(settings)
    with user_input():
        model = TwoLayerGAT(dataset.num_features, args.hidden,
                            dataset.num_classes, layer.conv(),
                            heads=args.heads, out_heads=dataset.out_heads,
                            dropout=args.dropout, conv_kwargs=conv_kwargs,
                            self_loops=layer.self_loops)
    model = model.to(device)
    trained = model
    if args.compile:
        # Mini-batches change the graph's size at every step: dynamic
        # shapes compile once for all sizes.
        trained = torch.compile(model, dynamic=args.batch_size is not None
                                or None)
    if world_size > 1:
        trained = DistributedDataParallel(trained)
    described = (f'{layer.describe(settings)} on {dataset.name}'
                 + (', compiled' if args.compile else ''))
    regime = 'full batch'
    if args.batch_size is not None:
        regime = (f'mini-batches of {args.batch_size} seeds, fan-out '
                  f'{" ".join(map(str, args.fan_out))}')
    if world_size > 1:
        regime += f', {world_size} processes'
    say = print if rank == 0 else (lambda *_, **__: None)
    say(f'ikgat train: {described}: {data.num_nodes} nodes, '
        f'{data.num_edges} edges, {dataset.num_classes} classes; '
        f'{regime}; at most {args.epochs} epochs (patience '
        f'{args.patience}), {torch.get_num_threads()} thread(s), seed '
        f'{args.seed}', flush=True)
    recorder = None
    if args.save_checkpoint and rank == 0 and layer.kernel_terms:
        from ikgat.inspection.terms import AttentionTermsRecorder
        recorder = AttentionTermsRecorder(model, data.x, data.edge_index)
    batches = inference = None
    if args.batch_size is not None:
        batches, inference = minibatch_training(
            model, data, args.batch_size, args.fan_out, args.eval_batch_size,
            args.seed)
    num_train = int(data.train_mask.sum())
    result = train_node_classifier(
        trained, data, epochs=args.epochs, patience=args.patience,
        keep_best_state=args.save_checkpoint is not None,
        restore_best_state=layer.stochastic, on_epoch=recorder,
        progress=args.progress,
        extra_loss=layer.extra_loss(model, settings, num_train),
        optimizer=variational_adam(model, args.lr, args.weight_decay),
        batches=batches, inference=inference, score=dataset.score)
    test_acc = result.test_acc
    metric = dataset.score.name
    scores = f'test {metric} {test_acc:.4f}'
    validation = f'validation {metric} {result.val_acc:.4f}'
    test_ece = None
    if layer.stochastic and rank == 0:
        from ikgat.metrics.uncertainty import ece
        draws = settings['num_samples']
        torch.manual_seed(args.seed)  # the same draws in every run
        logits = evaluate_draws(
            model, layer, draws, inference if inference is not None else
            lambda: model(data.x, data.edge_index))
        mask = data.test_mask
        test_acc = dataset.score(logits, data.y, mask)
        test_ece = ece(logits[mask].softmax(-1), data.y[mask])
        averaged = ('at the mean' if draws == layer.mean_draws else
                    f'the mean of {draws} draws')
        scores = (f'test {metric} {test_acc:.4f} and test ECE '
                  f'{test_ece:.4f} ({averaged})')
        validation += ' without draws'
    say(f'{described}: {scores} at the best validation epoch '
        f'{result.best_epoch} ({validation}); {result.epochs} epochs in '
        f'{result.seconds:.1f} s ({result.seconds / result.epochs:.3f} '
        f's per epoch), {time.perf_counter() - start:.1f} s in all')
    if args.save_checkpoint and rank == 0:
        from ikgat.training.checkpoints import save_checkpoint
        save_checkpoint(
            args.save_checkpoint, model, dataset.name,
            conv_kwargs=conv_kwargs,
            normalize_features=dataset.normalize_features,
            log=recorder.log if recorder is not None else None,
            info=dict(val_acc=result.val_acc, test_acc=test_acc,
                      test_ece=test_ece, layer_settings=settings,
                      best_epoch=result.best_epoch, epochs=result.epochs,
                      seed=args.seed, lr=args.lr,
                      weight_decay=args.weight_decay,
                      batch_size=args.batch_size,
                      fan_out=args.fan_out if args.batch_size else None,
                      processes=world_size),
            state_dict=result.state_dict)
        say(f'saved the best-validation model (epoch {result.best_epoch}) '
            f'to {args.save_checkpoint}')
    if world_size > 1:
        # DDP's reducer goes first, while the process group still has
        # another reference: the last reference dropped in the reducer's
        # destructor would join gloo's threads with the GIL held, while
        # they wait for the GIL (a deadlock at exit, 3 runs in 6 here).
        del trained
        torch.distributed.destroy_process_group()
