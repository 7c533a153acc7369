"""What the server takes as TLS files, at start and at a rotation (no server: ``CertificateFiles`` alone)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from graph_service.api.tls import CertificateFiles, TlsFilesError
from tests.support.certs import install, issue, make_ca, write_atomically


def test_a_usable_pair_loads_and_an_unchanged_one_is_not_offered_again(tmp_path: Path) -> None:
    """The first handshake after start gets nothing new; a rotated pair is offered once."""
    ca = make_ca(tmp_path, "ca")
    cert, key = issue(ca, tmp_path, "server", server=True)
    files = CertificateFiles(str(cert), str(key))
    assert files.fetch() is None
    newer_cert, newer_key = issue(ca, tmp_path, "server2", server=True)
    install(newer_key, key)
    install(newer_cert, cert)
    assert files.fetch() is not None
    assert files.fetch() is None
    assert files.rotations == 1


def test_an_encrypted_key_is_refused_without_asking_for_a_password(tmp_path: Path) -> None:
    """A passphrase-protected key is a clear start error, never a prompt on the terminal."""
    ca = make_ca(tmp_path, "ca")
    cert, key = issue(ca, tmp_path, "server", server=True)
    loaded = serialization.load_pem_private_key(key.read_bytes(), password=None)
    encrypted = loaded.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    write_atomically(key, encrypted)
    with pytest.raises(TlsFilesError, match="unencrypted key"):
        CertificateFiles(str(cert), str(key))


def test_a_key_that_does_not_match_is_refused_and_the_old_pair_stays(tmp_path: Path) -> None:
    """A rotation that installs a certificate without its key offers nothing; the fixed pair is taken."""
    ca = make_ca(tmp_path, "ca")
    cert, key = issue(ca, tmp_path, "server", server=True)
    files = CertificateFiles(str(cert), str(key))
    other_cert, other_key = issue(ca, tmp_path, "other", server=True)
    install(other_cert, cert)
    assert files.fetch() is None
    install(other_key, key)
    assert files.fetch() is not None


def test_a_client_ca_bundle_with_text_around_the_pem_blocks_loads(tmp_path: Path) -> None:
    """CA bundles carry comments (often not ASCII) between certificates; they load as OpenSSL loads them."""
    ca = make_ca(tmp_path, "ca")
    cert, key = issue(ca, tmp_path, "server", server=True)
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes("# Issuer: CN=Főtanúsítvány\n".encode() + ca.cert.read_bytes())
    files = CertificateFiles(str(cert), str(key), str(bundle))
    assert files.fetch() is None


def test_missing_files_are_a_start_error(tmp_path: Path) -> None:
    """A path that names no file stops the start with the reason."""
    with pytest.raises(TlsFilesError, match="cannot read"):
        CertificateFiles(str(tmp_path / "nope.pem"), str(tmp_path / "nope.key"))
