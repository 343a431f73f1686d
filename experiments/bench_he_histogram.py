"""Benchmark (b): one node's encrypted histogram, BFV coefficient packing vs plaintext numpy.

The job of a passive party at the root of a SecureBoost tree: per-bin sums of gradients
and hessians over ``n`` instances for ``F`` features of ``K`` bins.  Three phases on one
core, as the protocol runs them:

* active party: pack (g, h) into fixed point, encrypt node-compact blocks, serialise;
* passive party: load, build the mask polynomials, plaintext products, sum, overwrite
  non-target coefficients with noise, serialise;
* active party: load, decrypt, read the target coefficients, unpack.

The floor is ``numpy.bincount`` of g and h per feature (what a plaintext GBDT does).  Sums
are checked exact against the integer fixed-point sums.  Reported: seconds per phase
(median of ``--repeats``), operation counts, bytes each way, and the ratio to plaintext.

Run ``python experiments/bench_he_histogram.py`` (10,000 x 10 x 32 and 30,000 x 10 x 32,
3 repeats) or ``--quick`` (one repeat of the first); JSON goes to
``results/bench_he_histogram.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from raytune_fed.crypto import GHCodec, Layout, load_public_context, secret_context

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)

SIZES = ((10_000, 10, 32), (30_000, 10, 32))


def _plain_seconds(bins: np.ndarray, g: np.ndarray, h: np.ndarray, n_bins: int, repeats: int = 20) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for f in range(bins.shape[1]):
            np.bincount(bins[:, f], weights=g, minlength=n_bins)
            np.bincount(bins[:, f], weights=h, minlength=n_bins)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run_size(n: int, n_features: int, n_bins: int, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    bins = rng.integers(0, n_bins, (n, n_features))
    g, h = rng.uniform(-1, 1, n), rng.uniform(0, 0.25, n)
    ids = bins + np.arange(n_features) * n_bins
    codec = GHCodec.for_rows(n)
    gq, hq = codec.quantise(g, h)
    layout = Layout.for_node(n, n_features * n_bins)
    active = secret_context("bfv")
    passive = load_public_context(active.public_context())
    phases: dict[str, list[float]] = {"encrypt": [], "histogram": [], "decrypt": []}
    exact = True
    for r in range(repeats):
        t0 = time.perf_counter()
        ct = active.encrypt(codec.pack(gq, hq), layout)
        t1 = time.perf_counter()
        out = passive.histogram(ct, ids, layout, rng)
        t2 = time.perf_counter()
        sums = active.decrypt_sums(out, layout)
        t3 = time.perf_counter()
        got_g, got_h = codec.unpack_sums(sums)
        want_g = np.bincount(ids.ravel(), weights=np.repeat(gq, n_features), minlength=layout.n_masks)
        exact &= bool(np.array_equal(got_g, want_g.astype(np.int64)))
        for name, seconds in zip(phases, (t1 - t0, t2 - t1, t3 - t2)):
            phases[name].append(seconds)
    per = {k: statistics.median(v) for k, v in phases.items()}
    total = sum(per.values())
    plain = _plain_seconds(bins, g, h, n_bins)
    err = np.abs(got_g / codec.scale - np.bincount(ids.ravel(), weights=np.repeat(g, n_features),
                                                   minlength=layout.n_masks)).max()
    counts = {k: v // repeats for k, v in {**active.counts.as_dict(), **{
        k2: v2 for k2, v2 in passive.counts.as_dict().items() if v2}}.items()}
    return {"rows": n, "features": n_features, "bins": n_bins, "block": layout.block,
            "fraction_bits": codec.fraction_bits, "seconds": per, "seconds_total": total,
            "plaintext_seconds": plain, "ratio_to_plaintext": total / plain, "exact_integer_sums": exact,
            "max_abs_error_vs_float_sums": float(err), "op_counts_per_node": counts,
            "bytes_active_to_passive": ct.size, "bytes_passive_to_active": out.size,
            "public_context_bytes": len(active.public_context())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="results/bench_he_histogram.json")
    args = parser.parse_args()
    with Benchmark("bench_he_histogram", args.out) as bench:
        sizes = SIZES[:1] if args.quick else SIZES
        repeats = 1 if args.quick else args.repeats
        rows = [run_size(n, f, k, repeats) for n, f, k in sizes]
        for r in rows:
            print(f"{r['rows']:>6} x {r['features']} x {r['bins']}: BFV {r['seconds_total']:.3f} s "
                  f"(enc {r['seconds']['encrypt']:.3f}, hist {r['seconds']['histogram']:.3f}, "
                  f"dec {r['seconds']['decrypt']:.3f}) vs numpy {r['plaintext_seconds'] * 1e3:.2f} ms "
                  f"= x{r['ratio_to_plaintext']:.0f}; exact {r['exact_integer_sums']}")
        out = {"benchmark": "he_histogram",     "repeats": repeats,
               "notes": "one core; median of repeats; the CMOSB paper does not time histograms (its Paillier "
                        "constants are per operation)",
               "results": rows}
        bench.figures.update(out)
        bench.headline.update({f"bfv_seconds_{r['rows']}x{r['features']}x{r['bins']}": round(r["seconds_total"], 3)
                               for r in rows})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
