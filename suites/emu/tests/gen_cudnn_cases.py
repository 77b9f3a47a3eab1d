#!/usr/bin/python3
"""gen_cudnn_cases.py — the expectations test_emu_cudnn.cc checks the emulated cuDNN against,
computed here in PyTorch (float64, torch.nn.functional.conv{1,2,3}d and autograd) from the
rounded inputs, independently of the emulator.

    /usr/bin/python3 suites/emu/tests/gen_cudnn_cases.py   # writes tests/data/cudnn_cases.txt

Each case is one convolution pass as cuDNN's backend API describes it (dims always in (N, C,
spatial...) order; the layout only changes the strides the C++ test gives the three tensors):
  FWD         y  = alpha conv(x, w)          + beta y0
  BWD_DATA    dx = alpha d conv/dx^T (dy, w) + beta dx0     (autograd of conv w.r.t. x)
  BWD_FILTER  dw = alpha d conv/dw^T (dy, x) + beta dw0     (autograd of conv w.r.t. w)
with groups = C / (w's C), symmetric zero padding, stride, dilation; mode CONVOLUTION flips the
filter's spatial dims (cross-correlation with the flipped filter; for BWD_FILTER the gradient of
the flipped filter is flipped back). beta == 0 cases carry no initial output: the test fills it with
NaN, which must not leak (cuDNN does not read the output when beta is zero).

Format (text, one key per line): `case NAME`, scalar lines `key v1 v2 ...`, array lines
`NAME count v1 ... vcount`, `end`. Arrays are in logical (row-major over the dims) order. Data
arrays x, w, y (the three buffers before the call; the output's only when beta != 0) hold values
exactly representable in the case's type: shortest float32 text for FLOAT/HALF/BFLOAT16 (read back
with strtof), repr() for DOUBLE. `out` is the float64 expectation, `scale` the magnitude
|alpha| sum|terms| + |beta y0| per output element, `terms` the most products one output sums; the
test derives its tolerance from them (see tolerance() in test_emu_cudnn.cc)."""
import os

import numpy as np
import torch
import torch.nn.functional as F

TORCH = {'FLOAT': torch.float32, 'DOUBLE': torch.float64, 'HALF': torch.float16,
         'BFLOAT16': torch.bfloat16}
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, 'data', 'cudnn_cases.txt')
CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}

gen = torch.Generator().manual_seed(20240917)


def rounded(shape, t):
    """Standard normal values rounded to type t, as float64."""
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(TORCH[t]).to(torch.float64)


def conv(x, w, c):
    nsp = x.dim() - 2
    if c['mode'] == 'CONVOLUTION':
        w = torch.flip(w, dims=list(range(2, 2 + nsp)))
    return CONV[nsp](x, w, stride=c['stride'], padding=c['pad'], dilation=c['dil'],
                     groups=x.shape[1] // w.shape[1])


def out_dims(xd, wd, c):
    sp = [(xd[2 + i] + 2 * c['pad'][i] - c['dil'][i] * (wd[2 + i] - 1) - 1) // c['stride'][i] + 1
          for i in range(len(xd) - 2)]
    return [xd[0], wd[0]] + sp


def pass_result(c, x, w, dy):
    """The pass's result (linear in its two inputs), float64."""
    if c['pass'] == 'FWD':
        return conv(x, w, c)
    if c['pass'] == 'BWD_DATA':
        xv = torch.zeros(c['xdims'], dtype=torch.float64, requires_grad=True)
        (g,) = torch.autograd.grad(conv(xv, w, c), xv, dy)
        return g
    wv = torch.zeros(c['wdims'], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(conv(x, wv, c), wv, dy)
    return g


def f32_text(v):
    return np.format_float_positional(np.float32(v), unique=True, trim='-')


def arr(name, t, fmt):
    """An array line: fmt 'f32' (data of FLOAT/HALF/BFLOAT16), 'f64' (DOUBLE data and the
    expectation) or 'scale' (4 significant digits are enough for a tolerance)."""
    vals = t.flatten().tolist()
    if fmt == 'f32':
        text = [f32_text(v) for v in vals]
    elif fmt == 'scale':
        text = ['%.4g' % v for v in vals]
    else:
        text = [repr(float(v)) for v in vals]
    return '%s %d %s' % (name, len(vals), ' '.join(text))


def case(name, pss, typ, layout, xdims, wdims, stride, pad, dil, mode='CROSS_CORRELATION',
         alpha=1.0, beta=0.0):
    assert len(xdims) - 2 in (1, 2, 3)
    c = {'pass': pss, 'mode': mode, 'xdims': xdims, 'wdims': wdims, 'stride': stride,
         'pad': pad, 'dil': dil}
    ydims = out_dims(xdims, wdims, c)
    c['ydims'] = ydims
    x, w, y = rounded(xdims, typ), rounded(wdims, typ), rounded(ydims, typ)
    out_role = {'FWD': 2, 'BWD_DATA': 0, 'BWD_FILTER': 1}[pss]
    bufs = [x, w, y]
    init = bufs[out_role]
    res = pass_result(c, x, w, y)
    scale_res = pass_result(c, x.abs(), w.abs(), y.abs())
    expected = alpha * res + (beta * init if beta != 0 else 0)
    scale = abs(alpha) * scale_res + (abs(beta) * init.abs() if beta != 0 else 0)
    G = xdims[1] // wdims[1]
    if pss == 'FWD':
        terms = wdims[1] * int(np.prod(wdims[2:]))
    elif pss == 'BWD_DATA':
        terms = (wdims[0] // G) * int(np.prod(wdims[2:]))
    else:
        terms = ydims[0] * int(np.prod(ydims[2:]))
    lines = ['case ' + name, 'pass ' + pss, 'type ' + typ, 'layout ' + layout, 'mode ' + mode,
             'xdims ' + ' '.join(map(str, xdims)), 'wdims ' + ' '.join(map(str, wdims)),
             'ydims ' + ' '.join(map(str, ydims)), 'stride ' + ' '.join(map(str, stride)),
             'pad ' + ' '.join(map(str, pad)), 'dil ' + ' '.join(map(str, dil)),
             'alpha ' + repr(alpha), 'beta ' + repr(beta), 'terms %d' % terms]
    for role, nm in enumerate('xwy'):
        if role != out_role or beta != 0:
            lines.append(arr(nm, bufs[role], 'f64' if typ == 'DOUBLE' else 'f32'))
    lines.append(arr('out', expected, 'f64'))
    lines.append(arr('scale', scale, 'scale'))
    lines.append('end')
    return '\n'.join(lines)


def main():
    cases = [
        # forward
        case('fwd_f32_nchw_s2p1', 'FWD', 'FLOAT', 'NCHW', [2, 4, 7, 6], [6, 4, 3, 3],
             [2, 2], [1, 1], [1, 1]),
        case('fwd_f32_nhwc_d2g2', 'FWD', 'FLOAT', 'NHWC', [2, 4, 8, 7], [4, 2, 3, 2],
             [1, 1], [2, 1], [2, 2]),
        case('fwd_f64_nchw_g2_s21', 'FWD', 'DOUBLE', 'NCHW', [1, 6, 7, 7], [4, 3, 3, 3],
             [2, 1], [1, 0], [1, 1]),
        case('fwd_f16_nhwc_s2p1', 'FWD', 'HALF', 'NHWC', [2, 8, 6, 6], [8, 8, 3, 3],
             [2, 2], [1, 1], [1, 1]),
        case('fwd_bf16_nchw_p1', 'FWD', 'BFLOAT16', 'NCHW', [1, 4, 5, 5], [4, 4, 3, 3],
             [1, 1], [1, 1], [1, 1]),
        case('fwd_f32_nhwc_beta1', 'FWD', 'FLOAT', 'NHWC', [1, 3, 5, 5], [4, 3, 3, 3],
             [1, 1], [1, 1], [1, 1], beta=1.0),
        case('fwd_f64_convmode_a2b05', 'FWD', 'DOUBLE', 'NCHW', [1, 2, 5, 6], [3, 2, 3, 2],
             [1, 1], [1, 1], [1, 1], mode='CONVOLUTION', alpha=2.0, beta=0.5),
        case('fwd_f16_nchw_3x3s1', 'FWD', 'HALF', 'NCHW', [1, 4, 6, 6], [4, 4, 3, 3],
             [1, 1], [1, 1], [1, 1]),
        case('fwd_f64_3d_ndhwc', 'FWD', 'DOUBLE', 'NHWC', [1, 2, 4, 5, 4], [3, 2, 2, 3, 2],
             [1, 2, 1], [1, 1, 0], [1, 1, 2]),
        # backward data
        case('bwdd_f32_nchw_s3k2', 'BWD_DATA', 'FLOAT', 'NCHW', [2, 3, 8, 8], [4, 3, 2, 2],
             [3, 3], [0, 0], [1, 1]),
        case('bwdd_f64_nhwc_d2g2', 'BWD_DATA', 'DOUBLE', 'NHWC', [2, 4, 7, 7], [6, 2, 3, 3],
             [1, 1], [2, 2], [2, 2]),
        case('bwdd_f16_nchw_g2', 'BWD_DATA', 'HALF', 'NCHW', [1, 4, 6, 6], [4, 2, 3, 3],
             [1, 1], [1, 1], [1, 1]),
        case('bwdd_f32_nhwc_convmode_beta1', 'BWD_DATA', 'FLOAT', 'NHWC', [1, 4, 6, 5],
             [3, 4, 3, 3], [2, 2], [1, 1], [1, 1], mode='CONVOLUTION', beta=1.0),
        # backward filter
        case('bwdf_f32_nhwc_s2d2', 'BWD_FILTER', 'FLOAT', 'NHWC', [2, 4, 9, 8], [6, 4, 3, 3],
             [2, 2], [1, 1], [2, 2]),
        case('bwdf_f64_nchw_g2', 'BWD_FILTER', 'DOUBLE', 'NCHW', [2, 6, 6, 6], [4, 3, 3, 3],
             [1, 1], [1, 1], [1, 1]),
        case('bwdf_f16_nhwc_s2', 'BWD_FILTER', 'HALF', 'NHWC', [2, 4, 6, 6], [8, 4, 3, 3],
             [2, 2], [1, 1], [1, 1]),
        case('bwdf_f32_nchw_convmode_beta1', 'BWD_FILTER', 'FLOAT', 'NCHW', [1, 3, 6, 6],
             [4, 3, 2, 2], [2, 2], [0, 0], [1, 1], mode='CONVOLUTION', beta=1.0),
        case('bwdf_bf16_nchw_g2', 'BWD_FILTER', 'BFLOAT16', 'NCHW', [2, 4, 5, 5], [2, 2, 3, 3],
             [1, 1], [1, 1], [1, 1]),
    ]
    with open(OUT, 'w') as f:
        f.write('# cudnn_cases.txt: written by gen_cudnn_cases.py (PyTorch %s); do not edit\n'
                % torch.__version__)
        f.write('\n'.join(cases) + '\n')
    print('wrote %d cases to %s (%d bytes)' % (len(cases), OUT, os.path.getsize(OUT)))


if __name__ == '__main__':
    main()
