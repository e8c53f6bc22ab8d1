"""TLS contexts from Kafka's ssl.* properties, checked by real handshakes in memory (ssl.MemoryBIO):
PEM key stores (file or strings, encrypted keys; the client's as well), trust stores,
ssl.client.auth, enabled protocols, cipher suites by IANA name, the client certificate's DN;
refusals name the property."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from broker.security.cipher_suites import IANA_TO_OPENSSL
from broker.security.tls import TlsConfigError, peer_dn, server_context
from client.errors import ClientError
from client.security import TlsSettings
from client.security import ssl_context as client_ssl_context
from tests.tls_certs import Pki, make_pki


def props(pki: Pki, **extra: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        **pki.broker_ssl_props(),
        "ssl.client.auth": "none", "ssl.enabled.protocols": ["TLSv1.2", "TLSv1.3"],
        "ssl.cipher.suites": [],
    }
    values.update({k.replace("_", "."): v for k, v in extra.items()})
    return values


def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """Run a TLS handshake between two in-memory endpoints; raises ssl.SSLError on failure."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    cli = client.wrap_bio(c_in, c_out, server_hostname="localhost")
    srv = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"c": False, "s": False}
    for _ in range(20):
        for name, obj in (("c", cli), ("s", srv)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            # TLS 1.3: the server verifies the client certificate in its last flight; a
            # rejection reaches the client on its first read.
            cli.write(b"ping")
            s_in.write(c_out.read())
            assert srv.read(4) == b"ping"
            return cli, srv
    raise AssertionError("handshake did not finish")


def client_ctx(pki: Pki, cert: str | None = None, **kw: Any) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    if cert is not None:
        ctx.load_cert_chain(str(pki.client(cert).cert), str(pki.client(cert).key))
    for key, value in kw.items():
        setattr(ctx, key, value)
    return ctx


def test_pem_keystore_file(pki: Pki) -> None:
    cli, srv = handshake(server_context("SSL", props(pki)), client_ctx(pki))
    assert cli.version() == "TLSv1.3"
    assert peer_dn(srv) is None  # no client certificate asked for


def test_pem_strings_and_encrypted_key(pki: Pki, tmp_path: Path) -> None:
    encrypted = make_pki(tmp_path / "enc", clients=(), key_password=b"s3cret")
    values = props(encrypted, ssl_keystore_location=None,
                   ssl_keystore_key=encrypted.server_key.read_text(),
                   ssl_keystore_certificate_chain=encrypted.server_cert.read_text(),
                   ssl_key_password="s3cret", ssl_truststore_location=None,
                   ssl_truststore_certificates=encrypted.ca_cert.read_text())
    handshake(server_context("SSL", values), client_ctx(encrypted))
    with pytest.raises(TlsConfigError, match=r"ssl\.keystore\.key \(listener SSL\)"):
        server_context("SSL", {**values, "ssl.key.password": "wrong"})


@pytest.mark.parametrize(("extra", "named"), [
    ({"ssl_keystore_type": "JKS"}, "ssl.keystore.type"),
    ({"ssl_keystore_type": "PKCS12"}, "ssl.keystore.type"),
    ({"ssl_keystore_location": None}, "ssl.keystore.key"),
    ({"ssl_keystore_location": "/nonexistent.pem"}, "ssl.keystore.location"),
    ({"ssl_keystore_password": "x"}, "ssl.keystore.password"),
    ({"ssl_truststore_type": "JKS"}, "ssl.truststore.type"),
    ({"ssl_truststore_password": "x"}, "ssl.truststore.password"),
    ({"ssl_enabled_protocols": []}, "ssl.enabled.protocols"),
    ({"ssl_cipher_suites": ["TLS_NO_SUCH_SUITE"]}, "ssl.cipher.suites"),
    ({"ssl_cipher_suites": ["TLS_AES_128_GCM_SHA256"]}, "ssl.cipher.suites"),
    ({"ssl_cipher_suites": ["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"],
      "ssl_enabled_protocols": ["TLSv1.3"]}, "ssl.cipher.suites"),
])
def test_refusals_name_the_property(pki: Pki, extra: dict[str, Any], named: str) -> None:
    with pytest.raises(TlsConfigError, match=named.replace(".", r"\.")):
        server_context("SSL", props(pki, **extra))


def test_client_auth_required(pki: Pki) -> None:
    server = server_context("SSL", props(pki, ssl_client_auth="required"))
    with pytest.raises(ssl.SSLError):
        handshake(server, client_ctx(pki))
    _cli, srv = handshake(server, client_ctx(pki, "alice"))
    assert peer_dn(srv) == "CN=alice,OU=clients,O=minikafka tests,C=US"


def test_client_auth_requested(pki: Pki) -> None:
    server = server_context("SSL", props(pki, ssl_client_auth="requested"))
    _cli, srv = handshake(server, client_ctx(pki))
    assert peer_dn(srv) is None
    _cli, srv = handshake(server, client_ctx(pki, "bob"))
    assert peer_dn(srv) == "CN=bob,OU=clients,O=minikafka tests,C=US"


def test_client_certificate_from_another_ca_is_refused(pki: Pki, tmp_path: Path) -> None:
    other = make_pki(tmp_path / "other", clients=("mallory",))
    server = server_context("SSL", props(pki, ssl_client_auth="required"))
    ctx = client_ctx(pki)
    ctx.load_cert_chain(str(other.client("mallory").cert), str(other.client("mallory").key))
    with pytest.raises(ssl.SSLError):
        handshake(server, ctx)


def test_enabled_protocols(pki: Pki) -> None:
    server = server_context("SSL", props(pki, ssl_enabled_protocols=["TLSv1.2"]))
    cli, _srv = handshake(server, client_ctx(pki))
    assert cli.version() == "TLSv1.2"
    with pytest.raises(ssl.SSLError):
        handshake(server, client_ctx(pki, minimum_version=ssl.TLSVersion.TLSv1_3))


def test_cipher_suites_by_iana_name(pki: Pki) -> None:
    suite = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
    server = server_context("SSL", props(pki, ssl_cipher_suites=[suite]))
    cli, _srv = handshake(server, client_ctx(pki))
    assert cli.version() == "TLSv1.2"  # no TLS 1.3 suite listed: TLS 1.3 is off
    cipher = cli.cipher()
    assert cipher is not None and cipher[0] == IANA_TO_OPENSSL[suite]
    client = client_ctx(pki, maximum_version=ssl.TLSVersion.TLSv1_2)
    client.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256")
    with pytest.raises(ssl.SSLError):
        handshake(server, client)
    all13 = ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"]
    cli, _srv = handshake(server_context("SSL", props(pki, ssl_cipher_suites=[*all13, suite])),
                          client_ctx(pki))
    assert cli.version() == "TLSv1.3"


def test_cipher_table_matches_openssl() -> None:
    assert shutil.which("openssl") is not None, "the openssl CLI (Debian's openssl) is needed"
    out = subprocess.run(["openssl", "ciphers", "-stdname", "ALL:!aNULL:!eNULL:!PSK:!SRP"],
                         capture_output=True, text=True, check=True, timeout=10).stdout
    pairs = {line.split()[0]: line.split()[2] for line in out.splitlines()
             if not line.startswith(("TLS_AES", "TLS_CHACHA"))}
    assert pairs == IANA_TO_OPENSSL


def _minikafka_tls_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("minikafka-tls-*")}


@pytest.mark.parametrize("in_memory", [True, False])
def test_client_certificate_from_pem_strings(pki: Pki, in_memory: bool,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's key store as PEM strings (``ssl.keystore.key`` and
    ``ssl.keystore.certificate.chain``) is presented in mutual TLS; no key file stays behind,
    whether it went through an in-memory file or (without memfd_create) a 0600 file."""
    if not in_memory:
        monkeypatch.delattr(os, "memfd_create")
    before = _minikafka_tls_dirs()
    alice = pki.client("alice")
    client = client_ssl_context(TlsSettings(
        truststore_type="PEM", truststore_location=str(pki.ca_cert), keystore_type="PEM",
        keystore_key=alice.key.read_text(), keystore_certificate_chain=alice.cert.read_text()))
    assert _minikafka_tls_dirs() == before
    _cli, srv = handshake(server_context("SSL", props(pki, ssl_client_auth="required")), client)
    assert peer_dn(srv) == "CN=alice,OU=clients,O=minikafka tests,C=US"


@pytest.mark.parametrize(("settings", "named"), [
    ({"keystore_key": "k"}, "ssl.keystore.certificate.chain"),
    ({"keystore_certificate_chain": "c"}, "ssl.keystore.key"),
    ({"keystore_key": "k", "keystore_certificate_chain": "c", "keystore_location": "/k.pem"},
     "ssl.keystore.key"),
    ({"keystore_key": "k", "keystore_certificate_chain": "c", "keystore_type": "PKCS12"},
     "ssl.keystore.type"),
    ({"keystore_key": "not a key", "keystore_certificate_chain": "not a chain"}, "keystore"),
])
def test_client_pem_string_refusals(settings: dict[str, str], named: str) -> None:
    with pytest.raises(ClientError, match=named.replace(".", r"\.")) as raised:
        client_ssl_context(TlsSettings(**{"keystore_type": "PEM", **settings}))  # type: ignore[arg-type]
    assert raised.value.error_name == "INVALID_CONFIG"
