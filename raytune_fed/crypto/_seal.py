"""Thin helpers over ``tenseal.sealapi`` (imported lazily; the only TenSEAL user is this package).

SEAL objects serialise only to file paths, so polynomials and ciphertexts move through
one small file per thread in a private temporary directory (``/dev/shm`` when present).
Plaintexts are written directly in SEAL's uncompressed serialisation format from a numpy
array, which is much faster than SEAL's text format; a self-check at start-up proves the
format round-trips on the installed SEAL version.  So are *flooding* ciphertexts
(:meth:`SealTools.flood`): ``(c0, c1) = (E, 0)`` for a wide uniform random polynomial
``E``, which decrypt to zero and, added to a result, drown the noise it carries (the
noise of a product of the active party's ciphertext and a passive party's mask
polynomial would otherwise tell the key holder the mask).
"""

from __future__ import annotations

import atexit
import os
import shutil
import struct
import tempfile
import threading
from typing import Any

import numpy as np

from raytune_fed.errors import RaytuneFedError

COEFF_BITS = (60, 60, 60)
FLOOD_BITS = 57  # |E| < 2**57, below the 2**60 a result's noise may reach and decrypt (q / t / 2 = 2**60)
_dir_lock = threading.Lock()
_dir: list[str] = []


class SealFormatError(RaytuneFedError, RuntimeError):
    """The installed SEAL does not read the plaintext format this module writes."""


def tenseal() -> Any:
    import tenseal as ts  # noqa: PLC0415 - optional heavy dependency, imported on first use

    return ts


def sealapi() -> Any:
    import tenseal.sealapi as sealapi  # noqa: PLC0415

    return sealapi


def _scratch(kind: str) -> str:
    with _dir_lock:
        if not _dir:
            base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
            path = tempfile.mkdtemp(prefix="raytune-fed-he-", dir=base)
            atexit.register(shutil.rmtree, path, True)
            _dir.append(path)
    return os.path.join(_dir[0], f"{kind}-{os.getpid()}-{threading.get_ident()}.bin")


class SealTools:
    """sealapi objects of one TenSEAL context: evaluator, encryptor, optional decryptor."""

    def __init__(self, ts_context: Any) -> None:
        s = sealapi()
        self.s = s
        self.context = ts_context.seal_context().data
        self.parms_id = self.context.first_parms_id()
        self.poly_degree = self.context.first_context_data().parms().poly_modulus_degree()
        self.plain_modulus = self.context.first_context_data().parms().plain_modulus().value()
        self.evaluator = s.Evaluator(self.context)
        self.moduli = [m.value() for m in self.context.first_context_data().parms().coeff_modulus()]
        self.encryptor = s.Encryptor(self.context, ts_context.public_key().data)
        self.decryptor = s.Decryptor(self.context, ts_context.secret_key().data) if ts_context.is_private() else None
        path = _scratch("hdr")
        s.Plaintext("1").save(path)
        with open(path, "rb") as fh:
            self._header = fh.read(16)
        self._check_format()

    def _seal_header(self, size: int) -> bytes:
        # magic, header size, version major/minor copied from SEAL; compression "none"
        return self._header[:5] + b"\x00" + self._header[6:8] + struct.pack("<Q", size)

    def plaintext(self, coeffs: np.ndarray) -> Any:
        """A SEAL Plaintext with the given ``uint64`` coefficients (each below the plain modulus)."""
        c = np.ascontiguousarray(coeffs, dtype=np.uint64)
        inner = self._seal_header(24 + 8 * c.size) + struct.pack("<Q", c.size) + c.tobytes()
        body = bytes(32) + struct.pack("<Qd", c.size, 1.0) + inner
        path = _scratch("pt")
        with open(path, "wb") as fh:
            fh.write(self._seal_header(16 + len(body)) + body)
        p = self.s.Plaintext()
        p.load(self.context, path)
        return p

    def _check_format(self) -> None:
        want = np.array([7, 0, 3, self.plain_modulus - 1], dtype=np.uint64)
        p = self.plaintext(want)
        got = np.array([p[i] for i in range(want.size)], dtype=np.uint64)
        if p.coeff_count() != want.size or not np.array_equal(got, want):
            raise SealFormatError("the installed SEAL did not read back a raw plaintext; update raytune_fed.crypto")
        ct = self.transparent(np.arange(self.poly_degree, dtype=np.int64) - 5)
        if ct.size() != 2 or ct.dyn_array().at(0) != self.moduli[0] - 5 or ct.dyn_array().at(self.poly_degree) \
                != self.moduli[1] - 5 or ct.dyn_array().at(2 * self.poly_degree) != 0:
            raise SealFormatError("the installed SEAL did not read back a raw ciphertext; update raytune_fed.crypto")

    def transparent(self, c0: np.ndarray, *, ntt: bool = False) -> Any:
        """The ciphertext ``(c0, 0)`` at the data level (``c0``: one int64 coefficient array, or one row per
        prime of uint64 residues); ``ntt`` marks the data as being in NTT form."""
        c0 = np.asarray(c0)
        if c0.ndim == 1:
            c0 = np.stack([np.mod(c0, q).astype(np.uint64) for q in self.moduli])
        n, k = self.poly_degree, len(self.moduli)
        data = np.concatenate([np.ascontiguousarray(c0, dtype=np.uint64).ravel(), np.zeros(n * k, dtype=np.uint64)])
        inner = self._seal_header(24 + 8 * data.size) + struct.pack("<Q", data.size) + data.tobytes()
        # parms_id, is_ntt_form, size, poly_modulus_degree, coeff_modulus_size, scale, correction_factor, data
        body = struct.pack("<4QB3QdQ", *self.parms_id, int(ntt), 2, n, k, 1.0, 1) + inner
        path = _scratch("tr")
        with open(path, "wb") as fh:
            fh.write(self._seal_header(16 + len(body)) + body)
        ct = self.s.Ciphertext()
        ct.load(self.context, path)
        return ct

    def flood(self, rng: np.random.Generator) -> Any:
        """A ciphertext of zero whose noise is uniform in ``(-2**FLOOD_BITS, 2**FLOOD_BITS)`` per coefficient."""
        bound = 1 << FLOOD_BITS
        return self.transparent(rng.integers(-bound + 1, bound, self.poly_degree, dtype=np.int64))

    def to_bytes(self, obj: Any) -> bytes:
        path = _scratch("ct")
        obj.save(path)
        with open(path, "rb") as fh:
            return fh.read()

    def ciphertext(self, blob: bytes) -> Any:
        path = _scratch("ct")
        with open(path, "wb") as fh:
            fh.write(blob)
        ct = self.s.Ciphertext()
        ct.load(self.context, path)
        return ct
