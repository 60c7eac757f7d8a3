#!/usr/bin/env python3
"""Fits the reference-point tables of fuse/math and the exp 2^(j/16) reduction; prints C++.

    pip install mpmath numpy
    python3 tools/fit_math_tables.py exp        # exp.hpp: exp2_16_table, exp16_q0/q1   (seconds)
    python3 tools/fit_math_tables.py tanh       # tanh.hpp: tanh_table                   (~1 min)
    python3 tools/fit_math_tables.py sigmoid_signed  # sigmoid.hpp: sigmoid_signed_table (AVX-512
                                                #   and CUDA) (~30 s)

The output is what include/fuse/math/*.hpp hold (FUSE_MATH_TABLE rows). The other polynomials
and the centred tables (erf, erfc) come from tools/fit_math.py, whose
Remez exchange and float rounding this script reuses.

Reference-point tables. A function f on [0, T] is cut into intervals; interval j holds a
polynomial p_j(u) ~ f(t_j + u) with u = a - t_j, stored as rows t, c0, c1, ..., cd of a
[rows][16] table (one vpermps per row on AVX-512). Each t_j is a float near the interval's
centre, searched outward from it, one float at a time, until f(t_j) lies within 2^-11 of an ulp
of a float (for sigmoid also f'(t_j) within 2^-5): then c0 = RN(f(t_j)) is f(t_j) to about
24 + 11 bits with one float, c1 = RN(f'(t_j)) loses almost nothing, and the evaluation
c0 + u (c1 + u R(u)) (tanh) or (c0 + c1 u) + u^2 R(u) (sigmoid) rounds after an exact c0. t_j is
kept within [hi/2, 2 lo] of its interval [lo, hi], so u = a - t_j is exact (Sterbenz).

With c0 (and c1) fixed, the remaining coefficients are a minimax fit of the relative error of
(f(t_j + u) - c0)/u (or (f - c0 - c1 u)/u^2), a Haar system, rounded to float from the highest
degree down with the lower ones refitted after each rounding (tools/fit_math.py fit_rounded's
scheme). Intervals are widened by a small slack for the rounding of the index computation.
"""
import sys
import os
from multiprocessing import Pool

import mpmath as mp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fit_math as F  # noqa: E402  (remez, powers, lattice, f32, hexf)

f32 = F.f32


def first_float_at_least(xd):
    x = np.float32(xd)
    if float(x) < xd:
        x = np.nextafter(x, np.float32(np.inf))
    return x


def residual_ulps(v):
    """(RN(v) as float32, |v - RN(v)| in ulps of RN(v))."""
    r = np.float32(float(v))
    ulp = float(np.spacing(np.abs(r))) if r != 0 else 2.0 ** -149
    return r, float(abs(v - mp.mpf(float(r)))) / ulp


def reference_point(f, center, lo_ok, hi_ok, df=None, bits0=11, bits1=5, maxn=400000):
    """The float t in [lo_ok, hi_ok] nearest center (searching up and down alternately) with
    f(t) within 2^-bits0 of an ulp of a float and, when df is given, f'(t) within 2^-bits1.
    Returns (t, RN(f(t)), RN(f'(t)) or None)."""
    up = dn = np.float32(center)
    for i in range(maxn):
        for t in ((up,) if i == 0 else (up, dn)):
            if not (lo_ok <= float(t) <= hi_ok):
                continue
            tt = mp.mpf(float(t))
            c1 = None
            if df is not None:
                c1, e1 = residual_ulps(df(tt))
                if e1 > 2.0 ** -bits1:
                    continue
            c0, e0 = residual_ulps(f(tt))
            if e0 <= 2.0 ** -bits0:
                return t, c0, c1
        up = np.nextafter(up, np.float32(np.inf))
        dn = np.nextafter(dn, np.float32(-np.inf))
    raise RuntimeError(f"no reference point near {center}")


def fit_fixed_low(f, t, fixed_low, lo, hi, deg, n_grid=500):
    """Coefficients c0..cdeg of p(u) ~ f(t + u) on [lo, hi] (relative error) with c0 (and c1)
    given as floats in fixed_low: the rest is a minimax fit of (f - c0 - c1 u)/u^m, m =
    len(fixed_low), rounded to float from the highest degree down. Returns (coeffs, log2 err)."""
    t = mp.mpf(float(t))
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    m = len(fixed_low)
    low = [mp.mpf(float(c)) for c in fixed_low]
    fr = lambda u: f(t + u)
    wt = lambda u: 1 / abs(fr(u))
    ks = list(range(m, deg + 1))
    fixed = {}

    def resid(fx):
        return lambda u: (fr(u) - sum(low[k] * u ** k for k in range(m))
                          - sum(mp.mpf(v) * u ** k for k, v in fx.items())) / u ** m

    ww = lambda u: wt(u) * abs(u) ** m
    for k in sorted(ks, reverse=True):
        free = [kk for kk in ks if kk not in fixed]
        c, _ = F.remez(resid(dict(fixed)), F.powers([kk - m for kk in free]), ww, lo, hi, n_grid)
        fixed[k] = f32(dict(zip(free, c))[k])
    coeffs = [float(c) for c in fixed_low] + [fixed[k] for k in ks]
    worst = 0
    for i in range(3001):
        u = lo + (hi - lo) * i / 3000
        p = sum(mp.mpf(coeffs[k]) * u ** k for k in range(deg + 1))
        worst = max(worst, abs((p - fr(u)) * wt(u)))
    return coeffs, float(mp.log(worst, 2))


def print_table(name, comment, ts, cells, worst, macro="FUSE_MATH_TABLE"):
    """cells[j] = [c0, ..., cd]; rows t, c0, ..., cd."""
    deg = len(cells[0]) - 1
    print(f"// {comment}; worst interval: relative error 2^{worst:.1f}")
    print(f"{macro}({name}, {deg + 2},")
    print("  {")
    print("   {" + ", ".join(F.hexf(t) for t in ts) + "},  // t")
    for i in range(deg + 1):
        print("   {" + ", ".join(F.hexf(c[i]) for c in cells) + f"}},  // c{i}")
    print("  })")
    sys.stdout.flush()


# --- exp: 2^(j/16) and e^r = 1 + r + r^2 (q0 + q1 r) on |r| <= ln2/32 ---------------------------
def fit_exp():
    row = [f32(mp.mpf(2) ** (mp.mpf(j) / 16)) for j in range(16)]
    h = mp.log(2) / 32 + mp.mpf(2) ** -16
    f = lambda r: (mp.expm1(r) - r) / r ** 2 if r != 0 else mp.mpf(1) / 2
    w = lambda r: abs(r ** 2 / mp.exp(r))  # relative error of e^r
    c, _ = F.remez(f, F.powers(range(2)), w, -h, h, n_grid=400)
    R = np.linspace(-float(h), float(h), 20001)
    tail = np.array([float(mp.expm1(mp.mpf(r)) - mp.mpf(r)) for r in R])
    ex = np.exp(R)

    def err(cs):
        return np.max(np.abs((R * R * (cs[0] + cs[1] * R) - tail) / ex))

    cs, e = F.lattice([float(v) for v in c], err, radius=3)
    print(f"// exp.hpp: e^r = 1 + r + r^2 (q0 + q1 r), |r| <= ln2/32: relative error 2^{np.log2(e):.1f}")
    print(f"inline constexpr float exp16_q0 = {F.hexf(cs[0])};")
    print(f"inline constexpr float exp16_q1 = {F.hexf(cs[1])};")
    print("FUSE_MATH_TABLE(exp2_16_table, 1,")
    print("  {")
    print("   {" + ", ".join(F.hexf(v) for v in row) + "},")
    print("  })")
    sys.stdout.flush()


# --- tanh: degree 5 on the 16 intervals of |x| + 5/8 cut at its exponent and 2 mantissa bits ---
TANH_SHIFT = mp.mpf(5) / 8
TANH_BIAS_LAST = mp.mpf(2) ** -30  # the last interval reaches exactly 1 at the clamp
TANH_SLACK = mp.mpf(2) ** -20      # a + 5/8 rounds: the cut points move by an ulp of it


def tanh_clamp():
    return first_float_at_least(float(mp.atanh(1 - mp.mpf(2) ** -25)))


def tanh_cells(amax, s=TANH_SHIFT, nb=2):
    """[(slot, a_lo, a_hi)]: 2^nb cells per binade of b = a + s; slot = the low 2 exponent bits
    and nb mantissa bits of b, as the C++ takes them with one shift."""
    cells = []
    b = mp.mpf(s)
    while True:
        e = int(mp.floor(mp.log(b, 2)))
        step = mp.mpf(2) ** (e - nb)
        lo_b = mp.floor(b / step) * step
        hi_b = lo_b + step
        slot = (((e + 127) & 3) << 2) | int((lo_b / mp.mpf(2) ** e - 1) * 4)
        a_lo, a_hi = max(lo_b - s, 0), hi_b - s
        cells.append((slot, a_lo, min(a_hi, amax)))
        if a_hi >= amax:
            return cells
        b = hi_b


def _tanh_cell(args):
    slot, lo, hi, T, deg = args
    mp.mp.dps = 40
    last = hi >= T
    f = (lambda a: mp.tanh(a) + TANH_BIAS_LAST) if last else mp.tanh
    if lo == 0:
        t, c0 = np.float32(0), np.float32(0)
    else:
        t, c0, _ = reference_point(f, float((lo + hi) / 2), float(hi) / 2, 2 * float(lo))
    lo_u = (lo - mp.mpf(float(t))) - (0 if lo == 0 else TANH_SLACK)
    hi_u = (hi - mp.mpf(float(t))) + (0 if last else TANH_SLACK)
    if lo == 0:
        lo_u = max(lo_u, hi_u * mp.mpf(10) ** -6)  # tanh(u)/u near 0: relative, away from 0
    coeffs, e = fit_fixed_low(f, t, [c0], lo_u, hi_u, deg)
    return slot, float(t), coeffs, e


def fit_tanh(deg=5):
    mp.mp.dps = 50
    T = mp.mpf(float(tanh_clamp()))
    cells = tanh_cells(T)
    with Pool(2) as p:
        res = p.map(_tanh_cell, [(s, lo, hi, T, deg) for s, lo, hi in cells])
    by_slot = {slot: (t, co, e) for slot, t, co, e in res}
    ts = [by_slot[j][0] for j in range(16)]
    cs = [by_slot[j][1] for j in range(16)]
    worst = max(r[3] for r in res)
    print(f"// tanh.hpp: clamp {F.hexf(float(T))}")
    print_table("tanh_table", f"tanh.hpp: tanh(t_j + u), degree {deg}", ts, cs, worst)


# --- sigmoid, AVX-512 builds: sigmoid itself over [-8.25, 7.75), 32 intervals of width 1/2 ------
SIG_SLACK = mp.mpf(2) ** -12  # the interval index is x + shifter, rounded: cut points move a little


def sig_pos(x):
    return 1 / (1 + mp.exp(-x))


def sig_dpos(x):
    e = mp.exp(-x)
    return e / (1 + e) ** 2


def _sig_signed_cell(args):
    m, w, deg = args
    mp.mp.dps = 30
    c = m * w
    lo, hi = c - w / 2, c + w / 2
    if m == 0:
        t, c0, c1 = np.float32(0), np.float32(0.5), np.float32(0.25)
    else:
        # Sterbenz: t within a factor 2 of every x of the interval, on either side of 0.
        lo_ok, hi_ok = (float(hi) / 2, 2 * float(lo)) if m > 0 else (2 * float(hi), float(lo) / 2)
        try:
            t, c0, c1 = reference_point(sig_pos, float(c), lo_ok, hi_ok, df=sig_dpos)
        except RuntimeError:
            t, c0, c1 = reference_point(sig_pos, float(c), lo_ok, hi_ok, df=sig_dpos, bits1=4,
                                        maxn=2000000)
    mp.mp.dps = 40
    tt = mp.mpf(float(t))
    coeffs, e = fit_fixed_low(sig_pos, t, [c0, c1], lo - tt - SIG_SLACK, hi - tt + SIG_SLACK, deg)
    return m, float(t), coeffs, e


def fit_sigmoid_signed(w="0.5", deg=5):
    """Interval m (-16..15) is row m mod 32: x + 1.5*2^22 leaves round(2x) in the low bits."""
    mp.mp.dps = 50
    with Pool(2) as p:
        res = p.map(_sig_signed_cell, [(m, mp.mpf(w), deg) for m in range(-16, 16)])
    res = sorted(res, key=lambda r: r[0] % 32)
    worst = max(r[3] for r in res)
    print_table("sigmoid_signed_table", f"sigmoid.hpp: sigmoid(t_m + u), 32 intervals of width {w}, "
                f"degree {deg}, row m mod 32", [r[1] for r in res], [r[2] for r in res], worst,
                "FUSE_MATH_TABLE32")


PARTS = {
    "exp": fit_exp,
    "tanh": fit_tanh,
    "sigmoid_signed": fit_sigmoid_signed,
}

if __name__ == "__main__":
    parts = sys.argv[1:] or ["exp", "tanh", "sigmoid_signed"]
    for part in parts:
        if part not in PARTS:
            sys.exit(f"unknown part {part!r}; one of {', '.join(PARTS)}")
        PARTS[part]()
