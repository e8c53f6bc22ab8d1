"""Kafka's PEM-string key store (``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``)
loaded into an ``ssl.SSLContext``, for the client's and the listeners' contexts alike.

Python's ``ssl`` loads a private key only from a file name (``load_cert_chain``). On Linux
the key and chain are written to an anonymous in-memory file (``memfd_create``, mode 0600,
never on a disk or in a directory) and loaded through ``/proc/self/fd/<n>``, which only
this process (and root) can open; the file is closed, and so freed, right after the load.
Elsewhere (no ``memfd_create`` or no ``/proc``) they go to a file of mode 0600 in a fresh directory of mode 0700 (``mkdtemp``),
both removed right after the load, the key never readable by another user.

Layout handed to OpenSSL: the key's PEM block(s), a newline, then the chain's PEM blocks
(the certificate first, then its issuers), as in a ``ssl.keystore.location`` file.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile

_MODE_OWNER_ONLY = 0o600


def load_pem_strings(ctx: ssl.SSLContext, key: str, chain: str, password: str | None) -> None:
    """Load ``key`` (maybe encrypted with ``password``) and its certificate ``chain`` as the
    context's own certificate. Raises ``ssl.SSLError`` (bad PEM, wrong password, key and
    certificate not matching), ``OSError`` or ``UnicodeError`` (non-ASCII text)."""
    data = f"{key.strip()}\n{chain.strip()}\n".encode("ascii")
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None and os.path.isdir("/proc/self/fd"):
        fd = memfd_create("minikafka-keystore", os.MFD_CLOEXEC)
        try:
            os.fchmod(fd, _MODE_OWNER_ONLY)
            _write_all(fd, data)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}", password=password)
        finally:
            os.close(fd)
        return
    directory = tempfile.mkdtemp(prefix="minikafka-tls-")  # mode 0700
    try:
        path = os.path.join(directory, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _MODE_OWNER_ONLY)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        ctx.load_cert_chain(path, password=password)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
