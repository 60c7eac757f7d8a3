#!/usr/bin/env python3
"""Fits every polynomial and table of fuse/math and prints them as C++.

    pip install mpmath numpy
    python3 tools/fit_math.py > /tmp/coeffs.txt      # a few minutes

The output is pasted into include/fuse/math/*.hpp (each block says where). Every fit is a
minimax (Remez exchange on a dense grid, 50-digit mpmath) of the *relative* error, followed by
rounding the coefficients to float one at a time, highest degree first, refitting the lower
ones after each rounding so they absorb the rounding error. A final small lattice search
(+-1 float ulp per coefficient) is used for the short exp/log polynomials.

Piecewise tables: f on [0, 15.5 w] is split into 16 intervals centred at j*w (interval 0 is
[0, w/2]; erf8, for AVX2 and SSE builds: 8 intervals on [0, 7.5 w]); interval j holds p_j(u) ~ f(j*w + u) for |u| <= w/2 (+2^-12 of slack for the
index rounding), stored as c0_hi, c0_lo, c1, ..., cd: the constant term is carried in two
floats so that rounding it costs nothing.
"""
import itertools
import sys

import mpmath as mp
import numpy as np

mp.mp.dps = 50


def f32(v):
    return float(np.float32(float(v)))


def hexf(v):
    v = f32(v)
    if v == 0.0:
        return "0.0f"
    return float.hex(v).replace("0000000p", "p").replace("000000p", "p").replace("00000p", "p") + "f"


def remez(f, basis, w, a, b, n_grid=500, iters=40):
    """min_c max_x |w(x) (f(x) - sum_k c_k basis_k(x))| on [a, b]; returns (c, max error)."""
    n = len(basis)
    a, b = mp.mpf(a), mp.mpf(b)
    xs = [a + (b - a) * (1 - mp.cos(mp.pi * i / (n_grid - 1))) / 2 for i in range(n_grid)]
    fx = [f(x) for x in xs]
    wx = [w(x) for x in xs]
    B = [[bk(x) for bk in basis] for x in xs]
    ref = [int(round((n_grid - 1) * (1 - np.cos(np.pi * i / n)) / 2)) for i in range(n + 1)]
    best = None
    for _ in range(iters):
        M = mp.matrix(n + 1, n + 1)
        rhs = mp.matrix(n + 1, 1)
        for i, j in enumerate(ref):
            for k in range(n):
                M[i, k] = B[j][k]
            M[i, n] = (-1) ** i / wx[j] if wx[j] != 0 else 0
            rhs[i] = fx[j]
        try:
            sol = mp.lu_solve(M, rhs)
        except ZeroDivisionError:
            break
        c = [sol[k] for k in range(n)]
        E = sol[n]
        err = [wx[i] * (fx[i] - sum(c[k] * B[i][k] for k in range(n))) for i in range(n_grid)]
        ext = []
        for i in range(n_grid):
            e = err[i]
            left = err[i - 1] if i > 0 else None
            right = err[i + 1] if i + 1 < n_grid else None
            if (left is None or abs(e) >= abs(left)) and (right is None or abs(e) >= abs(right)):
                ext.append(i)
        alt = []
        for i in ext:
            if alt and mp.sign(err[alt[-1]]) == mp.sign(err[i]):
                if abs(err[i]) > abs(err[alt[-1]]):
                    alt[-1] = i
            else:
                alt.append(i)
        while len(alt) > n + 1:
            if abs(err[alt[0]]) < abs(err[alt[-1]]):
                alt.pop(0)
            else:
                alt.pop()
        mx = max(abs(e) for e in err)
        if best is None or mx < best[1]:
            best = (c, mx)
        if len(alt) < n + 1 or mx <= abs(E) * (1 + 1e-6):
            break
        ref = alt
    return best


def powers(ks):
    return [(lambda k: (lambda u: u ** k))(k) for k in ks]


def fit_rounded(f, ks, w, a, b, keep_exact=(), n_grid=500):
    """Fits sum_{k in ks} c_k u^k to f, rounds coefficients to float from the highest degree
    down (refitting the rest each time). Degrees in keep_exact are returned unrounded."""
    fixed = {}
    order = sorted([k for k in ks if k not in keep_exact], reverse=True)

    def residual(fx):
        return lambda u: f(u) - sum(mp.mpf(v) * u ** k for k, v in fx.items())

    for k in order:
        free = [kk for kk in ks if kk not in fixed]
        c, _ = remez(residual(dict(fixed)), powers(free), w, a, b, n_grid)
        fixed[k] = f32(dict(zip(free, c))[k])
    free = [kk for kk in ks if kk not in fixed]
    if free:
        c, _ = remez(residual(dict(fixed)), powers(free), w, a, b, n_grid)
        for kk, v in zip(free, c):
            fixed[kk] = v  # exact (mpf)
    return fixed


def max_rel_err(f, coeffs, a, b, n=4000, skip_zero=False):
    us = [mp.mpf(a) + (mp.mpf(b) - a) * i / n for i in range(n + 1)]
    worst = 0
    for u in us:
        fu = f(u)
        if fu == 0:
            continue
        p = sum(mp.mpf(v) * u ** k for k, v in coeffs.items())
        worst = max(worst, abs((p - fu) / fu))
    return float(mp.log(worst, 2)) if worst else -999


def lattice(coeffs, errfn, radius=1):
    best = None
    for ks in itertools.product(range(-radius, radius + 1), repeat=len(coeffs)):
        c = []
        for v, k in zip(coeffs, ks):
            x = np.float32(v)
            for _ in range(abs(k)):
                x = np.nextafter(x, np.float32(np.inf if k > 0 else -np.inf))
            c.append(float(x))
        e = errfn(c)
        if best is None or e < best[1]:
            best = (c, e)
    return best


# --- exp: Q(r) ~ (e^r - 1 - r)/r^2 on |r| <= ln2/2, weighted for the relative error of e^r - 1 --
def fit_exp(deg_q):
    h = mp.log(2) / 2 + mp.mpf(2) ** -20
    f = lambda r: (mp.expm1(r) - r) / r ** 2 if r != 0 else mp.mpf(1) / 2
    w = lambda r: abs(r ** 2 / mp.expm1(r)) if r != 0 else mp.mpf(0)
    c, _ = remez(f, powers(range(deg_q + 1)), w, -h, h, n_grid=600)
    R = np.linspace(-float(h), float(h), 20000)
    em1 = np.array([float(mp.expm1(mp.mpf(r))) for r in R])
    tail = np.array([float(mp.expm1(mp.mpf(r)) - mp.mpf(r)) for r in R])

    def err(cs):
        q = np.zeros_like(R)
        for v in reversed(cs):
            q = q * R + v
        return np.max(np.abs((R * R * q - tail) / em1))

    cs, e = lattice([float(v) for v in c], err, radius=2 if deg_q <= 4 else 1)
    return cs, float(np.log2(e))


# --- log: log(1 + f) = f + f^2 Q(f), f in [-0.25, 0.5] ------------------------------------------
def fit_log(deg_q):
    a, b = mp.mpf(-0.25) - mp.mpf(2) ** -20, mp.mpf(0.5) + mp.mpf(2) ** -20
    f = lambda x: (mp.log1p(x) - x) / x ** 2 if x != 0 else mp.mpf(-1) / 2
    w = lambda x: abs(x ** 2 / mp.log1p(x)) if x != 0 else mp.mpf(0)
    fixed = fit_rounded(f, list(range(deg_q + 1)), w, a, b, n_grid=600)
    cs = [f32(fixed[k]) for k in range(deg_q + 1)]
    X = np.linspace(float(a), float(b), 20000)
    X = X[X != 0]
    l1p = np.array([float(mp.log1p(mp.mpf(x))) for x in X])
    tail = np.array([float(mp.log1p(mp.mpf(x)) - mp.mpf(x)) for x in X])

    def err(c):
        q = np.zeros_like(X)
        for v in reversed(c):
            q = q * X + v
        return np.max(np.abs((X * X * q - tail) / l1p))

    cs, e = lattice(cs, err, radius=1) if deg_q <= 6 else (cs, err(cs))
    return cs, float(np.log2(e))


# --- piecewise tables ----------------------------------------------------------------------------
def fit_table(f, w, deg, label, zero_at_origin=False, split_c1=False, intervals=16):
    w = mp.mpf(w)
    slack = mp.mpf(2) ** -12
    rows = []
    worst = -999
    for j in range(intervals):
        center = j * w
        lo = mp.mpf(0) if j == 0 else -w / 2 - slack
        hi = w / 2 + slack
        g = lambda u, c=center: f(c + u)
        wt = lambda u, c=center: 1 / abs(f(c + u)) if f(c + u) != 0 else mp.mpf(0)
        exact = (0, 1) if split_c1 else (0,)
        if j == 0 and zero_at_origin:
            ks = list(range(1, deg + 1))
            fixed = fit_rounded(g, ks, wt, hi * mp.mpf(10) ** -6, hi, keep_exact=exact[1:])
            fixed[0] = mp.mpf(0)
        else:
            fixed = fit_rounded(g, list(range(deg + 1)), wt, lo, hi, keep_exact=exact)
        c0_hi = f32(fixed[0])
        c0_lo = f32(fixed[0] - mp.mpf(c0_hi))
        c1_hi = f32(fixed[1])
        c1_lo = f32(fixed[1] - mp.mpf(c1_hi))
        stored = dict(fixed)
        stored[0] = mp.mpf(c0_hi) + mp.mpf(c0_lo)
        stored[1] = mp.mpf(c1_hi) + (mp.mpf(c1_lo) if split_c1 else 0)
        e = max_rel_err(g, stored, lo if j else hi * mp.mpf(10) ** -6, hi)
        worst = max(worst, e)
        rows.append([c0_hi, c0_lo] + [f32(fixed[k]) for k in range(1, deg + 1)] + ([c1_lo] if split_c1 else []))
        print(f"// {label} interval {j}: log2 rel err {e:.2f}", file=sys.stderr)
    return rows, worst


def print_table(name, rows, worst, comment, split_c1=False):
    print(f"// {comment}; worst interval: relative error 2^{worst:.1f}")
    macro = "FUSE_MATH_TABLE" if len(rows) == 16 else "FUSE_MATH_TABLE_N"
    width = "" if len(rows) == 16 else f" {len(rows)},"
    print(f"{macro}({name}, {len(rows[0])},{width}")
    print("  {")
    for k in range(len(rows[0])):
        label = "c0_hi" if k == 0 else "c0_lo" if k == 1 else f"c{k - 1}"
        if split_c1 and k == len(rows[0]) - 1:
            label = "c1_lo"
        print("   {" + ", ".join(hexf(r[k]) for r in rows) + "},  // " + label)
    print("  })")


# --- fast tanh, erf: x P(x^2) / Q(x^2) on [0, c] (Lawson-weighted linearized least squares) -------
def fit_rational_odd(f, np_, nq, c, iters=400):
    xs = np.concatenate([np.linspace(1e-4, c, 6000), c * (1 - np.cos(np.linspace(0, np.pi / 2, 2000)))])
    xs = np.unique(xs)
    xs = xs[xs > 1e-5]
    fv = np.array([float(f(mp.mpf(x))) for x in xs])
    z = xs * xs
    A1 = np.stack([xs * z ** i for i in range(np_)], 1)
    A2 = np.stack([z ** i for i in range(1, nq)], 1)
    wgt = np.ones_like(xs)
    Qprev = np.ones_like(xs)
    best = None
    for _ in range(iters):
        M = np.concatenate([A1, -fv[:, None] * A2], 1) / (fv * Qprev)[:, None]
        rhs = fv / (fv * Qprev)
        sw = np.sqrt(wgt)
        sol, *_ = np.linalg.lstsq(M * sw[:, None], rhs * sw, rcond=None)
        p = sol[:np_]
        q = np.concatenate([[1.0], sol[np_:]])
        P = A1 @ p
        Q = np.stack([z ** i for i in range(nq)], 1) @ q
        err = (P / Q - fv) / fv
        mx = np.max(np.abs(err))
        if best is None or mx < best[0]:
            best = (mx, p.copy(), q.copy())
        wgt = wgt * (np.abs(err) + 1e-3 * mx)
        wgt /= wgt.sum()
        Qprev = np.abs(Q)
    return best


def main(parts):
    if "poly" in parts:
        cs, e = fit_exp(4)
        print(f"// exp.hpp: Q(r) (degree 4), relative error of e^r - 1: 2^{e:.1f}")
        print("  " + ", ".join(hexf(v) for v in cs))
        cs, e = fit_exp(3)
        print(f"// exp.hpp (fast sigmoid): Q(r) (degree 3), relative error of e^r - 1: 2^{e:.1f}")
        print("  " + ", ".join(hexf(v) for v in cs))
        cs, e = fit_log(8)
        print(f"// log.hpp: Q(f) (degree 8), relative error of log1p(f): 2^{e:.1f}")
        print("  " + ", ".join(hexf(v) for v in cs))
        sys.stdout.flush()
    if "tanh" in parts:
        rows, worst = fit_table(mp.tanh, "0.625", 7, "tanh", zero_at_origin=True)
        print_table("tanh_table", rows, worst, "tanh.hpp: tanh(j*0.625 + u), |u| <= 0.3125")
        sys.stdout.flush()
    if "erf" in parts:
        rows, worst = fit_table(mp.erf, mp.mpf(65) / 256, 6, "erf", zero_at_origin=True, split_c1=True)
        print_table("erf_table", rows, worst, "erf.hpp: erf(j*65/256 + u), |u| <= 65/512", split_c1=True)
        sys.stdout.flush()
    if "erf8" in parts:
        rows, worst = fit_table(mp.erf, mp.mpf(17) / 32, 9, "erf8", zero_at_origin=True, split_c1=True, intervals=8)
        print_table("erf8_table", rows, worst, "erf.hpp, AVX2 and SSE builds: erf(j*17/32 + u), |u| <= 17/64",
                    split_c1=True)
        sys.stdout.flush()
    if "erfc" in parts:
        rows, worst = fit_table(lambda x: mp.erfc(x) * mp.exp(x * x), mp.mpf(21) / 32, 8, "erfcx")
        print_table("erfcx_table", rows, worst, "erf.hpp: erfc(x) e^(x^2) at x = j*21/32 + u, |u| <= 21/64")
        sys.stdout.flush()
    if "fast_tanh" in parts:
        mx, p, q = fit_rational_odd(mp.tanh, 5, 5, 9.1)
        print(f"// tanh.hpp (fast): x P(x^2)/Q(x^2) on [0, 9.1], relative error 2^{np.log2(mx):.1f}")
        print("  P: " + ", ".join(hexf(v) for v in p))
        print("  Q: " + ", ".join(hexf(v) for v in q))
    if "explore_fast_erf" in parts:  # not in the default run: shows why fast erf is the accurate one
        for (a, b) in ((4, 4), (5, 4), (4, 5), (5, 5)):
            mx, p, q = fit_rational_odd(mp.erf, a, b, 3.93)
            print(f"// erf.hpp (fast): x P(x^2)/Q(x^2), degrees {a - 1}/{b - 1} in x^2, on [0, 3.93], "
                  f"relative error 2^{np.log2(mx):.1f}")
            print("  P: " + ", ".join(hexf(v) for v in p))
            print("  Q: " + ", ".join(hexf(v) for v in q))


ALL_PARTS = ("poly", "tanh", "erf", "erf8", "erfc", "fast_tanh")

if __name__ == "__main__":
    # Optional arguments pick parts (see ALL_PARTS, and explore_fast_erf); default: ALL_PARTS.
    main(sys.argv[1:] or ALL_PARTS)
