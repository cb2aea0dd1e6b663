r"""Results files: the run table shared by the Planetoid and OGB studies,
CSV rows appended (and fsynced) as runs finish, validated when read or
resumed, and Markdown reports written through a temporary file."""
import csv
import os
import os.path as osp
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ikgat.atomic_writes import write_text_atomic

#: Where the committed results live, relative to the checkout.
RESULTS_DIR = osp.join('benchmarks', 'results')

#: Columns of ``planetoid.csv`` and ``search.csv``.  Accuracies are
#: fractions; ``p``, ``R`` and ``beta`` are blank where they do not apply;
#: ``test_acc`` is blank for search runs.
COLUMNS = ['dataset', 'model', 'tag', 'seed', 'p', 'R', 'beta', 'lr',
           'weight_decay', 'val_acc', 'test_acc', 'epochs', 'best_epoch',
           'seconds', 'num_parameters', 'device', 'git_commit']
#: The columns that identify a run for ``--resume``.
KEY_COLUMNS = ('dataset', 'model', 'seed', 'p', 'R', 'beta', 'tag')



def format_float(value: Any) -> str:
    return '' if value is None or value == '' else repr(float(value))


def format_int(value: Any) -> str:
    return '' if value is None or value == '' else str(int(float(value)))


def run_key(row: Dict[str, Any]) -> Tuple[str, ...]:
    r"""The identity of a run: dataset, model, seed, p, R, beta and tag,
    normalised so that ``2``, ``'2.0'`` and ``2.0`` compare equal."""
    return (str(row['dataset']), str(row['model']), format_int(row['seed']),
            format_float(row['p']), format_int(row['R']),
            format_float(row['beta']), str(row.get('tag', '')))


#: Columns of :data:`COLUMNS` that hold numbers (or nothing).
NUMERIC_COLUMNS = ('seed', 'p', 'R', 'beta', 'lr', 'weight_decay', 'val_acc',
                   'test_acc', 'epochs', 'best_epoch', 'seconds',
                   'num_parameters')


class MalformedResults(ValueError):
    r"""A line of a results file that is not a row of its table: the
    message names the file, the line and what is wrong with it."""


def _check_row(path: str, line: int, header: Sequence[str],
               fields: Sequence[str], numeric: Sequence[str]) -> None:
    if len(fields) != len(header):
        raise MalformedResults(
            f'{path}:{line}: {len(fields)} fields where the header has '
            f'{len(header)} (a row cut off, or two rows on one line?): '
            f'{",".join(fields)[:120]!r}')
    for column, value in zip(header, fields):
        if column in numeric and value != '':
            try:
                float(value)
            except ValueError:
                raise MalformedResults(
                    f'{path}:{line}: column {column!r} holds {value!r}, '
                    f'not a number') from None


def read_results(path: str, key_columns: Sequence[str] = KEY_COLUMNS,
                 numeric: Sequence[str] = NUMERIC_COLUMNS
                 ) -> List[Dict[str, str]]:
    r"""The rows of a results CSV (an empty list when it does not exist).

    Raises:
        MalformedResults: naming ``file:line`` and the fault, when a line
            has another number of fields than the header or a
            :obj:`numeric` column holds something else than a number.
    """
    if not osp.isfile(path):
        return []
    with open(path, newline='') as f:
        reader = csv.reader(f)
        header = next(reader, [])
        missing = [c for c in key_columns if c not in header]
        if missing:
            raise ValueError(f'{path} is not a results file of this harness: '
                             f'it lacks the columns {missing}')
        rows = []
        for fields in reader:
            _check_row(path, reader.line_num, header, fields, numeric)
            rows.append(dict(zip(header, fields)))
        return rows


def repair_torn_row(path: str) -> Optional[str]:
    r"""Remove a last line of :obj:`path` that was cut off mid-line (it
    does not end with a line break: a write was interrupted), fsync, and
    return its text; :obj:`None` when the file ends with a complete line.
    The run of that row is then missing from the file, so a resumed
    benchmark runs it again."""
    if not osp.isfile(path):
        return None
    with open(path, 'rb+') as f:
        data = f.read()
        if not data or data.endswith(b'\n'):
            return None
        keep = data.rfind(b'\n') + 1  # 0: not even the header is whole
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    return data[keep:].decode('utf-8', errors='replace')


class ResultsWriter:
    r"""Appends rows to a results CSV, the header written once.  Each row
    is flushed and fsynced before :meth:`write` returns, so an interrupted
    benchmark keeps every finished run.  Opening the file repairs a torn
    last row (:func:`repair_torn_row`, reported on stderr) and checks the
    header, so that nothing is appended onto a broken line."""
    def __init__(self, path: str, columns: Sequence[str] = COLUMNS):
        self.path = path
        self.columns = list(columns)
        torn = repair_torn_row(path)
        if torn is not None:
            print(f'{path}: removed a torn last row (cut off mid-line: '
                  f'{torn[:80]!r}); its run is no longer in the file and '
                  f'runs again', file=sys.stderr)
        if osp.isfile(path) and osp.getsize(path) > 0:
            with open(path, newline='') as f:
                header = next(csv.reader(f), [])
            if header != self.columns:
                raise ValueError(
                    f'{path} has the columns {header}, but this harness '
                    f'writes {self.columns}; pass another results path')

    def write(self, row: Dict[str, Any]) -> None:
        folder = osp.dirname(self.path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        new = not osp.isfile(self.path) or osp.getsize(self.path) == 0
        with open(self.path, 'a', newline='') as f:
            writer = csv.DictWriter(f, fieldnames=self.columns,
                                    extrasaction='ignore')
            if new:
                writer.writeheader()
            writer.writerow(row)
            f.flush()
            os.fsync(f.fileno())


def write_text(path: str, text: str) -> None:
    r"""Write a report through a temporary file, fsync and rename
    (:func:`ikgat.atomic_writes.write_text_atomic`), creating its folder."""
    folder = osp.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    write_text_atomic(path, text)


def table_study_main(argv: Optional[Sequence[str]], module: str,
                     description: str, default_output: str,
                     measure: Callable[[], Any],
                     report: Callable[[Any, str], str]) -> None:
    r"""The command line of a one-table study ``python -m
    benchmarks.<module>``: ``--threads`` and ``--out`` (checked before the
    work starts), then :obj:`report` of :obj:`measure`'s rows with the
    command, written durably and printed."""
    import argparse
    import shlex
    import sys

    import torch

    from ikgat.atomic_writes import check_writable
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--out', default=default_output)
    args = parser.parse_args(argv)
    try:
        check_writable(args.out)
    except OSError as error:
        parser.error(f'--out: {error}')
    torch.set_num_threads(args.threads)
    command = f'python -m benchmarks.{module} ' + shlex.join(
        sys.argv[1:] if argv is None else list(argv))
    text = report(measure(), command.strip())
    write_text(args.out, text)
    print(text)
