"""``minikafka configs`` (SCRAM users, quotas) and ``minikafka acls`` against a real broker with
an authorizer and a SCRAM listener: a user created with the CLI logs in; quotas and ACLs set
with the CLI are what the broker's APIs describe; output lines are kafka-configs' and
kafka-acls'."""

from __future__ import annotations

import io

import pytest
import scramp

from cli.acls import main as acls_main
from cli.configs import main as configs_main
from cli.configs import parse_config_list
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import ModuleBrokerFactory
from tests.integration.netclient import RawClient

pytestmark = pytest.mark.timeout(120)

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


@pytest.fixture(scope="module")
def cli_broker(module_broker_factory: ModuleBrokerFactory) -> BrokerProcess:
    return module_broker_factory("cli-broker", {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
    })


def run(main: object, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(args), out=out)  # type: ignore[operator]
    return code, out.getvalue()


def scram_login(endpoint: str, mechanism: str, user: str, password: str) -> int:
    with RawClient(endpoint) as client:
        _cid, hs = client.request(17, 1, SaslHandshakeRequest(mechanism=mechanism))
        assert isinstance(hs, SaslHandshakeResponse) and hs.error_code == 0
        scram = scramp.ScramClient([mechanism], user, password)
        _cid, first = client.request(36, 2, SaslAuthenticateRequest(auth_bytes=scram.get_client_first().encode()))
        assert isinstance(first, SaslAuthenticateResponse)
        if first.error_code:
            return int(first.error_code)
        scram.set_server_first(bytes(first.auth_bytes).decode())
        _cid, final = client.request(36, 2, SaslAuthenticateRequest(auth_bytes=scram.get_client_final().encode()))
        assert isinstance(final, SaslAuthenticateResponse)
        return int(final.error_code)


def test_config_list_parsing() -> None:
    assert parse_config_list("SCRAM-SHA-256=[iterations=8192,password=a,b],producer_byte_rate=10") == {
        "SCRAM-SHA-256": "iterations=8192,password=a,b", "producer_byte_rate": "10"}


def test_configs_creates_describes_and_deletes_a_scram_user(cli_broker: BrokerProcess) -> None:
    bs = cli_broker.endpoints["PLAINTEXT"]
    user = ("--entity-type", "users", "--entity-name", "dan")
    code, out = run(configs_main, "--bootstrap-server", bs, "--alter", "--add-config",
                    "SCRAM-SHA-256=[password=dan-secret],SCRAM-SHA-512=[iterations=8192,password=dan-512]",
                    *user)
    assert code == 0 and out == "Completed updating config for user dan.\n", out
    assert scram_login(cli_broker.endpoints["SASL_PLAINTEXT"], "SCRAM-SHA-256", "dan", "dan-secret") == 0
    assert scram_login(cli_broker.endpoints["SASL_PLAINTEXT"], "SCRAM-SHA-512", "dan", "dan-512") == 0
    code, out = run(configs_main, "--bootstrap-server", bs, "--describe", *user)
    assert code == 0
    assert "SCRAM credential configs for user-principal 'dan' are " \
           "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192" in out
    code, _ = run(configs_main, "--bootstrap-server", bs, "--alter", "--delete-config", "SCRAM-SHA-512", *user)
    assert code == 0
    assert scram_login(cli_broker.endpoints["SASL_PLAINTEXT"], "SCRAM-SHA-512", "dan", "dan-512") == 58
    code, out = run(configs_main, "--bootstrap-server", bs, "--alter", "--add-config",
                    "SCRAM-SHA-256=[iterations=10,password=x]", *user)
    assert code == 1 and "Too few iterations" in out


def test_configs_sets_and_describes_quotas(cli_broker: BrokerProcess) -> None:
    bs = cli_broker.endpoints["PLAINTEXT"]
    code, _ = run(configs_main, "--bootstrap-server", bs, "--alter", "--add-config",
                  "producer_byte_rate=1024,request_percentage=50", "--entity-type", "users",
                  "--entity-default", "--entity-type", "clients", "--entity-name", "app")
    assert code == 0
    code, out = run(configs_main, "--bootstrap-server", bs, "--describe", "--entity-type", "clients",
                    "--entity-name", "app", "--entity-type", "users", "--entity-default")
    assert code == 0
    assert out == ("Quota configs for user-principal '<default>', client-id 'app' are "
                   "producer_byte_rate=1024.0, request_percentage=50.0\n")


def test_acls_add_list_remove(cli_broker: BrokerProcess) -> None:
    bs = cli_broker.endpoints["PLAINTEXT"]
    code, out = run(acls_main, "--bootstrap-server", bs, "--add", "--allow-principal", "User:dan",
                    "--consumer", "--topic", "orders", "--group", "billing")
    assert code == 0, out
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: " in out
    assert " \t(principal=User:dan, host=*, operation=READ, permissionType=ALLOW) " in out
    code, out = run(acls_main, "--bootstrap-server", bs, "--add", "--deny-principal", "User:*",
                    "--operation", "Write", "--operation", "AlterConfigs", "--topic", "tmp-",
                    "--resource-pattern-type", "prefixed")
    assert code == 0, out
    code, listed = run(acls_main, "--bootstrap-server", bs, "--list", "--topic", "tmp-1",
                       "--resource-pattern-type", "match")
    assert code == 0
    assert "name=tmp-, patternType=PREFIXED" in listed and "name=orders" not in listed
    assert "(principal=User:*, host=*, operation=ALTER_CONFIGS, permissionType=DENY)" in listed
    code, listed = run(acls_main, "--bootstrap-server", bs, "--list", "--principal", "User:dan")
    assert code == 0 and "name=billing" in listed and "tmp-" not in listed
    code, _ = run(acls_main, "--bootstrap-server", bs, "--remove", "--force", "--topic", "orders",
                  "--group", "billing")
    assert code == 0
    code, listed = run(acls_main, "--bootstrap-server", bs, "--list")
    assert code == 0 and "orders" not in listed and "billing" not in listed and "tmp-" in listed
