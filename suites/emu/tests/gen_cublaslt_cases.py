#!/usr/bin/python3
"""gen_cublaslt_cases.py — the expectations test_emu_cublaslt.cc checks the emulated cuBLASLt
against, computed here in PyTorch (float64) from the rounded inputs, independently of the emulator.

    /usr/bin/python3 suites/emu/tests/gen_cublaslt_cases.py   # writes tests/data/cublaslt_cases.txt

Each case is one cublasLtMatmul: D = epilogue(alpha op(A) op(B) + beta C), column-major (or
row-major) buffers with their padding (ld > rows, batch strides with gaps) written out whole, so
the C++ test copies them to the device as they are and compares whole buffers back:
  - A, B and C padding is NaN: an element read that should not be shows up as a NaN in D;
  - D padding is -77.5 (exact in every type) and must come back bit-identical (Dtol -1);
  - every other element of D has a magnitude scale (|alpha| |op(A)| |op(B)| + |beta C| + |bias|)
    from which the test derives its tolerance (see tolerance() in test_emu_cublaslt.cc).
Semantics assumed (cuBLASLt API reference / cublasLt.h): BIAS adds a length-m bias broadcast over
columns before the activation; RELU is max(x, 0); GELU is the tanh approximation; BGRADA writes
sum_k op(A)[i, k] (length m), BGRADB sum_k op(B)[k, j] (length n); beta == 0 never reads C;
GELU_AUX(_BIAS) also write GELU's input (after the bias, rounded to D's type) to the aux matrix
(column-major m x n at its own leading dimension and batch stride, both multiples of 8), and DGELU
multiplies the product by GELU'(aux), GELU' being PyTorch's gelu_backward(approximate='tanh');
FAST_TF32 rounds f32 inputs to a 10-bit mantissa (nearest, ties away from zero) before the product.

Format (text, one key per line): `case NAME`, scalar lines `key v1 v2 ...`, array lines
`NAME count v1 ... vcount`, `end`. Arrays of 16F/16BF/32F data hold float32 values written in their
shortest form (read back with strtof), 64F ones repr(float) (strtod)."""
import os

import numpy as np
import torch

TORCH = {'16F': torch.float16, '16BF': torch.bfloat16, '32F': torch.float32, '64F': torch.float64}
PAD_D = -77.5   # exactly representable in f16, bf16, f32, f64
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, 'data', 'cublaslt_cases.txt')

gen = torch.Generator().manual_seed(20240611)


def rounded(x, t):
    """float64 tensor x rounded to storage type t, back in float64."""
    return x.to(TORCH[t]).to(torch.float64)


def tf32(x):
    """Round float32 values (held in a float64 tensor) to TF32: 10 mantissa bits, nearest, ties
    away from zero (add half an ulp of the kept bits to the magnitude, then truncate)."""
    b = x.to(torch.float32).numpy().view(np.uint32).copy()
    finite = (b & 0x7f800000) != 0x7f800000
    b[finite] = (b[finite] + np.uint32(0x1000)) & np.uint32(0xffffe000)
    return torch.from_numpy(b.view(np.float32).astype(np.float64))


def randn(shape, t, spread=1.0):
    return rounded(torch.randn(shape, generator=gen, dtype=torch.float64) * spread, t)


def index(r, c, ld, order):
    return r + c * ld if order == 'COL' else r * ld + c


def footprint(rows, cols, ld, order):
    if rows == 0 or cols == 0:
        return 0
    return index(rows - 1, cols - 1, ld, order) + 1


def place(mats, ld, stride, order, fill):
    """Batch of (rows, cols) float64 matrices into one flat buffer with the layout's padding."""
    batch, rows, cols = mats.shape
    one = footprint(rows, cols, ld, order)
    buf = np.full((batch - 1) * stride + one if batch > 1 else one, fill, dtype=np.float64)
    for b in range(batch):
        for r in range(rows):
            for c in range(cols):
                buf[b * stride + index(r, c, ld, order)] = float(mats[b, r, c])
    return buf


def fmt_values(vals, t):
    out = []
    for v in vals:
        v = float(v)
        if t == '64F':
            out.append(repr(v))
        elif np.isnan(v):
            out.append('nan')
        else:
            out.append(str(np.float32(v)))
    return out


def act(x, name):
    if name in ('RELU', 'RELU_BIAS'):
        return torch.clamp(x, min=0.0)
    if name in ('GELU', 'GELU_BIAS', 'GELU_AUX', 'GELU_AUX_BIAS'):   # the tanh approximation
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))
    return x


def make(name, ab='32F', cd='32F', compute='32F', m=5, n=4, k=7, batch=1, ta=False, tb=False,
         order='COL', pad=(0, 0, 0, 0), gaps=(0, 0, 0, 0), broadcast_a=False, alpha=1.0,
         beta=0.0, inplace=False, c_nan=False, epilogue='DEFAULT', bias_type=None,
         bias_per_batch=False, mask=2, distinct=False, aux_pad=0, aux_gap=0):
    """One case. pad: extra leading dimension of A, B, C, D; gaps: extra batch stride;
    aux_pad / aux_gap: the aux matrix's extra leading dimension / batch stride (multiples of 8)."""
    a_rows, a_cols = (k, m) if ta else (m, k)
    b_rows, b_cols = (n, k) if tb else (k, n)

    def ld_of(rows, cols, extra):
        return (rows if order == 'COL' else cols) + extra

    lda, ldb = ld_of(a_rows, a_cols, pad[0]), ld_of(b_rows, b_cols, pad[1])
    ldd = ld_of(m, n, pad[3])
    ldc = ldd if inplace else ld_of(m, n, pad[2])

    def stride_of(rows, cols, ld, gap):
        return footprint(rows, cols, ld, order) + gap if batch > 1 else 0

    sa = 0 if broadcast_a else stride_of(a_rows, a_cols, lda, gaps[0])
    sb = stride_of(b_rows, b_cols, ldb, gaps[1])
    sd = stride_of(m, n, ldd, gaps[3])
    sc = sd if inplace else stride_of(m, n, ldc, gaps[2])

    A = randn((1 if broadcast_a else batch, a_rows, a_cols), ab)
    if broadcast_a:
        A = A.expand(batch, a_rows, a_cols)
    B = randn((batch, b_rows, b_cols), ab)
    C = randn((batch, m, n), cd)
    bias_t = bias_type or cd
    uses_bias = epilogue in ('BIAS', 'RELU_BIAS', 'GELU_BIAS', 'GELU_AUX_BIAS')
    aux_kind = ('W' if epilogue in ('GELU_AUX', 'GELU_AUX_BIAS') else
                'R' if epilogue == 'DGELU' else None)
    aux_ld = (m + 7) // 8 * 8 + aux_pad
    aux_stride = aux_ld * n + aux_gap if batch > 1 else 0
    aux_in = randn((batch, m, n), cd, 2.0) if aux_kind == 'R' else None   # GELU's inputs
    bias = randn((batch if bias_per_batch else 1, m), bias_t) if uses_bias else None

    opA = A.transpose(1, 2) if ta else A          # (batch, m, k)
    opB = B.transpose(1, 2) if tb else B          # (batch, k, n)
    if compute == '32F_FAST_TF32':
        pa, pb = tf32(opA), tf32(opB)
    else:
        pa, pb = opA, opB

    def result(xa, xb):
        v = alpha * torch.matmul(xa, xb)
        scale = abs(alpha) * torch.matmul(xa.abs(), xb.abs())
        if beta != 0.0:
            v = v + beta * C
            scale = scale + abs(beta) * C.abs()
        if uses_bias:
            bb = bias[:, :, None].expand(batch, m, n)
            v = v + bb
            scale = scale + bb.abs()
        if aux_kind == 'R':   # the product times GELU'(aux); the scale too, plus |v| for GELU's own
            g = torch.ops.aten.gelu_backward(torch.ones_like(aux_in), aux_in, approximate='tanh')
            return rounded(v * g, cd), scale * (g.abs() + 1.0)
        return rounded(act(v, epilogue), cd), scale

    expect, scale = result(pa, pb)
    if aux_kind == 'W':   # GELU's input, rounded to D's type, with its own scale (no GELU)
        pre = alpha * torch.matmul(pa, pb) + (beta * C if beta != 0.0 else 0.0)
        pre_scale = abs(alpha) * torch.matmul(pa.abs(), pb.abs()) + (abs(beta) * C.abs() if beta
                                                                    != 0.0 else 0.0)
        if uses_bias:
            pre = pre + bias[:, :, None].expand(batch, m, n)
            pre_scale = pre_scale + bias[:, :, None].expand(batch, m, n).abs()

    # buffers: D starts as C (in place) or as junk that must be overwritten; padding PAD_D
    C_fill = float('nan')
    C_vals = torch.full_like(C, float('nan')) if c_nan else C
    D0_logical = C if inplace else torch.full_like(C, float('nan') if c_nan else 999.0)
    D0 = place(D0_logical, ldd, sd, order, PAD_D)
    D = place(expect, ldd, sd, order, PAD_D)
    Dtol = place(scale, ldd, sd, order, -1.0)
    lines = [f'case {name}', f'types {ab} {cd} {compute}', f'dims {m} {n} {k} {batch}',
             f"trans {'T' if ta else 'N'} {'T' if tb else 'N'}", f'order {order}',
             f'ld {lda} {ldb} {ldc} {ldd}', f'stride {sa} {sb} {sc} {sd}',
             f'scalars {alpha!r} {beta!r}',
             f"epilogue {epilogue} {bias_t} {m if bias_per_batch else 0}",
             f'mask {mask}', f"alias {1 if inplace else 0}"]

    def arr(key, vals, t):
        lines.append(' '.join([key, str(len(vals))] + fmt_values(vals, t)))

    arr('A', place(A, lda, sa, order, float('nan')), ab)
    arr('B', place(B, ldb, sb, order, float('nan')), ab)
    if not inplace:
        arr('C', place(C_vals, ldc, sc, order, C_fill), cd)
    arr('D0', D0, cd)
    arr('D', D, cd)
    lines.append(' '.join(['Dtol', str(len(Dtol))] + [f'{v:.6g}' for v in Dtol]))
    if distinct:   # the product of the unrounded inputs, which the result must differ from
        plain, _ = result(opA, opB)
        arr('Dnot', place(plain, ldd, sd, order, PAD_D), cd)
    if uses_bias:
        arr('bias', bias.reshape(-1).numpy(), bias_t)
    if aux_kind:
        lines.append(f'auxld {aux_ld} {aux_stride}')
        if aux_kind == 'R':   # read: its padding NaN, which D would show if it were read
            arr('aux', place(aux_in, aux_ld, aux_stride, 'COL', float('nan')), cd)
        else:                 # written: starts as PAD_D, the padding must stay so
            arr('aux', place(torch.full((batch, m, n), 555.0, dtype=torch.float64), aux_ld,
                             aux_stride, 'COL', PAD_D), cd)
            arr('auxx', place(rounded(pre, cd), aux_ld, aux_stride, 'COL', PAD_D), cd)
            auxtol = place(pre_scale, aux_ld, aux_stride, 'COL', -1.0)
            lines.append(' '.join(['auxtol', str(len(auxtol))] + [f'{v:.6g}' for v in auxtol]))
    if epilogue in ('BGRADA', 'BGRADB'):
        src = opA.sum(dim=2) if epilogue == 'BGRADA' else opB.sum(dim=1)   # (batch, m) / (batch, n)
        mag = opA.abs().sum(dim=2) if epilogue == 'BGRADA' else opB.abs().sum(dim=1)
        arr('bias', np.full(src.numel(), 555.0), bias_t)   # overwritten
        arr('biasx', rounded(src, bias_t).reshape(-1).numpy(), bias_t)
        lines.append(' '.join(['biastol', str(mag.numel())] +
                              [f'{v:.6g}' for v in mag.reshape(-1).numpy()]))
    lines.append('end')
    return '\n'.join(lines)


def main():
    cases = [
        make('f32_nn'),
        make('f32_tn', ta=True),
        make('f32_nt', tb=True),
        make('f32_tt_padded_ld', ta=True, tb=True, pad=(2, 3, 0, 1)),
        make('f32_strided_batch_gaps', batch=3, ta=True, pad=(1, 0, 0, 2), gaps=(3, 1, 0, 4)),
        make('f32_batch_broadcast_a', batch=2, broadcast_a=True),
        make('f32_alpha_beta_in_place', alpha=1.5, beta=-0.5, inplace=True, pad=(0, 0, 0, 2)),
        make('f32_out_of_place_ldc', alpha=0.75, beta=2.0, pad=(0, 0, 3, 1)),
        make('f32_beta0_nan_c', beta=0.0, c_nan=True, pad=(0, 0, 1, 1)),
        make('f32_row_order', order='ROW', ta=True, pad=(1, 0, 0, 2), alpha=2.0, beta=1.0,
             inplace=True),
        make('f32_k32_all_schemes', k=32, mask=7),
        make('f16_f16_split', ab='16F', cd='16F', m=6, n=5, k=24),
        make('f16_f32', ab='16F', cd='32F', k=9, tb=True),
        make('bf16_bf16', ab='16BF', cd='16BF', k=20, ta=True, beta=1.0, inplace=True),
        make('bf16_f32', ab='16BF', cd='32F', tb=True),
        make('tf32', compute='32F_FAST_TF32', k=8, distinct=True),
        make('tf32_split_tn', compute='32F_FAST_TF32', k=40, ta=True, distinct=True),
        make('f64_tn_alpha_beta', ab='64F', cd='64F', compute='64F', ta=True, alpha=-0.5,
             beta=0.25, inplace=True),
        make('f16_compute_16f', ab='16F', cd='16F', compute='16F', k=6),
        make('f32_bias', epilogue='BIAS'),
        make('f32_relu', epilogue='RELU', k=5),
        make('f16_relu_bias', ab='16F', cd='16F', epilogue='RELU_BIAS', ta=True),
        make('f32_gelu', epilogue='GELU', m=6, n=6, k=4),
        make('bf16_gelu_bias', ab='16BF', cd='16BF', epilogue='GELU_BIAS'),
        make('f32_bias_batched', epilogue='BIAS', batch=2, bias_per_batch=True),
        make('f16_bias_f32_type', ab='16F', cd='16F', epilogue='BIAS', bias_type='32F'),
        make('f64_relu_bias', ab='64F', cd='64F', compute='64F', epilogue='RELU_BIAS', tb=True),
        make('f32_bgradb', epilogue='BGRADB', tb=True, k=12),
        make('f16_f32_bgradb', ab='16F', cd='32F', epilogue='BGRADB', tb=True, k=10),
        make('f32_bgrada', epilogue='BGRADA', ta=True),
        make('f32_gelu_aux', epilogue='GELU_AUX', m=6, n=5, k=4, aux_pad=8),
        make('bf16_gelu_aux_bias', ab='16BF', cd='16BF', epilogue='GELU_AUX_BIAS', m=16, n=3,
             k=24, ta=True),
        make('f16_gelu_aux_bias_batched', ab='16F', cd='16F', epilogue='GELU_AUX_BIAS', m=5,
             batch=2, bias_per_batch=True, aux_gap=8),
        make('f32_dgelu', epilogue='DGELU', m=7, n=4, k=6, aux_pad=8),
        make('bf16_dgelu', ab='16BF', cd='16BF', epilogue='DGELU', m=8, n=6, k=20, tb=True),
        make('f16_dgelu_batched_alpha_beta', ab='16F', cd='16F', epilogue='DGELU', m=4, batch=2,
             alpha=0.5, beta=1.0, inplace=True, aux_gap=16),
    ]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, 'w') as f:
        f.write('# cublaslt_cases.txt: written by gen_cublaslt_cases.py (PyTorch %s); '
                'do not edit\n' % torch.__version__)
        f.write('\n'.join(cases) + '\n')
    print('%s: %d cases, %d bytes' % (OUT, len(cases), os.path.getsize(OUT)))


if __name__ == '__main__':
    main()
