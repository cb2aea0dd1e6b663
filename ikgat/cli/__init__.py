r"""The ``ikgat`` command line (:func:`main`, the console script): each
sub-command in a module of its own, imported when it runs, so that
``ikgat --help`` imports neither torch nor PyG."""
from ikgat.cli.commands import main
from ikgat.deprecation import moved_names

__all__ = ['main']

# The names ``ikgat.cli`` held when it was one module:
__getattr__ = moved_names('ikgat.cli', {
    **{name: ('ikgat.cli.arguments', name) for name in (
        'CommandError', 'OneLineParser', 'dataset_name', 'fan_out',
        'non_negative_float', 'non_negative_int', 'positive_float',
        'positive_int', 'probability', 'user_input')},
    **{name: ('ikgat.cli.plot', name) for name in (
        'PLOT_KINDS', 'PLOT_NEEDS', 'TRANSFORMER_LAYERS',
        'TRANSFORMER_OPTIONS', 'run_plot')},
    'run_train': ('ikgat.cli.train', 'run_train'),
})
