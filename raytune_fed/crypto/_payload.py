"""Ciphertexts as they cross a party boundary: bytes with a declared size, never objects."""

from __future__ import annotations

from dataclasses import dataclass

from raytune_fed.errors import BoundaryViolationError

SCHEMES = ("bfv", "plain")


@dataclass(frozen=True)
class Ciphertexts:
    """Serialised ciphertexts of one scheme; ``size`` must equal the summed blob lengths.

    An empty blob stands for a ciphertext of zero the sender did not need to compute
    (a mask group no instance falls into).
    """

    scheme: str
    blobs: tuple[bytes, ...]
    size: int

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise BoundaryViolationError(f"Ciphertexts.scheme must be one of {SCHEMES}, got {self.scheme!r}")
        if not isinstance(self.blobs, tuple) or not all(type(b) is bytes for b in self.blobs):
            raise BoundaryViolationError("Ciphertexts.blobs must be a tuple of bytes")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size != sum(map(len, self.blobs)):
            raise BoundaryViolationError(f"Ciphertexts.size declares {self.size!r} bytes but the blobs hold "
                                         f"{sum(map(len, self.blobs))}")

    @classmethod
    def of(cls, scheme: str, blobs: list[bytes] | tuple[bytes, ...]) -> Ciphertexts:
        blobs = tuple(blobs)
        return cls(scheme, blobs, sum(map(len, blobs)))

    def __len__(self) -> int:
        return len(self.blobs)
