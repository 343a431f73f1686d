"""Benchmark (c): a DefaultCredit-sized two-party SecureBoost training, encrypted vs the floors.

DefaultCredit (30,000 x 23), the active party holding the first 13 columns and the
labels, the passive party the last 10; ``--trees`` trees of depth 5 (learning rate 0.3,
32 bins, all rows, no subsampling).  Measured on one core:

* ``secureboost_bfv`` - our SecureBoost with TenSEAL BFV coefficient packing, parties
  in-process: wall seconds, operation counts and the eq. 5 cost from calibrated
  per-operation times;
* ``secureboost_plain`` - the same protocol without encryption (the price of the
  protocol itself);
* ``lightgbm`` - LightGBM with the same trees, depth, leaves, bins and L2 (the plaintext
  floor), one thread, with and without building its Dataset;
* ``paillier_fate`` - FATE's per-value Paillier scheme (one packed (g, h) ciphertext per
  instance per tree, one ciphertext addition per instance and passive feature for every
  computed histogram, a subtraction per bin for every derived sibling, cipher compression
  of split points into ``floor(key bits / packed bits)`` per decryption): the operations are
  counted on the very trees our run grows (a probe on the passive party records every
  histogram query), the seconds per operation are measured with python-paillier (``phe``,
  with gmpy2) on a sample, and the total is their product.  One FATE-style root histogram
  on ``--paillier-sample`` rows is also run end to end to check the extrapolation.

``phe`` and ``gmpy2`` come from the ``bench`` extra (``pip install -e '.[bench]'``); without
them the Paillier part is skipped and says so.  Run
``python experiments/bench_he_training.py`` (5 trees) or ``--quick`` (6,000 rows, 2 trees,
depth 3); JSON goes to ``results/bench_he_training.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from raytune_fed.crypto import calibrate
from raytune_fed.data import load_dataset
from raytune_fed.models.secureboost import PassiveWorker, SecureBoostClassifier

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)

N_ACTIVE = 13
N_BINS = 32


class _Probe:
    """A real passive worker that also records the size of every histogram query."""

    def __init__(self, worker: PassiveWorker) -> None:
        self.worker, self.direct_rows, self.derived = worker, [], 0

    def __getattr__(self, name):
        return getattr(self.worker, name)

    def histograms(self, queries):
        for q in queries:
            if q.direct:
                self.direct_rows.append(int(q.rows.size))
            else:
                self.derived += 1
        return self.worker.histograms(queries)


def _secureboost(X, y, he: str, trees: int, depth: int, times) -> tuple[dict, _Probe]:
    probe = _Probe(PassiveWorker(X[:, N_ACTIVE:]))
    model = SecureBoostClassifier(n_federated_trees=trees, max_depth=depth, learning_rate=0.3, n_bins=N_BINS,
                                  he=he, op_times=times)
    t0 = time.perf_counter()
    model.fit(X[:, :N_ACTIVE], y, passive=[probe], rows=np.arange(len(y)))
    wall = time.perf_counter() - t0
    return {"wall_seconds": wall, "op_counts": model.op_counts_, "eq5_cost_seconds": model.training_cost_,
            "n_passive_splits": int(sum((t.owner > 0).sum() for t in model.trees_)),
            "n_leaves": int(sum(t.n_leaves for t in model.trees_))}, probe


def _lightgbm(X, y, trees: int, depth: int) -> dict:
    import lightgbm as lgb

    params = {"objective": "binary", "num_leaves": 2 ** depth, "max_depth": depth, "learning_rate": 0.3,
              "max_bin": N_BINS, "lambda_l2": 0.1, "min_data_in_leaf": 1, "min_sum_hessian_in_leaf": 1e-3,
              "num_threads": 1, "verbose": -1, "deterministic": True}
    t0 = time.perf_counter()
    data = lgb.Dataset(X, y, params={"max_bin": N_BINS, "verbose": -1, "min_data_in_leaf": 1,
                                     "feature_pre_filter": False}).construct()
    t1 = time.perf_counter()
    lgb.train(params, data, num_boost_round=trees)
    t2 = time.perf_counter()
    return {"train_seconds": t2 - t1, "with_binning_seconds": t2 - t0}


def _paillier_per_op(key_bits: int, n_enc: int = 200, n_add: int = 5000, n_dec: int = 50) -> dict:
    from phe import paillier

    pub, priv = paillier.generate_paillier_keypair(n_length=key_bits)
    rng = np.random.default_rng(0)
    packed = [int(v) for v in rng.integers(0, 2 ** 62, n_enc)]  # a FATE-style packed (g, h) integer
    packed = [(v << 75) | v for v in packed]                     # ~137 bits, as at 30,000 rows
    t0 = time.perf_counter()
    cts = [pub.raw_encrypt(v) for v in packed]
    t1 = time.perf_counter()
    nsq = pub.nsquare
    acc = cts[0]
    for i in range(n_add):
        acc = acc * cts[i % n_enc] % nsq
    t2 = time.perf_counter()
    for c in cts[:n_dec]:
        priv.raw_decrypt(c)
    t3 = time.perf_counter()
    try:
        import gmpy2  # noqa: F401
        fast = True
    except ImportError:
        fast = False
    return {"key_bits": key_bits, "gmpy2": fast, "encryption": (t1 - t0) / n_enc, "addition": (t2 - t1) / n_add,
            "decryption": (t3 - t2) / n_dec}


def _fate_counts(probe: _Probe, n_rows: int, trees: int, n_passive: int, key_bits: int) -> dict:
    packed_bits = 2 * math.ceil(math.log2(2 * n_rows * 2 ** 52)) + 2  # FATE: 2**52 fixed point, g and h fields
    per_ct = max(1, (key_bits - 2) // packed_bits)
    split_points = n_passive * (N_BINS - 1)
    nodes = len(probe.direct_rows) + probe.derived
    return {"encryptions": n_rows * trees,
            "additions": sum(probe.direct_rows) * n_passive + probe.derived * n_passive * N_BINS,
            "decryptions": nodes * math.ceil(split_points / per_ct), "split_points_per_ciphertext": per_ct}


def _paillier_sample_node(n: int, n_features: int) -> dict:
    """A FATE-style root histogram on ``n`` rows: encrypt, add per bin, compress, decrypt (1024 bits)."""
    from phe import paillier

    pub, priv = paillier.generate_paillier_keypair(n_length=1024)
    rng = np.random.default_rng(1)
    values = [(int(a) << 75) | int(b) for a, b in zip(rng.integers(0, 2 ** 60, n), rng.integers(0, 2 ** 60, n))]
    bins = rng.integers(0, N_BINS, (n, n_features))
    nsq = pub.nsquare
    t0 = time.perf_counter()
    cts = [pub.raw_encrypt(v) for v in values]
    t1 = time.perf_counter()
    hist = [[1] * N_BINS for _ in range(n_features)]
    for i in range(n):
        for f in range(n_features):
            b = bins[i, f]
            hist[f][b] = hist[f][b] * cts[i] % nsq
    t2 = time.perf_counter()
    flat = [c for row in hist for c in row]
    for c in flat[:: 7]:                    # ~7 compressed split points per 1024-bit ciphertext
        priv.raw_decrypt(c)
    t3 = time.perf_counter()
    return {"rows": n, "features": n_features, "encrypt_seconds": t1 - t0, "histogram_seconds": t2 - t1,
            "decrypt_seconds": t3 - t2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--trees", type=int, default=5)
    parser.add_argument("--depth", type=int, default=5)
    parser.add_argument("--paillier-sample", type=int, default=2000)
    parser.add_argument("--out", default="results/bench_he_training.json")
    args = parser.parse_args()
    with Benchmark("bench_he_training", args.out) as bench:
        ds = load_dataset("default_credit")
        X, y = np.asarray(ds.X), np.asarray(ds.y)
        trees, depth, sample = args.trees, args.depth, args.paillier_sample
        if args.quick:
            X, y, trees, depth, sample = X[:6000], y[:6000], 2, 3, 500
        times = calibrate()
        bfv, probe = _secureboost(X, y, "bfv", trees, depth, times)
        plain, _ = _secureboost(X, y, "plain", trees, depth, times)
        out = {"rows": int(len(y)), "active_features": N_ACTIVE, "passive_features": int(X.shape[1] - N_ACTIVE),
               "trees": trees, "depth": depth, "bins": N_BINS, "op_times": times.as_dict(),
               "secureboost_bfv": bfv, "secureboost_plain": plain, "lightgbm": _lightgbm(X, y, trees, depth),
               "passive_queries": {"direct": len(probe.direct_rows), "derived": probe.derived,
                                   "direct_rows": int(sum(probe.direct_rows))}}
        try:
            per_op = [_paillier_per_op(bits) for bits in (1024, 2048)]
        except ImportError:
            out["paillier_fate"] = {"skipped": "install the bench extra: pip install -e '.[bench]' (phe, gmpy2)"}
        else:
            rows = []
            for p in per_op:
                counts = _fate_counts(probe, len(y), trees, X.shape[1] - N_ACTIVE, p["key_bits"])
                seconds = (counts["encryptions"] * p["encryption"] + counts["additions"] * p["addition"]
                           + counts["decryptions"] * p["decryption"])
                rows.append({"per_op_seconds": p, "op_counts": counts, "extrapolated_seconds": seconds})
            node = _paillier_sample_node(sample, X.shape[1] - N_ACTIVE)
            p = per_op[0]
            node["extrapolated_seconds"] = (sample * p["encryption"] + sample * node["features"] * p["addition"]
                                            + math.ceil(node["features"] * N_BINS / 7) * p["decryption"])
            node["measured_seconds"] = node["encrypt_seconds"] + node["histogram_seconds"] + node["decrypt_seconds"]
            out["paillier_fate"] = {"key_sizes": rows, "sample_node": node}
        floor = out["lightgbm"]["train_seconds"]
        print(f"{len(y)} rows, {trees} trees of depth {depth}: BFV SecureBoost {bfv['wall_seconds']:.1f} s "
              f"(eq.5 {bfv['eq5_cost_seconds']:.1f} s), plain protocol {plain['wall_seconds']:.2f} s, "
              f"LightGBM {floor:.3f} s")
        for r in out["paillier_fate"].get("key_sizes", []):
            print(f"  FATE-style Paillier-{r['per_op_seconds']['key_bits']}: {r['extrapolated_seconds']:.0f} s "
                  f"(extrapolated from per-op times)")
        bench.figures.update(out)
        bench.headline.update({"bfv_seconds": bfv["wall_seconds"], "plain_seconds": plain["wall_seconds"],
                               "lightgbm_seconds": floor})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
