"""Lazy jitting (ikgat.ops.runtime.lazy_jit): one jitted version per
function, whatever the order in which modules are bound."""
import pytest

pytest.importorskip('triton')

import ikgat.ops.attention_steps as attention_steps  # noqa: E402
import ikgat.ops.gat_attention_triton as gat_attention_triton  # noqa: E402
import ikgat.ops.runtime as runtime  # noqa: E402


def test_a_function_has_one_jitted_version():
    forward = runtime.jitted(gat_attention_triton.forward_kernel)
    assert runtime.jitted(forward) is forward  # jitted already
    assert runtime.jitted(forward.fn) is forward
    # The steps a kernel calls are bound where the kernel's module reads
    # them, as the same objects as in the module that defines them:
    assert gat_attention_triton.aggregate_step is \
        attention_steps.aggregate_step
    assert attention_steps.aggregate_step.fn.__name__ == 'aggregate_step'


def test_a_bound_module_gives_its_jitted_versions_to_a_new_cache(
        monkeypatch):
    forward = runtime.jitted(gat_attention_triton.forward_kernel)
    monkeypatch.setattr(runtime, '_JITTED', {})
    assert runtime.jitted(forward.fn) is forward


def test_constants_are_bound_as_constexpr():
    import triton.language as tl

    import ikgat.ops.transformer_fourier as transformer_fourier
    runtime.jitted(transformer_fourier.forward_kernel)
    assert isinstance(transformer_fourier._D_STEP, tl.constexpr)
    assert transformer_fourier._D_STEP.value == transformer_fourier.D_STEP
