r"""What the ``ikgat`` command line accepts, and how it refuses the rest: the
argparse types of its options, the parser whose usage errors are one line,
and :class:`CommandError` with :func:`user_input`, which turn a mistake in
what the user asked for into one line on stderr (exit status 2)."""
import argparse
import pickle
from contextlib import contextmanager
from typing import Optional, TypeVar

_Value = TypeVar('_Value')


def _accepted(value: _Value, ok: bool, requirement: str,
              text: str) -> _Value:
    r"""Return :obj:`value` if :obj:`ok`, else refuse the option's
    :obj:`text` with ``'<requirement> (got <text>)'``."""
    if not ok:
        raise argparse.ArgumentTypeError(f'{requirement} (got {text!r})')
    return value


def positive_int(text: str) -> int:
    r"""An argparse type: an integer of at least 1."""
    value = int(text) if text.lstrip('-').isdigit() else None
    return _accepted(value, value is not None and value >= 1,
                     'must be a positive integer', text)


def _number(text: str) -> float:
    r""":obj:`text` as a float, NaN when it is not a number (so that every
    range check below rejects it)."""
    try:
        return float(text)
    except ValueError:
        return float('nan')


def non_negative_int(text: str) -> int:
    r"""An argparse type: an integer of at least 0."""
    value = int(text) if text.isdigit() else None
    return _accepted(value, value is not None,
                     'must be a non-negative integer', text)


def non_negative_float(text: str) -> float:
    r"""An argparse type: a finite number of at least 0."""
    value = _number(text)
    return _accepted(value, 0 <= value < float('inf'),
                     'must be a non-negative number', text)


def positive_float(text: str) -> float:
    r"""An argparse type: a finite number above 0."""
    value = _number(text)
    return _accepted(value, 0 < value < float('inf'),
                     'must be a positive number', text)


def probability(text: str) -> float:
    r"""An argparse type: a number in [0, 1)."""
    value = _number(text)
    return _accepted(value, 0 <= value < 1, 'must lie in [0, 1)', text)


def fan_out(text: str) -> int:
    r"""An argparse type: a positive number of neighbours, or -1 for all."""
    value = int(text) if text.lstrip('-').isdigit() else 0
    return _accepted(value, value != 0 and value >= -1,
                     'must be a positive number of neighbours or -1 for all',
                     text)


def dataset_name(text: str) -> str:
    r"""An argparse type: a name of :data:`ikgat.data.catalog.DATASET_NAMES` in any
    case."""
    from ikgat.data.catalog import dataset_name as known_name
    try:
        return known_name(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_dataset_arguments(parser: argparse.ArgumentParser,
                          default: Optional[str] = 'Cora') -> None:
    r"""Add ``--dataset``, ``--root`` and ``--split`` to :obj:`parser`;
    ``--dataset`` defaults to :obj:`default` (shown as Cora)."""
    from ikgat.data.catalog import DATASET_NAMES
    parser.add_argument('--dataset', default=default, type=dataset_name,
                        help=f'{", ".join(DATASET_NAMES)} (any case; '
                        f'default: Cora)')
    parser.add_argument('--root', default=None,
                        help='the data root, holding Planetoid/<Name>/raw/, '
                        'HeterophilousGraphDataset/<name>/raw/ or OGB\'s '
                        'folders such as ogbn_arxiv/ (default: $IKGAT_DATA)')
    parser.add_argument('--split', type=non_negative_int, default=0,
                        help='which fixed split of a dataset that has '
                        'several (minesweeper and tolokers have 10; '
                        'default: 0)')


class OneLineParser(argparse.ArgumentParser):
    r"""argparse's parser whose usage errors are one line on stderr (exit
    status 2), pointing to ``--help`` instead of printing the usage."""
    def error(self, message: str):
        self.exit(2, f'{self.prog}: error: {message}; see {self.prog} '
                  f'--help\n')


class CommandError(Exception):
    r"""A mistake in what the user asked for: one line on stderr and exit
    status 2 (tracebacks only with ``--debug``)."""


@contextmanager
def user_input(what: str = ''):
    r"""Turn the errors that bad input raises in the block (a file or
    folder that is missing or damaged, a value out of range) into a
    :class:`CommandError`; :obj:`what` prefixes the message."""
    try:
        yield
    except (ValueError, TypeError, OSError, RuntimeError, EOFError,
            pickle.UnpicklingError) as error:
        raise CommandError(f'{what}{error}') from error
