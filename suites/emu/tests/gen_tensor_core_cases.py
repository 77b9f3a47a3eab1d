#!/usr/bin/python3
"""gen_tensor_core_cases.py — the products test_emu_tensor_core.cc checks the emulated mma.sync
and ldmatrix (suites/emu/tensor_core.cc) against, computed here in PyTorch (float64) from the
rounded inputs, independently of the emulator.

    /usr/bin/python3 suites/emu/tests/gen_tensor_core_cases.py   # writes tests/data/tensor_core_cases.txt

Each case is D = A B + C with A (M,K) and B (K,N) in f16 or bf16 and C, D in f32: M = 16, N = 8,
K = 16 (one mma.m16n8k16, operands placed in registers by the PTX ISA's fragment tables), or a
larger M, N, K (multiples of 16, 8, 16) that the test stages through shared memory and loads with
ldmatrix (A with .x4, B from its row-major (K,N) storage with .x2.trans), as a kernel would.
Inputs span several binades (and include exact zeros and negative values) so that a wrong
element placement changes the product. Every D element carries its scale, C + sum_k |A||B|,
from which the test bounds the f32 accumulation error.

Format (text): `case NAME`, `dtype f16|bf16`, `mnk M N K`, arrays `A count v...` (row-major),
`B count v...` (row-major K x N), `C count v...`, `D count v...`, `scale count v...`, `end`.
Values are written with repr (float64), exactly the rounded inputs."""
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, 'data', 'tensor_core_cases.txt')
TORCH = {'f16': torch.float16, 'bf16': torch.bfloat16}

gen = torch.Generator().manual_seed(20261127)


def operand(shape, dtype):
    """Random values over a few binades, rounded to dtype (returned in float64)."""
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    x = x * torch.pow(2.0, torch.randint(-3, 4, shape, generator=gen).double())
    x[torch.rand(shape, generator=gen) < 0.05] = 0.0
    return x.to(TORCH[dtype]).to(torch.float64)


def case(f, name, dtype, m, n, k):
    a = operand((m, k), dtype)
    b = operand((k, n), dtype)
    c = torch.randn((m, n), generator=gen, dtype=torch.float64).to(torch.float32).to(torch.float64)
    d = torch.matmul(a, b) + c
    scale = torch.matmul(a.abs(), b.abs()) + c.abs()
    f.write(f'case {name}\ndtype {dtype}\nmnk {m} {n} {k}\n')
    for key, t in (('A', a), ('B', b), ('C', c), ('D', d), ('scale', scale)):
        vals = t.flatten().tolist()
        f.write(f'{key} {len(vals)} ' + ' '.join(repr(v) for v in vals) + '\n')
    f.write('end\n')


def main():
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, 'w') as f:
        for dtype in ('f16', 'bf16'):
            for i in range(3):
                case(f, f'mma_{dtype}_{i}', dtype, 16, 8, 16)
            case(f, f'tiled_{dtype}_32x16x32', dtype, 32, 16, 32)
            case(f, f'tiled_{dtype}_48x24x32', dtype, 48, 24, 32)
    print('wrote', OUT)


if __name__ == '__main__':
    main()
