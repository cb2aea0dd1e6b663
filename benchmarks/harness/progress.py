r"""Progress over benchmark runs and, inside each run, over epochs."""
import sys

from tqdm.auto import tqdm


class Progress:
    r"""A progress display over runs and, inside each run, over epochs.

    On a terminal: tqdm's bars.  Elsewhere (logs, CI):
    one stderr line per finished run.  ``enabled=False`` prints nothing."""
    def __init__(self, total_runs: int, enabled: bool = True):
        self.enabled = enabled
        self.total = total_runs
        self.done = 0
        self.runs = self.epochs = None
        if enabled and sys.stderr.isatty():
            self.runs = tqdm(total=total_runs, desc='runs', unit='run',
                             position=0)
            self.epochs = tqdm(total=0, desc='epochs', unit='ep',
                               position=1, leave=False)

    def start_run(self, label: str, max_epochs: int) -> None:
        if self.epochs is not None:
            self.epochs.reset(total=max_epochs)
            self.epochs.set_description(label)

    def epoch(self, epoch: int, val_acc: float, val_loss: float) -> None:
        if self.epochs is not None:
            self.epochs.update(1)
            if epoch % 10 == 0:
                self.epochs.set_postfix(val_acc=f'{val_acc:.3f}',
                                        refresh=False)

    def end_run(self, message: str) -> None:
        self.done += 1
        if self.runs is not None:
            self.runs.update(1)
            self.runs.write(message)
        elif self.enabled:
            print(f'[{self.done}/{self.total}] {message}',
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        for bar in (self.epochs, self.runs):
            if bar is not None:
                bar.close()
