#!/usr/bin/env python3
"""Generate tests/stats-reference.json, the expected values for src/stats.rs.

Point statistics come from Python's `statistics` module (exact rational
arithmetic) and are cross-checked with numpy; quantile interpolation comes
from numpy.percentile (method "linear"). None of it shares code with the Rust
implementation, which is the point.

Intervals come from scipy's binomial and Student-t distributions, scipy's exact
Mann-Whitney test and a brute-force enumeration of the U distribution.

Usage (numpy and scipy are only needed here, never at test time):
    python3 -m venv .venv && .venv/bin/pip install numpy scipy
    .venv/bin/python tests/gen_reference.py > tests/stats-reference.json
"""

import itertools
import json
import math
import statistics
import sys
from collections import Counter

import numpy as np
from scipy.stats import binom, mannwhitneyu
from scipy.stats import t as t_dist

# Seed 000 ("Is that SSD Really Helping Your Build Times?", 2014): real build
# times in seconds, averages of three runs (GCC: one run).
BUILD_TIMES = {
    "spring": {"unencrypted_ssd": 273, "encrypted_ssd": 303, "usb_hdd": 304},
    "scala": {"unencrypted_ssd": 471, "encrypted_ssd": 491, "usb_hdd": 477},
    "gcc": {"unencrypted_ssd": 6355, "encrypted_ssd": 6558, "usb_hdd": 6462},
}
# Each published time is spread into five repetitions, in this run order.
SPREAD = [1.00, 0.97, 1.02, 0.99, 1.03]

CONFIDENCE = 0.95


def spread(x):
    return [x * f for f in SPREAD]


def mad(xs):
    m = statistics.median(xs)
    return statistics.median([abs(x - m) for x in xs])


def summary(xs):
    n = len(xs)
    mean = statistics.mean(xs)
    sd = statistics.stdev(xs) if n >= 2 else 0.0
    out = {
        "n": n,
        "min": min(xs),
        "max": max(xs),
        "median": statistics.median(xs),
        "mean": mean,
        "stddev": sd,
        "cv": sd / mean if mean != 0 else 0.0,
        "mad": mad(xs),
    }
    # Cross-check with numpy (floating point, so only approximately).
    a = np.array(xs, dtype=float)
    assert np.isclose(np.median(a), out["median"], rtol=1e-12)
    assert np.isclose(np.mean(a), out["mean"], rtol=1e-12)
    if n >= 2:
        assert np.isclose(np.std(a, ddof=1), out["stddev"], rtol=1e-9, atol=1e-12)
    out = {k: float(v) if k != "n" else v for k, v in out.items()}
    _, out["median_ci"], out["median_ci_level"] = median_ci(xs)
    out["mean_ci_student_t"] = mean_ci_t(xs)
    return out


# --- intervals (see stats.rs) ------------------------------------------------
#
# Computed with scipy's distributions and brute-force enumeration, sharing no code
# with the Rust implementation.


def median_ci(xs):
    """Order-statistic interval of the median: the largest k whose coverage
    1 - 2 * P(Bin(n, 1/2) <= k - 1) is >= 95%, else k = 1 with its coverage."""
    n = len(xs)
    if n < 3:
        return None, None, None
    s = sorted(xs)
    best = (1, 1 - 2 * binom.cdf(0, n, 0.5))
    for k in range(2, (n + 1) // 2 + 1):
        level = 1 - 2 * binom.cdf(k - 1, n, 0.5)
        if level < CONFIDENCE:
            break
        best = (k, level)
    k, level = best
    return k, [s[k - 1], s[n - k]], float(level)


def mean_ci_t(xs):
    n = len(xs)
    if n < 3:
        return None
    m = statistics.mean(xs)
    half = t_dist.ppf(0.975, n - 1) * statistics.stdev(xs) / math.sqrt(n)
    return [float(m - half), float(m + half)]


def u_null_counts(m, n):
    """Counts of the Mann-Whitney U under H0 by enumerating every way the m + n
    ranks can be split (small groups only)."""
    counts = Counter()
    for first in itertools.combinations(range(m + n), m):
        # U of the second group: pairs where its rank is above a first-group rank.
        chosen = set(first)
        u = sum(1 for r in range(m + n) if r not in chosen for f in first if r > f)
        counts[u] += 1
    return counts, math.comb(m + n, m)


def compare(base, cand):
    m, n = len(base), len(cand)
    diffs = sorted(math.log(c) - math.log(b) for c in cand for b in base)
    shift = float(np.median(diffs))
    out = {
        "ratio": math.exp(shift),
        "penalty_pct": math.expm1(shift) * 100.0,
        "p_value": float(
            mannwhitneyu(cand, base, alternative="two-sided", method="exact").pvalue
        ),
    }
    if m >= 3 and n >= 3:
        counts, total = u_null_counts(m, n)

        def cdf(u):
            return sum(c for v, c in counts.items() if v <= u) / total

        best = (1, 1 - 2 * cdf(0))
        for k in range(2, (m * n + 1) // 2 + 1):
            level = 1 - 2 * cdf(k - 1)
            if level < CONFIDENCE:
                break
            best = (k, level)
        k, level = best
        out["ci_pct"] = [
            math.expm1(diffs[k - 1]) * 100.0,
            math.expm1(diffs[m * n - k]) * 100.0,
        ]
        out["ci_level"] = level
    return out


def holm(ps):
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        adjusted[i] = running
    return adjusted


# --- datasets ----------------------------------------------------------------


def datasets():
    ds = {}
    for project, cells in BUILD_TIMES.items():
        for cell, t in cells.items():
            ds[f"{project}_{cell}"] = spread(t)
    # Right-skewed latencies (ms), fixed once with numpy's generator.
    rng = np.random.default_rng(20140602)
    ds["skewed_lognormal_25"] = [
        round(float(v), 6) for v in rng.lognormal(mean=0.0, sigma=0.8, size=25)
    ]
    ds["skewed_tail_8"] = [1.1, 1.0, 1.2, 0.9, 1.05, 1.15, 9.5, 1.0]
    ds["n2"] = [10.0, 14.0]
    ds["n1"] = [42.5]
    ds["equal_6"] = [5.0] * 6
    ds["zero_mean"] = [-2.0, 1.0, 1.0]
    ds["even_n4"] = [3.0, 1.0, 4.0, 1.5]
    return ds


def flagged(xs, med, scores, thr):
    """A large robust score and at least 10% from the median."""
    return [
        i
        for i, s in enumerate(scores)
        if abs(s) > thr and abs(xs[i] - med) >= 0.10 * abs(med)
    ]


def fleet_cases():
    # Per-agent p50 latency (ms): one agent at 10 ms among 0.2-1 ms.
    slow = [0.21, 0.35, 0.48, 0.52, 0.6, 0.73, 0.81, 0.95, 1.0, 10.0, 0.44, 0.66]
    similar = [0.5, 0.55, 0.47, 0.52, 0.6, 0.49, 0.58, 0.51]
    out = []
    # Three steady runs, the third 2.7% (or 3%) slower: a huge score, no outlier.
    steady_3 = [1.9051, 1.9049, 1.957]
    steady_ms = [11.40, 11.41, 11.80]
    cases = [
        ("one_slow_agent", slow, 3.5),
        ("similar", similar, 3.5),
        ("steady_3_seconds", steady_3, 3.5),
        ("steady_3_ms", steady_ms, 3.5),
    ]
    for name, xs, thr in cases:
        med = statistics.median(xs)
        m = mad(xs)
        scores = [0.6745 * (x - med) / m for x in xs]
        out.append(
            {
                "name": name,
                "values": xs,
                "threshold": thr,
                "scores": scores,
                "flagged": flagged(xs, med, scores, thr),
                "times_median": [x / med for x in xs],
            }
        )
    # MAD == 0: fall back to the mean absolute deviation around the median.
    flat = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 7.0]
    med = statistics.median(flat)
    assert mad(flat) == 0
    mean_ad = statistics.mean([abs(x - med) for x in flat])
    scores = [(x - med) / (1.253314 * mean_ad) for x in flat]
    out.append(
        {
            "name": "mad_zero_fallback",
            "values": flat,
            "threshold": 3.5,
            "scores": scores,
            "flagged": flagged(flat, med, scores, 3.5),
            "times_median": [x / med for x in flat],
        }
    )
    return out


def main():
    ds = datasets()
    summaries = [{"name": k, "values": v, "expected": summary(v)} for k, v in ds.items()]

    comparisons = []
    for project in BUILD_TIMES:
        base = ds[f"{project}_unencrypted_ssd"]
        for cand in ["encrypted_ssd", "usb_hdd"]:
            c = ds[f"{project}_{cand}"]
            comparisons.append(
                {
                    "name": f"{project}_{cand}_vs_unencrypted_ssd",
                    "baseline": base,
                    "candidate": c,
                    **compare(base, c),
                }
            )
    # Other group sizes, fixed once with numpy's generator (log-normal, 8% spread).
    rng = np.random.default_rng(9)
    for m, n, factor in [(3, 3, 1.2), (3, 4, 1.0), (6, 6, 1.05), (8, 10, 0.9)]:
        base = [round(float(v), 6) for v in 100 * rng.lognormal(0.0, 0.08, size=m)]
        cand = [round(float(v), 6) for v in 100 * factor * rng.lognormal(0.0, 0.08, size=n)]
        comparisons.append(
            {"name": f"lognormal_{m}_vs_{n}_x{factor}", "baseline": base, "candidate": cand, **compare(base, cand)}
        )

    ps = [0.001, 0.04, 0.03, 0.2, 0.01, 0.04]
    levels = []
    for n in range(3, 41):
        k, _, level = median_ci(list(range(n)))
        levels.append({"n": n, "k": k, "level": level})

    json.dump(
        {
            "generator": "tests/gen_reference.py",
            "summaries": summaries,
            "median_ci_ranks": levels,
            "comparisons": comparisons,
            "holm": {"p": ps, "adjusted": holm(ps)},
            "fleet_outliers": fleet_cases(),
        },
        sys.stdout,
        indent=1,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
