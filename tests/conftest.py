import os

import pytest
import torch

# One torch thread per test process, as Dask gives each worker: results stay
# comparable across machines and the 2-core CI box is not oversubscribed.
torch.set_num_threads(1)
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture
def tmp_out(tmp_path):
    return tmp_path / "run"
