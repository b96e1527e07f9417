"""The compiled env step: what counts as a failure to compile."""

import torch

from elegantpod.envs.fused_step import is_resource_error


def test_an_out_of_memory_or_cuda_error_is_not_a_compile_failure():
    """A failed first call of a compiled step marks its size failed for the whole process
    (later envs of that size run eagerly). An OOM or a CUDA error is the device's, not the
    compiler's: it is raised as it is and marks nothing (one transient OOM did)."""
    assert is_resource_error(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert is_resource_error(MemoryError())
    assert is_resource_error(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert not is_resource_error(RuntimeError("BackendCompilerFailed: backend='inductor' raised"))
    assert not is_resource_error(TypeError("unsupported operand"))
