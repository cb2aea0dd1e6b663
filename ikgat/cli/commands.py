r"""The ``ikgat`` command: ``ikgat train``, ``ikgat tune`` and
``ikgat plot``.  The benchmarks run from a checkout:
``python -m benchmarks.<study>``."""
import argparse
import importlib
import sys
from typing import List, NamedTuple, Optional

from ikgat.cli.arguments import CommandError, OneLineParser


class Command(NamedTuple):
    r"""A sub-command: the module that adds its options
    (``add_arguments(parser)``) and runs it (``parser.set_defaults(run=...)``),
    and its one-line help."""
    module: str
    help: str


#: The sub-commands.  Their modules import torch: ``ikgat --help`` imports
#: none of them, ``ikgat <command>`` imports its own.
COMMANDS = {
    'train': Command('ikgat.cli.train', 'train a 2-layer GAT-style model '
                     '(IKGATConv by default) on a dataset and print its test '
                     'score'),
    'tune': Command('ikgat.cli.tune', "search a layer's options on a "
                    'dataset by validation score (an Optuna study, '
                    'resumable) and write the best configuration'),
    'plot': Command('ikgat.cli.plot', 'plot what a trained model learned, '
                    'from checkpoints written by `ikgat train '
                    '--save-checkpoint`'),
}


def build_parser(command: Optional[str] = None) -> argparse.ArgumentParser:
    r"""The parser of ``ikgat``: every sub-command named with its help and,
    for :obj:`command`, its options (the only module imported)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument('--debug', action='store_true',
                        default=argparse.SUPPRESS,
                        help='show the traceback of an error')
    parser = OneLineParser(prog='ikgat', description=__doc__,
                           parents=[common])
    subparsers = parser.add_subparsers(required=True, dest='command')
    for name, entry in COMMANDS.items():
        if name == command:
            sub = subparsers.add_parser(name, parents=[common],
                                        help=entry.help,
                                        description=entry.help)
            importlib.import_module(entry.module).add_arguments(sub)
        else:
            subparsers.add_parser(name, help=entry.help, add_help=False)
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    r"""The ``ikgat`` command: parse :obj:`argv` (the command line by
    default) and run the sub-command; a user error is one line on stderr
    and exit status 2, a Triton kernel that does not build on this machine
    one line and exit status 1 (``--debug`` shows the traceback)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # First the sub-command's name alone (``ikgat --help`` stops here),
    # then its options with its module imported.
    command = build_parser().parse_known_args(argv)[0].command
    args = build_parser(command).parse_args(argv)
    from ikgat.ops.runtime import KernelBuildError
    try:
        args.run(args)
    except CommandError as error:
        if getattr(args, 'debug', False):
            raise
        message = ' '.join(str(error).split())
        print(f'ikgat {args.command}: error: {message}', file=sys.stderr)
        raise SystemExit(2) from None
    except KernelBuildError as error:
        # Not the user's mistake: this GPU or Triton, status 1; Triton's
        # own report with --debug.
        if getattr(args, 'debug', False):
            print(error.details, file=sys.stderr)
            raise
        print(f'ikgat {args.command}: error: {error}', file=sys.stderr)
        raise SystemExit(1) from None
