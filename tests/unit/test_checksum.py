"""protocol.checksum: CRC-32C bound on first use, the crc32c package's C function."""

import crc32c as crc32c_package
import pytest

from protocol import checksum


def test_crc32c_is_castagnoli_and_bound_to_the_c_function_once_used() -> None:
    # The CRC-32C check value (RFC 3720, "123456789"), and an empty input.
    assert checksum.crc32c(b"123456789") == 0xE3069283
    assert checksum.crc32c(b"") == 0
    assert checksum.crc32c(memoryview(b"xx123456789")[2:]) == 0xE3069283
    assert vars(checksum)["crc32c"] is crc32c_package.crc32c


def test_other_names_are_missing() -> None:
    with pytest.raises(AttributeError, match="crc64"):
        checksum.crc64  # noqa: B018
