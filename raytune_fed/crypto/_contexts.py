"""The two sides of the homomorphic protocol, for each scheme.

* :class:`SecretContext` - the active party's: it alone holds the secret key, encrypts a
  node's packed gradients and decrypts the passive party's histogram sums.
* :class:`PublicContext` - a passive party's, built from the bytes of
  :meth:`SecretContext.public_context`: it can add and multiply by plaintexts but
  :meth:`PublicContext.decrypt_sums` raises, and :meth:`is_private` is False.

Schemes: ``"bfv"`` (SEAL BFV through ``tenseal.sealapi``, coefficient packing of
:mod:`raytune_fed.crypto._layout`) and ``"plain"`` (the same protocol on the packed
integers without encryption; it counts the operations BFV would do, so its training cost
equals the encrypted run's).  Both return the exact integer sums, so the two grow the same
trees.  Every context tallies its operations in ``counts`` (and BFV its seconds in
``seconds``).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from raytune_fed.crypto._counters import OpCounts, zero_seconds
from raytune_fed.crypto._fixed import PLAIN_BITS
from raytune_fed.crypto._layout import POLY_DEGREE, Layout, Masks, as_masks
from raytune_fed.crypto._payload import SCHEMES, Ciphertexts
from raytune_fed.crypto._seal import COEFF_BITS, SealTools, tenseal
from raytune_fed.errors import ConfigError, RaytuneFedError

_MAGIC = b"raytune-fed-he/1 "


class MissingSecretKeyError(RaytuneFedError, PermissionError):
    """A context without the secret key was asked to decrypt."""


def check_scheme(scheme: Any) -> str:
    if scheme not in SCHEMES:
        raise ConfigError(f"unknown HE scheme {scheme!r}; known: {list(SCHEMES)}")
    return scheme


class _Context(ABC):
    scheme = ""

    def __init__(self) -> None:
        self.counts = OpCounts()
        self.seconds = zero_seconds()

    @abstractmethod
    def is_private(self) -> bool:
        """Implemented by each concrete subclass."""

    def _check(self, ct: Ciphertexts) -> None:
        if type(ct) is not Ciphertexts or ct.scheme != self.scheme:
            raise ConfigError(f"expected {self.scheme!r} Ciphertexts, got {getattr(ct, 'scheme', type(ct).__name__)!r}")


class SecretContext(_Context):
    """The active party's context (see the module docstring)."""

    def is_private(self) -> bool:
        return True

    @abstractmethod
    def public_context(self) -> bytes:
        """Implemented by each concrete subclass."""

    @abstractmethod
    def encrypt(self, packed: np.ndarray, layout: Layout) -> Ciphertexts:
        """Implemented by each concrete subclass."""

    @abstractmethod
    def decrypt_sums(self, ct: Ciphertexts, layout: Layout) -> np.ndarray:
        """Implemented by each concrete subclass."""


class PublicContext(_Context):
    """A passive party's context: homomorphic sums only, no decryption."""

    def is_private(self) -> bool:
        return False

    def decrypt_sums(self, ct: Ciphertexts, layout: Layout) -> np.ndarray:
        raise MissingSecretKeyError(f"this {self.scheme!r} context is public: it holds no secret key "
                                    f"and cannot decrypt")

    @abstractmethod
    def histogram(self, ct: Ciphertexts, masks: Masks | np.ndarray, layout: Layout,
                  rng: np.random.Generator) -> Ciphertexts:
        """Encrypted per-mask sums of the node's values ``ct``; ``masks`` says which masks each
        instance falls into (:class:`~raytune_fed.crypto.OneHotMasks` for an array of mask ids);
        ``rng`` draws the masking of everything else."""


# ---------------------------------------------------------------------------- plain

class PlainSecretContext(SecretContext):
    scheme = "plain"

    def public_context(self) -> bytes:
        return _MAGIC + b"plain\n"

    def encrypt(self, packed: np.ndarray, layout: Layout) -> Ciphertexts:
        self.counts.encryptions += layout.n_blocks
        return Ciphertexts.of("plain", [np.ascontiguousarray(packed, dtype=np.uint64).tobytes()])

    def decrypt_sums(self, ct: Ciphertexts, layout: Layout) -> np.ndarray:
        self._check(ct)
        sums = np.frombuffer(ct.blobs[0], dtype=np.uint64)
        self.counts.decryptions += int(np.count_nonzero(np.frombuffer(ct.blobs[1], dtype=np.bool_)))
        return sums.copy()


class PlainPublicContext(PublicContext):
    scheme = "plain"

    def histogram(self, ct: Ciphertexts, masks: Masks | np.ndarray, layout: Layout,
                  rng: np.random.Generator) -> Ciphertexts:
        self._check(ct)
        v = np.frombuffer(ct.blobs[0], dtype=np.uint64)
        masks = as_masks(masks)
        used = np.zeros(layout.n_groups, dtype=np.bool_)
        used[layout.used_groups(masks)] = True
        sums = masks.sums(v, layout.n_masks)
        n_products = layout.n_products(masks)
        self.counts.products += n_products
        self.counts.additions += n_products + int(used.sum())  # as BFV: products summed, each result flooded
        return Ciphertexts.of("plain", [sums.tobytes(), used.tobytes()])


# ---------------------------------------------------------------------------- BFV

def _new_bfv_context() -> Any:
    ts = tenseal()
    return ts.context(ts.SCHEME_TYPE.BFV, poly_modulus_degree=POLY_DEGREE, plain_modulus=2 ** PLAIN_BITS,
                      coeff_mod_bit_sizes=list(COEFF_BITS), n_threads=1)


class BFVSecretContext(SecretContext):
    scheme = "bfv"

    def __init__(self) -> None:
        super().__init__()
        self._ts = _new_bfv_context()
        self._seal = SealTools(self._ts)

    def public_context(self) -> bytes:
        return _MAGIC + b"bfv\n" + self._ts.serialize(save_public_key=True, save_secret_key=False,
                                                       save_galois_keys=False, save_relin_keys=False)

    def encrypt(self, packed: np.ndarray, layout: Layout) -> Ciphertexts:
        seal, s = self._seal, self._seal.s
        packed = np.asarray(packed, dtype=np.uint64)
        blobs = []
        for b in range(layout.n_blocks):
            t0 = time.perf_counter()
            coeffs = packed[b * layout.block:(b + 1) * layout.block]
            ct = s.Ciphertext()
            seal.encryptor.encrypt(seal.plaintext(coeffs), ct)
            blobs.append(seal.to_bytes(ct))
            self.seconds["encryptions"] += time.perf_counter() - t0
        self.counts.encryptions += layout.n_blocks
        return Ciphertexts.of("bfv", blobs)

    def decrypt_sums(self, ct: Ciphertexts, layout: Layout) -> np.ndarray:
        self._check(ct)
        seal = self._seal
        out = np.zeros(layout.n_groups * layout.masks_per_product, dtype=np.uint64)
        targets = layout.targets()
        decryptor = seal.decryptor
        if decryptor is None:  # a secret context is made with its key; None here is a bug
            raise MissingSecretKeyError(f"this {self.scheme!r} secret context holds no secret key")
        for g, blob in enumerate(ct.blobs):
            if not blob:
                continue
            t0 = time.perf_counter()
            pt = seal.s.Plaintext()
            decryptor.decrypt(seal.ciphertext(blob), pt)
            n = pt.coeff_count()
            base = g * layout.masks_per_product
            for r, pos in enumerate(targets):
                out[base + r] = pt[int(pos)] if pos < n else 0
            self.counts.decryptions += 1
            self.seconds["decryptions"] += time.perf_counter() - t0
        return out[:layout.n_masks]


class BFVPublicContext(PublicContext):
    scheme = "bfv"

    def __init__(self, ts_context: Any) -> None:
        super().__init__()
        self._ts = ts_context
        self._seal = SealTools(ts_context)

    def histogram(self, ct: Ciphertexts, masks: Masks | np.ndarray, layout: Layout,
                  rng: np.random.Generator) -> Ciphertexts:
        self._check(ct)
        seal, ev = self._seal, self._seal.evaluator
        masks = as_masks(masks)
        t0 = time.perf_counter()
        inputs = [seal.ciphertext(blob) for blob in ct.blobs]
        for c in inputs:
            ev.transform_to_ntt_inplace(c)
        self.seconds["encryptions"] += time.perf_counter() - t0
        acc: list[Any] = [None] * layout.n_groups
        tmp = seal.s.Ciphertext()
        for b, block_ct in enumerate(inputs):
            groups, polys = layout.block_masks(masks, b)
            for g in groups:
                t0 = time.perf_counter()
                p = seal.plaintext(polys[g])
                ev.transform_to_ntt_inplace(p, seal.parms_id)
                if acc[g] is None:
                    acc[g] = seal.s.Ciphertext()
                    ev.multiply_plain(block_ct, p, acc[g])
                    self.seconds["products"] += time.perf_counter() - t0
                else:
                    ev.multiply_plain(block_ct, p, tmp)
                    t1 = time.perf_counter()
                    self.seconds["products"] += t1 - t0
                    ev.add_inplace(acc[g], tmp)
                    self.seconds["additions"] += time.perf_counter() - t1
                    self.counts.additions += 1
                self.counts.products += 1
        blobs = []
        targets = layout.targets()
        for g in range(layout.n_groups):
            if acc[g] is None:
                blobs.append(b"")
                continue
            t0 = time.perf_counter()
            ev.transform_from_ntt_inplace(acc[g])
            noise = rng.integers(0, 2 ** PLAIN_BITS, layout.poly_degree, dtype=np.uint64)
            noise[targets] = 0
            ev.add_plain_inplace(acc[g], seal.plaintext(noise))
            ev.add_inplace(acc[g], seal.flood(rng))
            t1 = time.perf_counter()
            self.seconds["additions"] += t1 - t0
            self.counts.additions += 2
            blobs.append(seal.to_bytes(acc[g]))
            self.seconds["decryptions"] += time.perf_counter() - t1
        return Ciphertexts.of("bfv", blobs)


# ---------------------------------------------------------------------------- factories

def secret_context(scheme: str) -> SecretContext:
    """A fresh key pair for ``scheme`` (``"bfv"`` or ``"plain"``), held by the active party."""
    return {"bfv": BFVSecretContext, "plain": PlainSecretContext}[check_scheme(scheme)]()


def load_public_context(blob: Any) -> PublicContext:
    """A passive party's context from :meth:`SecretContext.public_context` bytes.

    Raises :class:`ConfigError` if ``blob`` is not such bytes or if it holds a secret key.
    """
    if type(blob) is not bytes or not blob.startswith(_MAGIC) or b"\n" not in blob:
        raise ConfigError(f"a public context must be the bytes of SecretContext.public_context(), "
                          f"got {type(blob).__name__}")
    scheme_bytes, payload = blob[len(_MAGIC):].split(b"\n", 1)
    scheme = check_scheme(scheme_bytes.decode("ascii", "replace"))
    if scheme == "plain":
        return PlainPublicContext()
    ts = tenseal()
    try:
        ts_context = ts.context_from(payload)
    except Exception as exc:  # TenSEAL raises plain ValueError/RuntimeError on bad bytes
        raise ConfigError(f"the public context bytes do not hold a TenSEAL context: {exc}") from None
    if ts_context.is_private():
        raise ConfigError("a passive party must get a public context, but the context given holds a secret key")
    return BFVPublicContext(ts_context)
