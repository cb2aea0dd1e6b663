import os
import os.path as osp

import pytest
import torch

# Without a GPU, Triton kernels run in Triton's interpreter.  Triton reads the
# variable when it is first imported, which PyG may do while any test module
# is collected, so it is set here, before collection:
if not torch.cuda.is_available():
    os.environ.setdefault('TRITON_INTERPRET', '1')

SHARED_DATA = osp.join(osp.dirname(__file__), '..', '..', 'shared', 'data')


def pytest_configure(config):
    # Tests read the Planetoid files from IKGAT_DATA, or from ../shared/data
    # beside the checkout when it exists.
    if not os.environ.get('IKGAT_DATA') and osp.isdir(SHARED_DATA):
        os.environ['IKGAT_DATA'] = osp.abspath(SHARED_DATA)


@pytest.fixture(scope='session')
def cora():
    import torch_geometric.transforms as T

    from ikgat.datasets import load_planetoid
    try:
        dataset = load_planetoid('Cora', transform=T.NormalizeFeatures())
    except RuntimeError as error:
        pytest.skip(f'Cora is not available: {error}')
    return dataset
