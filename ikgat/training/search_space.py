r"""What ``ikgat tune`` searches: one distribution per option, the layer's
options (kernel, p, R and, for the variational layers, the KL weight and
the draws) and those of the recipe (learning rate, weight decay, dropout,
hidden size).

A distribution is written on the command line as ``--search NAME=SPEC``:
``low:high`` (a range; ``low:high:log`` on a log scale), ``a,b,c`` (a
choice) or one value (fixed).  Every distribution is checked before any
training; a mistake raises a :class:`ValueError` that names the value and
the fix.
"""
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

from ikgat.training.layer_recipes import LAYER_OPTIONS, TRAIN_LAYERS


@dataclass(frozen=True)
class Choice:
    r"""One of :obj:`values`."""
    values: Tuple[Any, ...]

    def describe(self) -> str:
        return ','.join(str(value) for value in self.values)


@dataclass(frozen=True)
class Range:
    r"""A number in ``[low, high]``, on a log scale with :obj:`log`,
    integral with :obj:`integer`."""
    low: float
    high: float
    log: bool = False
    integer: bool = False

    def describe(self) -> str:
        return f'{self.low:g}:{self.high:g}' + (':log' if self.log else '')


Distribution = Union[Choice, Range]


@dataclass(frozen=True)
class Option:
    r"""A searchable option: its type, the least value it takes (and
    whether that bound is open), its largest, its default distribution,
    and whether a study searches it without being asked (else it keeps
    the layer's default unless ``--search`` names it)."""
    kind: type
    default: Distribution
    least: Optional[float] = None
    open_least: bool = False
    most: Optional[float] = None
    open_most: bool = False
    by_default: bool = True


#: The options shared by every layer.
SHARED_OPTIONS: Dict[str, Option] = {
    'lr': Option(float, Range(1e-3, 5e-2, log=True), 0, open_least=True),
    'weight_decay': Option(float, Range(1e-5, 1e-2, log=True), 0),
    'dropout': Option(float, Range(0.0, 0.8), 0, most=1, open_most=True),
    'hidden': Option(int, Choice((8, 16, 32, 64)), 1),
}
#: The layer options (:data:`~ikgat.training.layer_recipes.LAYER_OPTIONS`);
#: a layer searches those it takes.
LAYER_SEARCH: Dict[str, Option] = {
    'kernel': Option(str, Choice(('direct', 'rff', 'rbf'))),
    'p': Option(float, Range(1.0, 4.0), 0, open_least=True),
    'num_spectral_points': Option(int, Choice((16, 32, 64, 128)), 1),
    'num_samples': Option(int, Choice((1, 5, 10, 20)), 0),
    'kl_weight': Option(float, Range(1e-3, 1.0, log=True), 0),
    'ksvd_weight': Option(float, Range(1e-3, 1.0, log=True), 0),
    # The random-feature kernels' floor, searched only when asked: a trial
    # whose kernel has no floor leaves it out.
    'kernel_eps': Option(float, Range(1e-4, 1e-1, log=True), 0,
                         open_least=True, by_default=False),
}


def searchable(layer: str) -> List[str]:
    r"""The options ``ikgat tune --layer`` :obj:`layer` can search."""
    return [name for name in LAYER_SEARCH
            if name in TRAIN_LAYERS[layer].defaults] + list(SHARED_OPTIONS)


def default_space(layer: str) -> Dict[str, Distribution]:
    r"""The distributions searched when no ``--search`` is given."""
    options = {**LAYER_SEARCH, **SHARED_OPTIONS}
    return {name: options[name].default for name in searchable(layer)
            if options[name].by_default}


def parse_search(layer: str, specs: List[str]) -> Dict[str, Distribution]:
    r"""The space of ``ikgat tune --layer`` :obj:`layer`: its default
    space with each ``NAME=SPEC`` of :obj:`specs` in place of the
    default."""
    space = default_space(layer)
    for spec in specs:
        name, given = _split(spec)
        if name not in searchable(layer):
            raise ValueError(_not_searchable(layer, name, spec))
        space[name] = _distribution(layer, name, given, spec)
    return space


def _split(spec: str) -> Tuple[str, str]:
    name, equals, given = spec.partition('=')
    if not equals or not name or not given:
        raise ValueError(f'--search {spec}: write NAME=SPEC, e.g. '
                         f'p=1:4, lr=0.001:0.05:log or kernel=rff,direct')
    return name.strip().replace('-', '_'), given.strip()


def _not_searchable(layer: str, name: str, spec: str) -> str:
    takers = [other for other, entry in TRAIN_LAYERS.items()
              if name in entry.defaults]
    if name in LAYER_OPTIONS and takers:
        return (f'--search {spec}: {name} is not an option of --layer '
                f'{layer} (it is one of --layer {" or ".join(takers)}); '
                f'--layer {layer} searches {", ".join(searchable(layer))}')
    return (f'--search {spec}: unknown option {name!r}; --layer {layer} '
            f'searches {", ".join(searchable(layer))}')


def _distribution(layer: str, name: str, given: str,
                  spec: str) -> Distribution:
    option = {**LAYER_SEARCH, **SHARED_OPTIONS}[name]
    parts = given.split(':')
    if len(parts) == 1:
        values = tuple(_value(option, text, spec)
                       for text in given.split(','))
        for value in values:
            _check_value(layer, name, option, value, spec)
        return Choice(values)
    if option.kind is str or len(parts) > 3 or (
            len(parts) == 3 and parts[2] != 'log'):
        raise ValueError(f'--search {spec}: a range is low:high or '
                         f'low:high:log, of a numeric option; give a choice '
                         f'a,b,c for {name}')
    low, high = (_value(option, text, spec) for text in parts[:2])
    log = len(parts) == 3
    for bound in (low, high):
        _check_value(layer, name, option, bound, spec)
    if not low < high:
        raise ValueError(f'--search {spec}: the range {low:g}:{high:g} is '
                         f'empty; give low < high, or one value to fix '
                         f'{name}')
    if log and low <= 0:
        raise ValueError(f'--search {spec}: a log range must start above '
                         f'0 (got {low:g}); give a positive low or drop '
                         f':log')
    return Range(low, high, log, integer=option.kind is int)


def _value(option: Option, text: str, spec: str) -> Any:
    try:
        value = option.kind(text)
    except ValueError:
        raise ValueError(f'--search {spec}: {text!r} is not '
                         f'{"an integer" if option.kind is int else "a number"}'
                         ) from None
    if option.kind is float and not math.isfinite(value):
        raise ValueError(f'--search {spec}: {text!r} is not a finite number')
    return value


def _check_value(layer: str, name: str, option: Option, value: Any,
                 spec: str) -> None:
    if name == 'kernel':
        allowed = TRAIN_LAYERS[layer].kernels or _kernel_names()
        if value not in allowed:
            raise ValueError(f'--search {spec}: unknown kernel {value!r} '
                             f'for --layer {layer}; choose among '
                             f'{", ".join(allowed)}')
        return
    if name == 'num_samples':
        least = TRAIN_LAYERS[layer].mean_draws
        if value < least:
            raise ValueError(f'--search {spec}: --layer {layer} takes at '
                             f'least {least} draw(s) (got {value})')
    below = option.least is not None and (
        value < option.least or (option.open_least and value == option.least))
    above = option.most is not None and (
        value > option.most or (option.open_most and value == option.most))
    if below or above:
        bounds = (('(' if option.open_least else '[')
                  + f'{option.least:g}, '
                  + (f'{option.most:g}' if option.most is not None else 'inf')
                  + (')' if option.open_most or option.most is None
                     else ']'))
        raise ValueError(f'--search {spec}: {name} must lie in {bounds} '
                         f'(got {value:g})')


def _kernel_names() -> Tuple[str, ...]:
    from ikgat.kernels import KERNELS
    return tuple(sorted(KERNELS))


def describe_space(space: Dict[str, Distribution]) -> Dict[str, str]:
    r"""The space as ``NAME -> SPEC`` strings (stored with a study, and
    compared when it resumes)."""
    return {name: distribution.describe()
            for name, distribution in space.items()}
