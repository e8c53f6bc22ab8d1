"""Every (api key, version) pair the broker advertises, sent to a real broker and checked for
a semantically right answer (the cases: tests/integration/every_api_cases.py).

One test id per pair, taken from the handler registry that ApiVersions answers from
(``broker.handlers.REGISTRY``); ``test_advertised_pairs_all_have_a_case`` checks the running
broker's ApiVersions against the cases, so a version advertised without a case fails by name.
One broker for the module, with ``PROPS`` (two listeners, the ACL authorizer on).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from protocol.messages.api_versions import ApiVersionsRequest
from tests.integration.broker_process import BrokerProcess
from tests.integration.every_api_cases import CASES, PAIRS, PROPS, Env, open_env, pair_id

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    proc = BrokerProcess(tmp_path_factory.mktemp("every-api"), dict(PROPS), name="every-api")
    proc.start()
    try:
        with open_env(proc) as e:
            yield e
    finally:
        proc.stop()


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_api_version(env: Env, pair: tuple[int, int]) -> None:
    api_key, version = pair
    assert api_key in CASES, f"no case for API key {api_key} ({pair_id(pair)})"
    CASES[api_key](env, version)


def test_advertised_pairs_all_have_a_case(env: Env) -> None:
    resp = env.latest(ApiVersionsRequest(client_software_name="every-api", client_software_version="1"))
    advertised = {(k.api_key, v) for k in resp.api_keys for v in range(k.min_version, k.max_version + 1)}
    missing = sorted(p for p in advertised if p[0] not in CASES)
    assert not missing, f"advertised without a case: {missing}"
    assert advertised == set(PAIRS), sorted(advertised ^ set(PAIRS))
