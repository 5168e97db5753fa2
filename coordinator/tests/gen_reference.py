#!/usr/bin/env python3
"""Generate tests/stats-reference.json, the expected values for src/stats.rs.

Point statistics come from Python's `statistics` module (exact rational
arithmetic) and are cross-checked with numpy; quantile interpolation comes
from numpy.percentile (method "linear"). None of it shares code with the Rust
implementation, which is the point.

The one exception is `bootstrap_golden`: it re-implements the RNG contract
documented in stats.rs (splitmix64-seeded xoshiro256**, index = (r * n) >> 64)
so that a seed keeps giving the same intervals forever. If those values ever
change, the contract was broken, not the reference.

Usage (numpy is only needed here, never at test time):
    python3 -m venv .venv && .venv/bin/pip install numpy
    .venv/bin/python tests/gen_reference.py > tests/stats-reference.json
"""

import json
import statistics
import sys

import numpy as np

# Seed 000 ("Is that SSD Really Helping Your Build Times?", 2014): real build
# times in seconds, averages of three runs (GCC: one run).
BUILD_TIMES = {
    "spring": {"unencrypted_ssd": 273, "encrypted_ssd": 303, "usb_hdd": 304},
    "scala": {"unencrypted_ssd": 471, "encrypted_ssd": 491, "usb_hdd": 477},
    "gcc": {"unencrypted_ssd": 6355, "encrypted_ssd": 6558, "usb_hdd": 6462},
}
# Each published time is spread into five repetitions, in this run order.
SPREAD = [1.00, 0.97, 1.02, 0.99, 1.03]

B = 10_000
MASK = (1 << 64) - 1


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
    return {k: float(v) if k != "n" else v for k, v in out.items()}


# --- RNG contract (see stats.rs) -------------------------------------------


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & MASK


class Xoshiro256StarStar:
    def __init__(self, seed):
        self.s = []
        st = seed
        for _ in range(4):
            st, z = splitmix64(st)
            self.s.append(z)

    def next_u64(self):
        s = self.s
        result = (rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def below(self, n):
        return (self.next_u64() * n) >> 64


def ci(stats_):
    lo, hi = np.percentile(np.array(stats_), [2.5, 97.5], method="linear")
    return [float(lo), float(hi)]


def bootstrap_summary(xs, seed):
    rng = Xoshiro256StarStar(seed)
    n = len(xs)
    medians, means = [], []
    for _ in range(B):
        r = [xs[rng.below(n)] for _ in range(n)]
        medians.append(statistics.median(r))
        s = 0.0
        for x in r:  # same summation order as the Rust code
            s += x
        means.append(s / n)
    return {"median_ci": ci(medians), "mean_ci": ci(means)}


def bootstrap_compare(base, cand, seed):
    rng = Xoshiro256StarStar(seed)
    nb, nc = len(base), len(cand)
    pens = []
    for _ in range(B):
        rb = [base[rng.below(nb)] for _ in range(nb)]
        rc = [cand[rng.below(nc)] for _ in range(nc)]
        pens.append((statistics.median(rc) / statistics.median(rb) - 1.0) * 100.0)
    return ci(pens)


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


def fleet_cases():
    # Per-agent p50 latency (ms): one agent at 10 ms among 0.2-1 ms.
    slow = [0.21, 0.35, 0.48, 0.52, 0.6, 0.73, 0.81, 0.95, 1.0, 10.0, 0.44, 0.66]
    similar = [0.5, 0.55, 0.47, 0.52, 0.6, 0.49, 0.58, 0.51]
    out = []
    for name, xs, thr in [("one_slow_agent", slow, 3.5), ("similar", similar, 3.5)]:
        med = statistics.median(xs)
        m = mad(xs)
        scores = [0.6745 * (x - med) / m for x in xs]
        out.append(
            {
                "name": name,
                "values": xs,
                "threshold": thr,
                "scores": scores,
                "flagged": [i for i, s in enumerate(scores) if abs(s) > thr],
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
            "flagged": [i for i, s in enumerate(scores) if abs(s) > 3.5],
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
            ratio = statistics.median(c) / statistics.median(base)
            comparisons.append(
                {
                    "name": f"{project}_{cand}_vs_unencrypted_ssd",
                    "baseline": base,
                    "candidate": c,
                    "ratio": ratio,
                    "penalty_pct": (ratio - 1.0) * 100.0,
                }
            )

    qs = [0.0, 0.025, 0.1, 0.5, 0.9, 0.975, 1.0]
    quantiles = []
    for name in ["skewed_lognormal_25", "even_n4", "spring_usb_hdd", "n1"]:
        xs = sorted(ds[name])
        quantiles.append(
            {
                "name": name,
                "sorted": xs,
                "qs": qs,
                "expected": [
                    float(v) for v in np.percentile(np.array(xs), [q * 100 for q in qs])
                ],
            }
        )

    golden = {
        "summary": [
            {"name": name, "seed": seed, "values": ds[name], **bootstrap_summary(ds[name], seed)}
            for name, seed in [("spring_encrypted_ssd", 0), ("skewed_lognormal_25", 7)]
        ],
        "compare": [
            {
                "name": "spring_encrypted_ssd_vs_unencrypted_ssd",
                "seed": 0,
                "baseline": ds["spring_unencrypted_ssd"],
                "candidate": ds["spring_encrypted_ssd"],
                "ci_pct": bootstrap_compare(
                    ds["spring_unencrypted_ssd"], ds["spring_encrypted_ssd"], 0
                ),
            }
        ],
    }
    rng = Xoshiro256StarStar(0)
    golden["rng_seed0_first4"] = [str(rng.next_u64()) for _ in range(4)]

    json.dump(
        {
            "generator": "tests/gen_reference.py",
            "bootstrap_resamples": B,
            "summaries": summaries,
            "comparisons": comparisons,
            "fleet_outliers": fleet_cases(),
            "quantiles": quantiles,
            "bootstrap_golden": golden,
        },
        sys.stdout,
        indent=1,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
