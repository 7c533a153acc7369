"""``TlsConfig``: TLS or mTLS to the service, from PEM files."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

__all__ = ["TlsConfig"]


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """TLS to the service; with ``cert_file`` and ``key_file``, mTLS (the client's certificate)."""

    ca_file: str | None = None
    """PEM CA bundle that signed the server's certificate; None: the system's trusted CAs."""
    cert_file: str | None = None
    """PEM client certificate chain, for a server that requires one (SG_TLS_CLIENT_CA_FILE)."""
    key_file: str | None = None
    """PEM private key of ``cert_file``."""
    server_name: str | None = None
    """The name to verify the server's certificate against, when it is not the target's host."""

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together (mTLS)")

    def credentials(self) -> grpc.ChannelCredentials:
        """Channel credentials from the files (read now: a missing file is an ``OSError`` here)."""

        def read(path: str | None) -> bytes | None:
            if path is None:
                return None
            with open(path, "rb") as file:
                return file.read()

        return grpc.ssl_channel_credentials(read(self.ca_file), read(self.key_file), read(self.cert_file))
