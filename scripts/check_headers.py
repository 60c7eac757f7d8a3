#!/usr/bin/env python3
"""Checks the shape of include/fuse: which header may include which, and that each compiles alone.

    python3 scripts/check_headers.py                      # the include rules only (a second)
    python3 scripts/check_headers.py --compile g++ -- -std=c++20 -Iinclude -I/usr/include/eigen3

1. No include cycle among fuse's headers.
2. The rooms (docs/design.md, "Rooms"): a header includes fuse headers of its own room and of
   the rooms listed for it below, never of a room above. Inside cpu/ the files are layered too:
   kernels over memory, then the pass driver, then the kernels over trees, the blocked
   epilogue, and the executor's entry on top; a file includes only files of a lower layer.
3. With --compile: every header compiled alone in its own translation unit (-fsyntax-only),
   so that none relies on what its includers happened to include first.
Prints every violation and exits 1 if there is any.
"""
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
INCLUDE = os.path.join(ROOT, 'include')

# Room -> the rooms it may include besides itself. Top-level headers (fuse.hpp, eigen.hpp,
# reference.hpp) may include anything.
ROOMS = {
    'core': set(),
    'math': {'core'},
    'expr': {'core', 'math'},
    'simd': {'core', 'math', 'expr'},
    'bind': {'core', 'math', 'expr'},
    'cpu': {'core', 'math', 'expr', 'simd', 'bind'},
    'cuda': {'core', 'math', 'expr', 'bind'},
    'relay': {'core', 'expr'},
}

# cpu/: layer of each file; a file includes only files of strictly lower layers.
CPU_LAYERS = {
    'options.hpp': 0,        # eval's options and statistics
    'scratch.hpp': 0,        # storage an eval reuses
    'gemm_half.hpp': 0,      # kernels over memory
    'gemm.hpp': 1,
    'gemm_bf16.hpp': 2,
    'gemm_int8.hpp': 2,
    'packed.hpp': 3,
    'vector_access.hpp': 4,  # the pass driver
    'pass.hpp': 5,
    'contract.hpp': 6,       # kernels over trees
    'reduce.hpp': 6,
    'epilogue.hpp': 7,       # the blocked epilogue
    'eval.hpp': 8,           # the entry: fuse::eval and the executor context
    'pack.hpp': 9,           # fuse::pack (evaluates the weights it packs)
}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"](fuse/[^>"]+)[>"]', re.M)


def headers():
    out = []
    for d, _, files in os.walk(os.path.join(INCLUDE, 'fuse')):
        for f in files:
            if f.endswith('.hpp'):
                out.append(os.path.relpath(os.path.join(d, f), INCLUDE))
    return sorted(out)


def read_header(h):
    with open(os.path.join(INCLUDE, h), encoding='utf-8') as f:
        return f.read()


def room(h):
    parts = h.split('/')
    return parts[1] if len(parts) > 2 else None


def check_rules(graph):
    errors = []
    for h, incs in graph.items():
        for i in incs:
            if i not in graph:
                errors.append(f'{h}: includes {i}, which is not a header of include/fuse')
                continue
            r, ri = room(h), room(i)
            if r is None:
                continue
            if ri is None:
                errors.append(f'{h}: includes the umbrella or top-level header {i}')
            elif ri != r and ri not in ROOMS.get(r, set()):
                errors.append(f'{h}: room {r}/ includes {i} of room {ri}/, which sits above it')
            elif r == 'cpu' and ri == 'cpu':
                a, b = os.path.basename(h), os.path.basename(i)
                if a not in CPU_LAYERS or b not in CPU_LAYERS:
                    errors.append(f'{h}: give {a if a not in CPU_LAYERS else b} a layer in CPU_LAYERS')
                elif CPU_LAYERS[b] >= CPU_LAYERS[a]:
                    errors.append(f'{h}: includes {i} of the same or a higher layer of cpu/')
    # Cycles: depth-first search with colours.
    colour = {h: 0 for h in graph}
    stack = []

    def visit(h):
        colour[h] = 1
        stack.append(h)
        for i in graph[h]:
            if i not in graph:
                continue
            if colour[i] == 1:
                errors.append('include cycle: ' + ' -> '.join(stack[stack.index(i):] + [i]))
            elif colour[i] == 0:
                visit(i)
        stack.pop()
        colour[h] = 2

    for h in graph:
        if colour[h] == 0:
            visit(h)
    return errors


XSIMD_RE = re.compile(r'^\s*#\s*include\s*<xsimd/', re.M)


def reaches_xsimd(hs, graph, texts):
    """The headers that include xsimd, directly or through other fuse headers (graph: each
    header's fuse includes; texts: each header's text)."""
    direct = {h for h in hs if XSIMD_RE.search(texts[h])}
    reach = {}

    def visit(h):
        if h not in reach:
            reach[h] = h in direct  # meanwhile, so that a cycle ends (check_rules reports it)
            reach[h] = h in direct or any(visit(i) for i in graph.get(h, []) if i in graph)
        return reach[h]

    return {h for h in hs if visit(h)}


def compile_alone(hs, graph, texts, cxx, flags):
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        # xsimd is most of the parse of a header that reaches it (2.4 of 2.6 s for cpu/eval.hpp):
        # those headers read it precompiled. It adds nothing they would not see anyway (xsimd and
        # its standard headers come first in their translation unit either way), and the headers
        # that do not reach xsimd compile without it, so a missing standard include stays visible.
        prelude = os.path.join(tmp, 'xsimd_prelude.hpp')
        with open(prelude, 'w') as f:
            f.write('#include <xsimd/xsimd.hpp>\n')
        pch = subprocess.run([cxx, '-x', 'c++-header'] + flags + [prelude, '-o', prelude + '.gch'],
                             capture_output=True, text=True)
        with_xsimd = reaches_xsimd(hs, graph, texts) if pch.returncode == 0 else set()

        def one(h):
            src = os.path.join(tmp, h.replace('/', '_') + '.cpp')
            with open(src, 'w') as f:
                f.write(f'#include "{h}"\n')
            pre = ['-include', prelude] if h in with_xsimd else []
            r = subprocess.run([cxx, '-fsyntax-only', '-I' + INCLUDE] + pre + flags + [src], capture_output=True, text=True)
            return h, r.returncode, r.stderr

        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            for h, rc, err in pool.map(one, hs):
                if rc != 0:
                    first = '\n'.join(err.splitlines()[:6])
                    errors.append(f'{h}: does not compile on its own:\n{first}')
    return errors


def main(argv):
    hs = headers()
    texts = {h: read_header(h) for h in hs}  # each header read once
    graph = {h: INCLUDE_RE.findall(texts[h]) for h in hs}  # each header's fuse includes
    errors = check_rules(graph)
    if '--compile' in argv:
        i = argv.index('--compile')
        cxx = argv[i + 1]
        flags = argv[argv.index('--') + 1:] if '--' in argv else []
        errors += compile_alone(hs, graph, texts, cxx, flags)
        what = f'{len(hs)} headers: include rules, no cycle, each compiles alone'
    else:
        what = f'{len(hs)} headers: include rules, no cycle'
    for e in errors:
        print('check_headers: ' + e)
    if errors:
        return 1
    print('check_headers: ' + what)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
