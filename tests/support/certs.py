"""Throwaway certificate authorities and certificates for the TLS tests, made with ``cryptography``.

The tests need several CAs (the one the server's certificate comes from, another one a client must
not accept, the CA of the client certificates under mTLS) and must swap files under a running
server the way cert-manager or an ACME client would: all at once, never half-written. Keys are
EC P-256: as good as RSA for these tests and generated in microseconds, so each test makes its own.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CA", "install", "issue", "make_ca", "write_atomically"]

DEFAULT_HOSTS = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class CA:
    """A certificate authority: its PEM files (the ``cert`` is what a peer trusts) and what signs."""

    name: str
    cert: Path
    key: Path
    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it over ``path``: a reader (the
    server before a handshake) sees the old file or the new one, never a truncated mix of both."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def install(source: Path, target: Path) -> None:
    """Put the contents of ``source`` at ``target`` atomically (a rotation of one file)."""
    write_atomically(target, source.read_bytes())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _validity(builder: x509.CertificateBuilder, days: int) -> x509.CertificateBuilder:
    """Valid from a minute ago (clocks of a test machine may differ by a little) for ``days`` days."""
    now = datetime.datetime.now(datetime.UTC)
    return builder.not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(
        now + datetime.timedelta(days=days)
    )


def make_ca(directory: Path, name: str, *, not_after_days: int = 2) -> CA:
    """A self-signed CA written to ``<directory>/<name>.pem`` and ``<name>-key.pem``."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(f"socialgraph test CA {name}")
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    certificate = _validity(builder, not_after_days).sign(key, hashes.SHA256())
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}-key.pem"
    write_atomically(key_path, _key_pem(key))
    write_atomically(cert_path, certificate.public_bytes(serialization.Encoding.PEM))
    return CA(name, cert_path, key_path, certificate, key)


def issue(
    ca: CA,
    directory: Path,
    name: str,
    *,
    server: bool,
    hosts: Sequence[str] = DEFAULT_HOSTS,
    not_after_days: int = 2,
) -> tuple[Path, Path]:
    """A leaf certificate ``ca`` signed, written to ``<directory>/<name>.pem`` and ``<name>-key.pem``.

    ``server``: serverAuth, with ``hosts`` as subject alternative names (DNS names, or IP addresses
    where they parse as one), since clients check the name they dialled against the SAN, not the
    CN; otherwise clientAuth, for mTLS. Returns (cert path, key path)."""
    key = ec.generate_private_key(ec.SECP256R1())
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0] if server and hosts else name))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.private_key.public_key()), critical=False)
    )
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(h) for h in hosts]), critical=False)
    certificate = _validity(builder, not_after_days).sign(ca.private_key, hashes.SHA256())
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}-key.pem"
    write_atomically(key_path, _key_pem(key))
    write_atomically(cert_path, certificate.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
