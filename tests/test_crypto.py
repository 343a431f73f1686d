"""raytune_fed.crypto: key custody, exact packed sums, masking, operation counts, payloads."""

import numpy as np
import pytest

from raytune_fed.crypto import (
    Ciphertexts,
    GHCodec,
    Layout,
    MissingSecretKeyError,
    OpCounts,
    OpTimes,
    calibrate,
    choose_block,
    load_public_context,
    plain_mask_sums,
    secret_context,
)
from raytune_fed.errors import BoundaryViolationError, ConfigError


@pytest.fixture(scope="module")
def bfv():
    active = secret_context("bfv")
    return active, load_public_context(active.public_context())


def _node(rng, n, n_features, n_bins, n_max=20000):
    codec = GHCodec.for_rows(n_max)
    gq, hq = codec.quantise(rng.uniform(-1, 1, n), rng.uniform(0, 0.25, n))
    ids = rng.integers(0, n_bins, (n, n_features)) + np.arange(n_features) * n_bins
    return codec, gq, hq, ids


def test_the_passive_context_is_public_and_cannot_decrypt(bfv):
    active, passive = bfv
    assert active.is_private() and not passive.is_private()
    assert not passive._ts.is_private()  # the TenSEAL context itself holds no secret key
    with pytest.raises(ValueError, match="public"):
        passive._ts.secret_key()
    layout = Layout.for_node(10, 4)
    ct = active.encrypt(np.arange(10, dtype=np.uint64), layout)
    with pytest.raises(MissingSecretKeyError, match="cannot decrypt"):
        passive.decrypt_sums(ct, layout)


@pytest.mark.parametrize("blob, message", [
    ("not bytes", "must be the bytes"),
    (b"raytune-fed-he/1 rsa\n", "unknown HE scheme 'rsa'"),
    (b"raytune-fed-he/1 bfv\nnot a context", "do not hold a TenSEAL context"),
])
def test_bad_public_contexts_are_refused(blob, message):
    with pytest.raises(ConfigError, match=message):
        load_public_context(blob)


def test_a_context_with_the_secret_key_is_refused(bfv):
    active, _ = bfv
    leaked = b"raytune-fed-he/1 bfv\n" + active._ts.serialize(save_secret_key=True)
    with pytest.raises(ConfigError, match="holds a secret key"):
        load_public_context(leaked)


def test_unknown_scheme():
    with pytest.raises(ConfigError, match=r"unknown HE scheme 'ckks'; known: \['bfv', 'plain'\]"):
        secret_context("ckks")


@pytest.mark.parametrize("n, n_features, n_bins", [(3000, 10, 32), (37, 3, 32), (1, 1, 4), (1500, 5, 7)])
def test_bfv_sums_are_exact_and_equal_to_the_plain_backend(bfv, n, n_features, n_bins):
    rng = np.random.default_rng(n)
    codec, gq, hq, ids = _node(rng, n, n_features, n_bins)
    layout = Layout.for_node(n, n_features * n_bins)
    results = {}
    for scheme in ("bfv", "plain"):
        active, passive = bfv if scheme == "bfv" else (lambda a: (a, load_public_context(a.public_context())))(
            secret_context("plain"))
        before = (OpCounts().add(active.counts), OpCounts().add(passive.counts))
        sums = active.decrypt_sums(passive.histogram(active.encrypt(codec.pack(gq, hq), layout), ids, layout, rng),
                                   layout)
        spent = [OpCounts().add(c.counts.as_dict()).as_dict() for c in (active, passive)]
        spent = [{k: v - b.as_dict()[k] for k, v in s.items()} for s, b in zip(spent, before)]
        results[scheme] = (codec.unpack_sums(sums), spent)
    (g, h), counts = results["bfv"]
    want_g = np.bincount(ids.ravel(), weights=np.repeat(gq, n_features), minlength=n_features * n_bins)
    want_h = np.bincount(ids.ravel(), weights=np.repeat(hq, n_features), minlength=n_features * n_bins)
    assert np.array_equal(g, want_g.astype(np.int64)) and np.array_equal(h, want_h.astype(np.int64))
    assert np.array_equal(results["plain"][0][0], g) and np.array_equal(results["plain"][0][1], h)
    assert counts == results["plain"][1]
    assert counts[0]["encryptions"] == layout.n_blocks and counts[1]["products"] == layout.n_products(ids)


def test_non_target_coefficients_are_masked_with_fresh_noise(bfv):
    active, passive = bfv
    rng = np.random.default_rng(0)
    codec, gq, hq, ids = _node(rng, 200, 2, 8)
    layout = Layout.for_node(200, 16)
    ct = active.encrypt(codec.pack(gq, hq), layout)
    polys = []
    for seed in (1, 2):
        out = passive.histogram(ct, ids, layout, np.random.default_rng(seed))
        seal = active._seal
        pt = seal.s.Plaintext()
        seal.decryptor.decrypt(seal.ciphertext(out.blobs[0]), pt)
        polys.append(np.array([pt[i] for i in range(pt.coeff_count())], dtype=np.uint64))
    targets = layout.targets()[:16]
    assert np.array_equal(polys[0][targets], polys[1][targets])
    others = np.setdiff1d(np.arange(min(map(len, polys))), layout.targets())
    assert np.mean(polys[0][others] != polys[1][others]) > 0.99


def test_codec_sums_do_not_overflow_at_the_row_bound():
    codec = GHCodec.for_rows(30000)
    n = 30000
    for g, h in ((1.0, 0.25), (-1.0, 0.25), (-1.0, 0.0)):
        gq, hq = codec.quantise(np.full(n, g), np.full(n, h))
        total = plain_mask_sums(codec.pack(gq, hq), np.zeros((n, 1), dtype=np.int64), 1)
        got_g, got_h = codec.unpack_sums(total)
        assert (got_g[0], got_h[0]) == (gq.sum(), hq.sum())
    assert codec.fraction_bits >= 14
    with pytest.raises(ConfigError, match="too many"):
        GHCodec.for_rows(2 ** 40)
    with pytest.raises(ConfigError, match=r"gradients must lie in \[-1, 1\]"):
        codec.quantise(np.array([1.5]), np.array([0.1]))


def test_block_size_follows_node_size():
    assert choose_block(1, 320) == 1 and choose_block(5, 320) == 8
    assert choose_block(800, 160) in (256, 512)
    assert choose_block(10000, 320) in (512, 1024) and choose_block(10 ** 6, 320, max_block=256) == 256
    with pytest.raises(ConfigError, match="max_block must be a power of two"):
        choose_block(10, 10, max_block=100)
    layout = Layout(3000, 320, 1024)
    assert (layout.masks_per_product, layout.n_blocks, layout.n_groups) == (8, 3, 40)
    assert list(layout.targets()[:2]) == [1023, 2047]


def test_payload_declares_its_size():
    assert Ciphertexts.of("bfv", [b"ab", b"c"]).size == 3
    with pytest.raises(BoundaryViolationError, match="declares 5 bytes but the blobs hold 3"):
        Ciphertexts("bfv", (b"ab", b"c"), 5)
    with pytest.raises(BoundaryViolationError, match="tuple of bytes"):
        Ciphertexts("bfv", (np.zeros(3),), 24)
    with pytest.raises(BoundaryViolationError, match="scheme"):
        Ciphertexts("rsa", (), 0)


def test_cost_is_counts_times_seconds():
    times = OpTimes(encryption=0.01, decryption=0.002, addition=0.0001, product=0.001)
    counts = OpCounts(encryptions=10, decryptions=5, additions=100, products=100)
    assert times.cost(counts) == pytest.approx(0.1 + 0.01 + 0.01 + 0.1)
    assert OpTimes.from_dict(times.as_dict()) == times
    with pytest.raises(ConfigError, match="unknown OpTimes fields"):
        OpTimes.from_dict({"encryption": 1, "rotation": 2})
    with pytest.raises(ConfigError, match="OpTimes.product must be a finite number"):
        OpTimes(0.1, 0.1, 0.1, float("nan"))
    with pytest.raises(ConfigError, match="unknown operation names"):
        OpCounts.from_dict({"rotations": 1})


def test_calibration_measures_every_operation_on_this_machine():
    times = calibrate(repeats=1)
    assert times.source.startswith("calibrated")
    assert all(getattr(times, name) > 0 for name in ("encryption", "decryption", "addition", "product"))
    # an encryption (encode, encrypt, serialise) costs more than one ciphertext addition
    assert times.encryption > times.addition


@pytest.mark.parametrize("n, n_features, n_bins", [(3000, 6, 32), (37, 3, 32), (1, 1, 4), (700, 4, 7)])
def test_threshold_masks_sum_each_left_side_exactly_in_the_secret_order(bfv, n, n_features, n_bins):
    """Mask slot_of[f (K-1) + k] sums the instances with bin <= k on feature f, in both backends alike."""
    from raytune_fed.crypto import ThresholdMasks

    rng = np.random.default_rng(n)
    codec, gq, hq, _ = _node(rng, n, n_features, n_bins)
    bins = rng.integers(0, n_bins, (n, n_features))
    n_masks = n_features * (n_bins - 1)
    masks = ThresholdMasks(bins, n_bins, rng.permutation(n_masks))
    layout = Layout.for_node(n, n_masks)
    results = {}
    for scheme in ("bfv", "plain"):
        active, passive = bfv if scheme == "bfv" else (lambda a: (a, load_public_context(a.public_context())))(
            secret_context("plain"))
        before = OpCounts().add(passive.counts).as_dict()
        out = passive.histogram(active.encrypt(codec.pack(gq, hq), layout), masks, layout, rng)
        results[scheme] = (codec.unpack_sums(active.decrypt_sums(out, layout)),
                           {k: v - before[k] for k, v in passive.counts.as_dict().items()})
    (g, h), counts = results["bfv"]
    for f in range(n_features):
        for k in range(n_bins - 1):
            slot = masks.slot_of[f * (n_bins - 1) + k]
            left = bins[:, f] <= k
            assert (g[slot], h[slot]) == (gq[left].sum(), hq[left].sum())
    assert np.array_equal(results["plain"][0][0], g) and np.array_equal(results["plain"][0][1], h)
    assert counts == results["plain"][1] and counts["products"] == layout.n_products(masks)
