"""The service's TLS identity, reloaded without a restart when its files change.

In a cluster the certificate is a mounted Secret that the operator (or cert-manager) renews
and kubelet replaces in place. The listening socket keeps one "front" SSLContext; its SNI
callback, which OpenSSL runs for every handshake (with or without SNI), hands each new
connection the context holding the newest certificate. A reload builds a fresh context
from the files and swaps one reference, so a half-written or mismatched pair never reaches
a connection: it is refused with a warning and the previous certificate stays in use.
"""

from __future__ import annotations

import hashlib
import logging
import ssl
import threading
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from memorystore.config import ConfigError, ServerTLS

log = logging.getLogger("memorystore.service.ops.tls")

RELOAD_SECONDS = 10.0


def _read(path: Path, field: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{field}: cannot read {path}: {exc.strerror}") from None


def _check_pair(cert_pem: bytes, key_pem: bytes, tls: ServerTLS) -> None:
    """Name the file at fault; never echo what it holds (the key file is a secret)."""
    try:
        chain = x509.load_pem_x509_certificates(cert_pem)
    except ValueError:
        raise ConfigError(f"tls.certFile: {tls.cert_file} holds no PEM certificate") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):  # TypeError: an encrypted key
        raise ConfigError(
            f"tls.keyFile: {tls.key_file} holds no unencrypted PEM private key"
        ) from None
    form = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if chain[0].public_key().public_bytes(*form) != key.public_key().public_bytes(*form):
        raise ConfigError(
            f"tls.keyFile: {tls.key_file} is not the key of the certificate in "
            f"tls.certFile {tls.cert_file}"
        )


def _context(tls: ServerTLS) -> tuple[ssl.SSLContext, str]:
    """A server context from the files, and a fingerprint of what it was built from."""
    cert_pem = _read(Path(tls.cert_file), "tls.certFile")
    key_pem = _read(Path(tls.key_file), "tls.keyFile")
    _check_pair(cert_pem, key_pem, tls)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except (OSError, ssl.SSLError):  # the files changed between the check and the load
        raise ConfigError(
            f"tls: {tls.cert_file} and {tls.key_file} changed while being read"
        ) from None
    return context, hashlib.sha256(cert_pem + b"\0" + key_pem).hexdigest()


def _fingerprint(tls: ServerTLS) -> str | None:
    try:
        cert_pem = Path(tls.cert_file).read_bytes()
        key_pem = Path(tls.key_file).read_bytes()
    except OSError:
        return None
    return hashlib.sha256(cert_pem + b"\0" + key_pem).hexdigest()


class CertificateReloader:
    """`context` goes to the server once; `start()` polls the files every `interval`
    seconds and serves what they hold to new connections (established ones keep theirs).

    Construction loads the files and raises ConfigError naming the file when they are
    unreadable, not PEM, or not a matching pair: the service must not start without them.
    """

    def __init__(self, tls: ServerTLS, interval: float = RELOAD_SECONDS) -> None:
        self.tls = tls
        self.interval = interval
        self._current, self._loaded = _context(tls)
        self._refused: str | None = None  # a fingerprint already warned about
        self.reloads = 0
        self.context = self._current  # the listening socket's: it only dispatches
        self.context.sni_callback = self._select
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _select(self, conn: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
        current = self._current
        if conn.context is not current:
            conn.context = current

    def check(self) -> bool:
        """Reload when the files changed; True when a new certificate is now served."""
        seen = _fingerprint(self.tls)
        if seen is None or seen in (self._loaded, self._refused):
            return False
        try:
            context, loaded = _context(self.tls)
        except ConfigError as exc:  # e.g. a certificate written before its key
            self._refused = seen
            log.warning("keeping the current TLS certificate: %s", exc)
            return False
        self._current, self._loaded, self._refused = context, loaded, None
        self.reloads += 1
        log.info("reloaded the TLS certificate from %s", self.tls.cert_file)
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check()
            except Exception:  # the poller must outlive any surprise; the old cert stays
                log.exception("TLS certificate reload failed")

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tls-reload", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
