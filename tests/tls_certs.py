"""Test certificates, made at test time (no private key is ever committed): a CA, a server
certificate for 127.0.0.1/localhost and client certificates, all signed by the CA, written as
PEM files. ``make_pki(dir)`` returns their paths; keys are EC P-256 (fast to make).
``server_hosts`` names the server certificate's subject alternative names (a certificate
for another host, to test host name verification).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pki:
    ca_cert: Path  # PEM certificate of the CA (the trust store)
    server_keystore: Path  # PEM: server private key + certificate chain (Kafka's PEM key store)
    server_key: Path
    server_cert: Path

    def broker_ssl_props(self) -> dict[str, str]:
        """A broker's key store (its key and certificate) and trust store (the CA), as PEM
        files in Kafka's ``ssl.*`` properties."""
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.server_keystore),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_cert)}

    def client(self, name: str) -> ClientCert:
        return ClientCert(self.ca_cert.parent / f"{name}.key", self.ca_cert.parent / f"{name}.crt",
                          self.ca_cert.parent / f"{name}.keystore.pem")


@dataclass(frozen=True)
class ClientCert:
    key: Path
    cert: Path
    keystore: Path  # key + certificate in one PEM file (for Java's PEM key store)


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
             x509.NameAttribute(NameOID.ORGANIZATION_NAME, "minikafka tests")]
    if ou is not None:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _key_pem(key: ec.EllipticCurvePrivateKey, password: bytes | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


SERVER_HOSTS = ("localhost", "127.0.0.1")


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _cert(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
          issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool = False, server: bool = False,
          hosts: tuple[str, ...] = SERVER_HOSTS, also_client: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [_san(h) for h in hosts]), critical=False).add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]
                                  + ([ExtendedKeyUsageOID.CLIENT_AUTH] if also_client else [])),
            critical=False)
    elif not ca:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                                        critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_pki(directory: Path, clients: tuple[str, ...] = ("alice", "bob"),
             key_password: bytes | None = None, server_hosts: tuple[str, ...] = SERVER_HOSTS,
             server_as_client: bool = False) -> Pki:
    """A CA, a server certificate and one client certificate per name in ``clients``
    (subject ``CN=<name>,OU=clients,O=minikafka tests,C=US``). ``server_as_client``: the
    server certificate also authenticates a client (a broker's own certificate, presented
    to its peers in mutual TLS)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("minikafka test CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    (directory / "ca.crt").write_bytes(_pem(ca))
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _cert(_name(server_hosts[0]), server_key, ca_name, ca_key, server=True,
                   hosts=server_hosts, also_client=server_as_client)
    (directory / "server.key").write_bytes(_key_pem(server_key, key_password))
    (directory / "server.crt").write_bytes(_pem(server) + _pem(ca))
    (directory / "server.keystore.pem").write_bytes(
        _key_pem(server_key, key_password) + _pem(server) + _pem(ca))
    for name in clients:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _cert(_name(name, "clients"), key, ca_name, ca_key)
        (directory / f"{name}.key").write_bytes(_key_pem(key))
        (directory / f"{name}.crt").write_bytes(_pem(cert))
        (directory / f"{name}.keystore.pem").write_bytes(_key_pem(key) + _pem(cert))
    return Pki(directory / "ca.crt", directory / "server.keystore.pem", directory / "server.key",
               directory / "server.crt")
