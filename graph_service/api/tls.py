"""Server TLS and mTLS whose certificates rotate without a restart.

gRPC's dynamic server credentials ask ``CertificateFiles.fetch`` before each new handshake; it
answers with a new configuration when a file changed since the last one, so a renewed
certificate (cert-manager, an ACME client, a rotated mTLS CA) is served to the next connection.
Connections already open keep the certificate they were made with. A change that cannot be read
(a half-written file, a key that does not match) is logged and the configuration in force stays.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import grpc
import structlog

from graph_service.api.file_stamps import Stamp, stamp

__all__ = ["CertificateFiles", "TlsFilesError", "server_credentials"]

log = structlog.get_logger(__name__)


class TlsFilesError(RuntimeError):
    """A certificate, key or CA file cannot be read at start."""


class CertificateFiles:
    def __init__(self, cert_file: str, key_file: str, client_ca_file: str = "") -> None:
        self._paths = [Path(p) for p in (cert_file, key_file, client_ca_file) if p]
        self._mtls = bool(client_ca_file)
        self._seen = self._signature()
        self.rotations = 0
        try:
            self.initial = self._configuration()
        except (OSError, ValueError) as exc:
            raise TlsFilesError(f"cannot read the TLS files: {exc}") from exc

    def _signature(self) -> tuple[Stamp, ...]:
        return tuple(stamp(path) for path in self._paths)

    def _configuration(self) -> grpc.ServerCertificateConfiguration:
        """The files' contents, checked first with OpenSSL (PEM, the key matches the certificate and
        is not encrypted, the CA loads): gRPC would take anything here and fail every handshake
        after. The files are read again after the check; if a rotation changed one in between,
        this is not a usable pair yet (the next handshake looks again)."""
        contents = [path.read_bytes() for path in self._paths]
        check = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            # A password is never asked for (an encrypted key fails here instead of prompting).
            check.load_cert_chain(self._paths[0], self._paths[1], password=b"")
            if self._mtls:
                check.load_verify_locations(cafile=self._paths[2])
        except ssl.SSLError as exc:
            raise ValueError(f"not a usable PEM certificate, unencrypted key matching it, or CA: {exc}") from exc
        if [path.read_bytes() for path in self._paths] != contents:
            raise ValueError("the files changed while they were read (a rotation in progress)")
        roots = contents[2] if self._mtls else None
        return grpc.ssl_server_certificate_configuration([(contents[1], contents[0])], root_certificates=roots)

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """Called by gRPC before each handshake: a new configuration if a file changed, else None."""
        signature = self._signature()
        if signature == self._seen:
            return None
        try:
            configuration = self._configuration()
        except (OSError, ValueError) as exc:
            self._seen = signature  # looked at: logged once, tried again when a file changes again
            log.error("tls_rotation_failed", error=str(exc), hint="the certificates in force stay")
            return None
        self._seen = signature
        self.rotations += 1
        log.info("tls_certificates_rotated", files=[str(p) for p in self._paths])
        return configuration


def server_credentials(cert_file: str, key_file: str, client_ca_file: str = "") -> grpc.ServerCredentials:
    """TLS (and mTLS with ``client_ca_file``: a client certificate that CA signed is required)."""
    files = CertificateFiles(cert_file, key_file, client_ca_file)
    return grpc.dynamic_ssl_server_credentials(
        files.initial,
        files.fetch,  # type: ignore[arg-type]  # grpc documents None as "no change"; grpc-stubs omit it
        require_client_authentication=bool(client_ca_file),
    )
