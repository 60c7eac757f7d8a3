#!/usr/bin/env python3
"""Static checks of the CUDA executor's kernels, from the PTX nvcc wrote for a source file whose
functions each make one fuse::cuda::eval (tests/cuda/static_kernels.cu). No GPU needed.

    python3 scripts/check_kernels.py --ptx static_kernels.ptx --source tests/cuda/static_kernels.cu

1. One expression, one kernel: the PTX has exactly as many kernel entries as the source's line
   `fuse-static-kernels: N` says it makes evals.
2. No calls in any kernel (a call is an out-of-line routine: a software division, a printf, an
   assert), and no 64-bit integer division or remainder (ptxas turns them into such a call).
3. No local memory (a stack frame: `.local` in the PTX, the `__local_depot` ptxas keeps in
   DRAM): an array indexed at run time, or a spill forced at the PTX level, in a kernel that
   should live in registers.
4. Vector accesses: each PTX instruction named on the source's line
   `fuse-static-instructions: ...` appears (ld.global.v4.f32: contiguous float rows are read
   16 bytes at a time).
Prints each violation and exits 1 if there is any.
"""
import argparse
import re
import sys


def entries(ptx):
    """(name, body) of each .entry in the PTX text."""
    out = []
    for m in re.finditer(r'^\.visible \.entry (\S+?)\(', ptx, re.M):
        start = m.end()
        nxt = re.search(r'^\.visible \.entry ', ptx[start:], re.M)
        out.append((m.group(1), ptx[start:start + nxt.start()] if nxt else ptx[start:]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--ptx', required=True)
    ap.add_argument('--source', required=True)
    a = ap.parse_args()
    ptx = open(a.ptx, encoding='utf-8').read()
    src = open(a.source, encoding='utf-8').read()
    m = re.search(r'fuse-static-kernels:\s*(\d+)', src)
    if not m:
        print(f'check_kernels: {a.source} has no line "fuse-static-kernels: N"')
        return 1
    want = int(m.group(1))
    errors = []
    found = entries(ptx)
    if len(found) != want:
        errors.append(f'{len(found)} kernel entries, expected {want} (one per eval)')
    for name, body in found:
        for pat, what in ((r'^\s*call(\.uni)?\s', 'a call'), (r'\b(div|rem)\.[su]64\b', 'a 64-bit division'),
                          (r'\.local\b', 'local memory (a stack frame)')):
            hit = re.search(pat, body, re.M)
            if hit:
                line = body[:hit.start()].count('\n')
                errors.append(f'{name[:90]}...: {what} (body line {line}): {body.splitlines()[line].strip()}')
    m = re.search(r'^// fuse-static-instructions:(.*)$', src, re.M)
    for ins in (m.group(1).split() if m else []):
        if not re.search(r'\b' + re.escape(ins) + r'\b', ptx):
            errors.append(f'no {ins} in any kernel')
    for e in errors:
        print('check_kernels:', e)
    if not errors:
        print(f'check_kernels: {len(found)} kernels, one per eval; no calls, no 64-bit division, no local memory; '
              f'{m.group(1).strip() if m else "no instructions asked for"} present')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
