"""Two kernels the GPU compile check must fail, in the two ways it caught
the kernels of 04041d9: a helper that returns a tile in one constexpr
branch and a scalar in the other (the interpreter runs it, Triton's compiler
rejects it), and a nodes x points x channels broadcast tile too large for
the register budget (it spills)."""
from __future__ import annotations  # keeps 'tl.constexpr' a string

import triton
import triton.language as tl


@triton.jit
def _scale(x, HALVE: tl.constexpr):
    if HALVE:
        return x * 0.5
    return 1.


@triton.jit
def _mismatched_body(x, out, N, HALVE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    value = tl.load(x + offs, mask=mask, other=0.)
    tl.store(out + offs, value * _scale(value, HALVE), mask=mask)


@triton.jit
def _wide_tile_body(x, points, out, N, C, BLOCK_N: tl.constexpr,
                    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_r = tl.arange(0, BLOCK_R)
    offs_c = tl.arange(0, BLOCK_C)
    x_tile = tl.load(x + offs_n[:, None] * C + offs_c[None, :],
                     mask=(offs_n < N)[:, None] & (offs_c < C)[None, :],
                     other=0.)
    u = tl.load(points + offs_r[:, None] * C + offs_c[None, :],
                mask=(offs_c < C)[None, :], other=0.)
    angle = tl.sum(x_tile[:, None, :] * u[None, :, :], axis=2)
    grad = tl.sum(tl.cos(angle)[:, :, None] * u[None, :, :], axis=1)
    tl.store(out + offs_n[:, None] * C + offs_c[None, :], grad,
             mask=(offs_n < N)[:, None] & (offs_c < C)[None, :])
