r"""Timing and memory measurement for :mod:`benchmarks.speed`: round-robin
sessions, peak memory of one step, the machine, and Markdown formatting.

* :class:`Session` times several steps *round-robin*: every repetition runs
  each step once, in a freshly shuffled order, so that a change of load on a
  shared machine (and any effect of what ran just before) hits all steps
  alike and ratios measured in one session compare like with like.  The
  repetitions are kept in order, so ``times[r]`` of two steps were taken in
  the same round :math:`r` (:func:`paired_differences`).
* Peak memory, two ways: *tensors*, the peak of the bytes held by live
  tensors during one step, from :mod:`torch.profiler`'s memory timeline
  (what PyTorch allocates; no allocator slack); *RSS*, the growth of the
  process's peak resident set (``VmHWM``, reset through
  ``/proc/self/clear_refs`` after ``malloc_trim``) over the resident set
  before the step (what the operating system had to provide).
"""
import ctypes
import os
import platform
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Hashable, List, Optional, Sequence

import torch

Step = Callable[[], None]


@dataclass
class Measurement:
    r"""Wall-clock and process CPU seconds of the timed repetitions of one
    step (in round order), its peak memory, and a note (e.g. the error that
    stopped it)."""
    times: List[float] = field(default_factory=list)
    cpu_times: List[float] = field(default_factory=list)
    tensor_bytes: Optional[int] = None
    rss_bytes: Optional[int] = None
    note: str = ''

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else float('nan')

    @property
    def cpu_median(self) -> float:
        return (statistics.median(self.cpu_times)
                if self.cpu_times else float('nan'))


class Session:
    r"""Time steps round-robin (see the module docstring).

    Args:
        reps (int): Timed repetitions of every step.
        warmup (int): Untimed repetitions before them.
        memory (bool, optional): Measure the peak memory of the steps added
            with ``memory=True``. (default: :obj:`True`)
        seed (int, optional): Seed of the per-round shuffle of the step
            order. (default: :obj:`0`)
    """
    def __init__(self, reps: int, warmup: int, memory: bool = True,
                 seed: int = 0):
        self.reps, self.warmup = reps, warmup
        self.memory, self.seed = memory, seed
        self.entries: Dict[Hashable, Callable[[], Step]] = {}
        self.memory_keys: List[Hashable] = []

    def add(self, key: Hashable, make_step: Callable[[], Step],
            memory: bool = False) -> None:
        r"""Register :obj:`make_step`, called once at the start of
        :meth:`run` to build the step (a callable without arguments)."""
        if key in self.entries:
            return
        self.entries[key] = make_step
        if memory:
            self.memory_keys.append(key)

    def run(self) -> Dict[Hashable, Measurement]:
        results = {key: Measurement() for key in self.entries}
        steps: Dict[Hashable, Step] = {}
        for key, make_step in self.entries.items():
            try:
                steps[key] = make_step()
            except Exception as error:  # report, don't abort the run
                results[key].note = f'{type(error).__name__}: {error}'

        def call(key: Hashable) -> bool:
            try:
                steps[key]()
                return True
            except Exception as error:
                results[key].note = f'{type(error).__name__}: {error}'
                results[key].times.clear()
                results[key].cpu_times.clear()
                del steps[key]
                return False

        shuffle = random.Random(self.seed).shuffle
        for _ in range(self.warmup):
            for key in list(steps):
                call(key)
        for rep in range(self.reps):
            last = rep == self.reps - 1
            order = list(steps)
            shuffle(order)
            for key in order:
                if key not in steps:
                    continue
                before = reset_peak_rss() if last else None
                start, cpu_start = time.perf_counter(), time.process_time()
                if not call(key):
                    continue
                results[key].times.append(time.perf_counter() - start)
                results[key].cpu_times.append(time.process_time() - cpu_start)
                if last:
                    results[key].rss_bytes = peak_rss_since(before)
        if self.memory:
            for key in self.memory_keys:
                if key in steps:
                    results[key].tensor_bytes = peak_tensor_bytes(steps[key])
        return results


def paired_differences(a: Measurement, b: Measurement,
                       cpu: bool = False) -> List[float]:
    r"""Per-round differences ``a.times[r] - b.times[r]`` (``cpu_times``
    with :obj:`cpu`) of two steps timed in the same :class:`Session`."""
    if cpu:
        return [x - y for x, y in zip(a.cpu_times, b.cpu_times)]
    return [x - y for x, y in zip(a.times, b.times)]


def quantile(values: Sequence[float], q: float) -> float:
    r"""The :obj:`q`-quantile of :obj:`values` (linear interpolation)."""
    if not values:
        return float('nan')
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


# --------------------------------------------------------------------------
# Peak memory
# --------------------------------------------------------------------------


def _status_bytes(key: str) -> Optional[int]:
    try:
        with open('/proc/self/status') as status:
            for line in status:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def current_rss() -> Optional[int]:
    r"""The resident set of this process in bytes (:obj:`None` where
    ``/proc`` is missing)."""
    return _status_bytes('VmRSS:')


def reset_peak_rss() -> Optional[int]:
    r"""Return the resident set after ``malloc_trim`` and reset the peak
    resident set (``VmHWM``) to it; :obj:`None` where unsupported."""
    try:
        ctypes.CDLL('libc.so.6').malloc_trim(0)
    except (OSError, AttributeError):
        pass
    before = current_rss()
    try:
        with open('/proc/self/clear_refs', 'w') as clear:
            clear.write('5')  # reset VmHWM to the current RSS
    except OSError:
        return None
    return before


def peak_rss_since(before: Optional[int]) -> Optional[int]:
    peak = _status_bytes('VmHWM:')
    if before is None or peak is None:
        return None
    return max(0, peak - before)


def peak_tensor_bytes(step: Step) -> Optional[int]:
    r"""Peak bytes of live CPU tensors during :obj:`step`, from the memory
    timeline of :mod:`torch.profiler` (:obj:`None` if unavailable)."""
    try:
        from torch.profiler import ProfilerActivity, profile
        from torch.profiler._memory_profiler import MemoryProfileTimeline
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                     record_shapes=True, with_stack=True) as prof:
            step()
        timeline = MemoryProfileTimeline(prof._memory_profile())
        _, sizes = timeline._coalesce_timeline('cpu')
        return max((sum(size) for size in sizes), default=0)
    except Exception:  # a private API: report "n/a" rather than fail
        return None


# --------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------


def load_average() -> str:
    try:
        return ', '.join(f'{value:.2f}' for value in os.getloadavg())
    except OSError:
        return 'n/a'


def machine_info() -> List[str]:
    r"""Markdown list items: CPU, cores, torch threads, versions, load."""
    import torch_geometric
    model = platform.processor() or 'unknown'
    try:
        with open('/proc/cpuinfo') as cpuinfo:
            for line in cpuinfo:
                if line.startswith('model name'):
                    model = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return [
        f'- CPU: {model}; {os.cpu_count()} logical cores, {usable} usable '
        f'by this process; torch threads: {torch.get_num_threads()} '
        f'(CPU capability {torch.backends.cpu.get_cpu_capability()})',
        f'- torch {torch.__version__}, torch_geometric '
        f'{torch_geometric.__version__}, Python '
        f'{platform.python_version()}, {platform.platform()}',
        f'- load average (1, 5, 15 min) at the start: {load_average()}',
    ]


# --------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    if seconds != seconds:
        return 'n/a'
    if abs(seconds) < 1:
        return f'{seconds * 1e3:.1f} ms'
    return f'{seconds:.2f} s'


def fmt_bytes(value: Optional[int]) -> str:
    if value is None:
        return 'n/a'
    return f'{value / 2**20:,.0f} MiB'


def fmt_ratio(value: Optional[float], reference: Optional[float]) -> str:
    if value is None or not reference or value != value:
        return 'n/a'
    return f'{value / reference:.2f}x'


def fmt_speed(result: Measurement, reference: Measurement) -> str:
    r"""Wall-clock ratio of the medians, and the ratio of the process CPU
    times (less sensitive to other processes on a shared machine)."""
    if not result.times or not reference.times:
        return 'n/a'
    return (f'{fmt_ratio(result.median, reference.median)} (cpu '
            f'{fmt_ratio(result.cpu_median, reference.cpu_median)})')


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ['| ' + ' | '.join(header) + ' |',
             '|' + '|'.join('---' for _ in header) + '|']
    lines += ['| ' + ' | '.join(str(c) for c in row) + ' |' for row in rows]
    return '\n'.join(lines)
