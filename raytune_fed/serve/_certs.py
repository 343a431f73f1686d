"""Self-signed TLS certificates for site and party services, made with ``cryptography``.

For local services, tests and a site owner's first set-up (``raytune-fed site init``): the
analyst pins the certificate itself (``cafile`` in the sites file), so no authority signs it.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING

from raytune_fed.errors import ConfigError

if TYPE_CHECKING:
    from cryptography import x509


def _subject_names(hosts: tuple[str, ...]) -> list[x509.GeneralName]:
    from cryptography import x509

    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def self_signed_certificate(directory: str | os.PathLike, host: str = "127.0.0.1", *, days: int = 2,
                            extra_hosts: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """Write ``cert.pem`` and ``key.pem`` (2048-bit RSA, mode 0600) for ``host`` (an IP address
    or a DNS name) and ``extra_hosts`` into ``directory``; valid ``days`` days from now."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import NameOID
    except ImportError:
        raise ConfigError("making a certificate needs the 'cryptography' package: run `make setup` "
                          "(or pip install -e '.[all]')") from None
    if not isinstance(days, int) or days < 1:
        raise ConfigError(f"a certificate must be valid for at least one day, got days={days!r}")
    hosts = tuple(dict.fromkeys((host, *extra_hosts)))
    if not all(isinstance(h, str) and h.strip() for h in hosts):
        raise ConfigError(f"certificate host names must be non-empty strings, got {hosts!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(_subject_names(hosts)), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=True,
                                         content_commitment=False, data_encipherment=False, key_agreement=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    key_path.touch(mode=0o600, exist_ok=True)
    key_path.chmod(0o600)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                           serialization.NoEncryption()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path
