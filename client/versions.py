"""ApiVersions negotiation: which version of each request to send to a broker.

A connection starts with ApiVersions at our highest version. A broker that does not know
that version answers, in the v0 layout, UNSUPPORTED_VERSION and its own ApiVersions range
(KIP-511); the client then asks again at the highest version both support. The answer's
ranges give, per api key, the version to send: the highest that both sides support
(``pick_version``), or ``UNSUPPORTED_VERSION`` when the ranges do not meet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from client.errors import ClientError
from protocol.errors import ErrorCode
from protocol.messages import API_NAMES
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

# api key -> (min version, max version) a broker supports
VersionRanges = Mapping[int, tuple[int, int]]

CLIENT_SOFTWARE_NAME: Final = "minikafka"
CLIENT_SOFTWARE_VERSION: Final = "0.1.0"


def api_versions_request() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE_NAME,
                              client_software_version=CLIENT_SOFTWARE_VERSION)


def ranges_of(response: ApiVersionsResponse) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def retry_version(response: ApiVersionsResponse, sent: int) -> int | None:
    """The ApiVersions version to ask again with after ``response`` to a request at ``sent``;
    None when the answer is final (an error other than UNSUPPORTED_VERSION is final too)."""
    if response.error_code != ErrorCode.UNSUPPORTED_VERSION or sent == 0:
        return None
    theirs = ranges_of(response).get(ApiVersionsRequest.API_KEY)
    if theirs is None:
        return 0  # an old broker that lists nothing: v0 is always there
    version = min(theirs[1], ApiVersionsRequest.HIGHEST_VERSION)
    return version if version < sent else 0


def pick_version(request_cls: Any, ranges: VersionRanges, our_max: int | None = None) -> int:
    """The highest version of ``request_cls`` both sides support (at most ``our_max``)."""
    key: int = request_cls.API_KEY
    ours_lo: int = request_cls.LOWEST_VERSION
    ours_hi: int = request_cls.HIGHEST_VERSION if our_max is None else min(our_max, request_cls.HIGHEST_VERSION)
    theirs = ranges.get(key)
    if theirs is None or theirs[0] > ours_hi or theirs[1] < ours_lo:
        name = API_NAMES.get(key, f"api key {key}")
        have = "none" if theirs is None else f"{theirs[0]}-{theirs[1]}"
        raise ClientError(ErrorCode.UNSUPPORTED_VERSION.name,
                          f"The broker does not support {name} (it has versions {have}, "
                          f"this client {ours_lo}-{ours_hi})")
    return min(ours_hi, theirs[1])
