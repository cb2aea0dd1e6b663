r"""Results files: the run table shared by the Planetoid and OGB studies,
CSV rows appended as runs finish, and Markdown reports."""
import csv
import os
import os.path as osp
from typing import Any, Dict, List, Sequence, Tuple

from ikgat.durable import write_text_atomic

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


def read_results(path: str) -> List[Dict[str, str]]:
    r"""The rows of a results CSV (an empty list when it does not exist)."""
    if not osp.isfile(path):
        return []
    with open(path, newline='') as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in KEY_COLUMNS if c not in header]
        if missing:
            raise ValueError(f'{path} is not a results file of this harness: '
                             f'it lacks the columns {missing}')
        return list(reader)


class ResultsWriter:
    r"""Appends rows to a CSV (header written once), flushing each row so
    that an interrupted benchmark keeps every finished run."""
    def __init__(self, path: str, columns: Sequence[str] = COLUMNS):
        self.path = path
        self.columns = list(columns)
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



def write_text(path: str, text: str) -> None:
    r"""Write a report through a temporary file, fsync and rename
    (:func:`ikgat.durable.write_text_atomic`), creating its folder."""
    folder = osp.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    write_text_atomic(path, text)
