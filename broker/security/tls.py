"""TLS for SSL and SASL_SSL listeners: an ``ssl.SSLContext`` from Kafka's ``ssl.*`` properties,
and the client certificate's distinguished name.

Supported, with Kafka's names (each may be set per listener, ``listener.name.<l>.ssl.*``):

- key store ``ssl.keystore.type=PEM`` only (Kafka's default JKS, and PKCS12, are refused at
  start-up naming the property): ``ssl.keystore.location`` (a PEM file holding the private
  key and the certificate chain) or the PEM strings ``ssl.keystore.key`` and
  ``ssl.keystore.certificate.chain``; ``ssl.key.password`` for an encrypted key. As in
  Kafka, ``ssl.keystore.password`` cannot be used with PEM;
- trust store ``ssl.truststore.type=PEM``: ``ssl.truststore.location`` (PEM certificates)
  or ``ssl.truststore.certificates`` (a PEM string); without one, the system's default CAs
  verify client certificates (Kafka: the JDK's);
- ``ssl.client.auth``: ``required`` (a client without a verified certificate fails the
  handshake), ``requested`` (asked for, verified when sent), ``none``;
- ``ssl.enabled.protocols``: TLSv1.2 and/or TLSv1.3;
- ``ssl.cipher.suites``: IANA names (Java's), mapped to OpenSSL's for TLS 1.2
  (``cipher_suites.IANA_TO_OPENSSL``). Python's ``ssl`` cannot choose among TLS 1.3 suites,
  so a list must name all three TLS 1.3 suites or none (then TLS 1.3 is off, as a Java
  broker with no TLS 1.3 suite enabled would have it); anything else fails start-up.

The PEM strings are handed to OpenSSL by ``client.pem_keystore`` (an in-memory file on
Linux, else a 0600 file removed at once): Python's ``ssl`` loads key material only from files.

The distinguished name (``peer_dn``) is the certificate's subject in RFC 2253 form, as
Java's ``X500Principal.getName()`` prints it (``CN=alice,OU=eng,O=org``).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping

from broker.security.cipher_suites import IANA_TO_OPENSSL, TLS13_SUITES

_PropValue = bool | int | float | str | list[str] | None


class TlsConfigError(ValueError):
    """A listener's TLS properties cannot be used; the message names the property."""


def server_context(listener: str, values: Mapping[str, _PropValue]) -> ssl.SSLContext:
    """The server-side context for ``listener`` from its effective ``ssl.*`` values."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(ctx, listener, values)
    _load_keystore(ctx, listener, values)
    client_auth = str(values.get("ssl.client.auth") or "none")
    ctx.verify_mode = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
                       "none": ssl.CERT_NONE}[client_auth]
    trusted = _load_truststore(ctx, listener, values)
    if not trusted and ctx.verify_mode != ssl.CERT_NONE:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    _set_ciphers(ctx, listener, values)
    return ctx


def _name(listener: str, prop: str) -> str:
    return f"{prop} (listener {listener})"


def _text(values: Mapping[str, _PropValue], name: str) -> str | None:
    value = values.get(name)
    return None if value is None or value == "" else str(value)


def _set_protocols(ctx: ssl.SSLContext, listener: str, values: Mapping[str, _PropValue]) -> None:
    enabled = values.get("ssl.enabled.protocols") or []
    assert isinstance(enabled, list)
    if not enabled:
        raise TlsConfigError(f"Invalid value for configuration "
                             f"{_name(listener, 'ssl.enabled.protocols')}: no protocol enabled")
    versions = sorted(ssl.TLSVersion.TLSv1_2 if p == "TLSv1.2" else ssl.TLSVersion.TLSv1_3
                      for p in enabled)
    ctx.minimum_version = versions[0]
    ctx.maximum_version = versions[-1]


def _load_keystore(ctx: ssl.SSLContext, listener: str, values: Mapping[str, _PropValue]) -> None:
    store_type = str(values.get("ssl.keystore.type") or "JKS")
    location = _text(values, "ssl.keystore.location")
    key = _text(values, "ssl.keystore.key")
    chain = _text(values, "ssl.keystore.certificate.chain")
    if store_type.upper() != "PEM":
        raise TlsConfigError(f"Invalid value {store_type!r} for configuration "
                             f"{_name(listener, 'ssl.keystore.type')}: only PEM key stores are "
                             "supported")
    if _text(values, "ssl.keystore.password") is not None:
        raise TlsConfigError(f"Invalid value for configuration "
                             f"{_name(listener, 'ssl.keystore.password')}: SSL key store password "
                             "cannot be specified with PEM format, only key password may be specified")
    password = _text(values, "ssl.key.password")
    if location is not None:
        if key is not None or chain is not None:
            raise TlsConfigError(f"Invalid value for configuration "
                                 f"{_name(listener, 'ssl.keystore.key')}: set either "
                                 "ssl.keystore.location or the PEM strings, not both")
        try:
            ctx.load_cert_chain(location, password=password)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(f"Invalid value {location!r} for configuration "
                                 f"{_name(listener, 'ssl.keystore.location')}: {exc}") from None
        return
    if key is None or chain is None:
        missing = "ssl.keystore.certificate.chain" if key is not None else "ssl.keystore.key"
        raise TlsConfigError(f"Missing configuration {_name(listener, missing)}: an SSL listener "
                             "needs a key store (ssl.keystore.location, or ssl.keystore.key and "
                             "ssl.keystore.certificate.chain)")
    # Imported here: the client package it lives in loads the client's data calls, which a
    # broker without PEM strings never needs (a tenth of a single node's start-up).
    from client.pem_keystore import load_pem_strings

    try:
        load_pem_strings(ctx, key, chain, password)
    except (OSError, ssl.SSLError, UnicodeError) as exc:
        raise TlsConfigError(f"Invalid value for configuration "
                             f"{_name(listener, 'ssl.keystore.key')}: {exc}") from None


def _load_truststore(ctx: ssl.SSLContext, listener: str, values: Mapping[str, _PropValue]) -> bool:
    location = _text(values, "ssl.truststore.location")
    certificates = _text(values, "ssl.truststore.certificates")
    if location is None and certificates is None:
        return False
    store_type = str(values.get("ssl.truststore.type") or "JKS")
    if store_type.upper() != "PEM":
        raise TlsConfigError(f"Invalid value {store_type!r} for configuration "
                             f"{_name(listener, 'ssl.truststore.type')}: only PEM trust stores "
                             "are supported")
    if _text(values, "ssl.truststore.password") is not None:
        raise TlsConfigError(f"Invalid value for configuration "
                             f"{_name(listener, 'ssl.truststore.password')}: SSL trust store "
                             "password cannot be specified for PEM format")
    if location is not None and certificates is not None:
        raise TlsConfigError(f"Invalid value for configuration "
                             f"{_name(listener, 'ssl.truststore.certificates')}: set either "
                             "ssl.truststore.location or ssl.truststore.certificates, not both")
    try:
        if location is not None:
            ctx.load_verify_locations(cafile=location)
        else:
            ctx.load_verify_locations(cadata=certificates)
    except (OSError, ssl.SSLError, ValueError) as exc:
        prop = "ssl.truststore.location" if location is not None else "ssl.truststore.certificates"
        raise TlsConfigError(f"Invalid value for configuration {_name(listener, prop)}: {exc}") from None
    return True


def _set_ciphers(ctx: ssl.SSLContext, listener: str, values: Mapping[str, _PropValue]) -> None:
    suites = values.get("ssl.cipher.suites") or []
    assert isinstance(suites, list)
    if not suites:
        return
    prop = _name(listener, "ssl.cipher.suites")
    unknown = [s for s in suites if s not in IANA_TO_OPENSSL and s not in TLS13_SUITES]
    if unknown:
        raise TlsConfigError(f"Invalid value for configuration {prop}: unknown cipher suites "
                             f"{', '.join(unknown)}")
    tls12 = [IANA_TO_OPENSSL[s] for s in suites if s in IANA_TO_OPENSSL]
    tls13 = {s for s in suites if s in TLS13_SUITES}
    if tls13 and tls13 != TLS13_SUITES:
        raise TlsConfigError(f"Invalid value for configuration {prop}: TLS 1.3 suites can only "
                             f"be enabled all together ({', '.join(sorted(TLS13_SUITES))})")
    if not tls13:
        if ctx.minimum_version == ssl.TLSVersion.TLSv1_3:
            raise TlsConfigError(f"Invalid value for configuration {prop}: no suite for the "
                                 "enabled protocol TLSv1.3")
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if not tls12:
        if ctx.maximum_version == ssl.TLSVersion.TLSv1_2:
            raise TlsConfigError(f"Invalid value for configuration {prop}: no suite for the "
                                 "enabled protocol TLSv1.2")
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        return
    try:
        ctx.set_ciphers(":".join(tls12))
    except ssl.SSLError as exc:
        raise TlsConfigError(f"Invalid value for configuration {prop}: {exc}") from None


def peer_dn(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """The verified client certificate's subject (RFC 2253), or None without one."""
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    from cryptography import x509  # imported only when a client certificate is seen

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def describe_handshake_error(exc: BaseException) -> str:
    """A short reason for a failed handshake, for the log line."""
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__
