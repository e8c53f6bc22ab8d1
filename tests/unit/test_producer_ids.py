"""broker.producer_ids: ids are unique, also across restarts of the manager."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.producer_ids import BLOCK_FILE_NAME, ProducerIdError, ProducerIdManager

pytestmark = pytest.mark.timeout(10)


async def test_ids_unique_across_restarts(tmp_path: Path) -> None:
    m = ProducerIdManager(tmp_path, block_size=10)
    first = [await m.generate() for _ in range(15)]
    assert first == list(range(15))
    m2 = ProducerIdManager(tmp_path, block_size=10)  # "restart": next block after 20
    second = [await m2.generate() for _ in range(3)]
    assert second == [20, 21, 22]
    assert not set(first) & set(second)


async def test_corrupt_block_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / BLOCK_FILE_NAME).write_text("garbage")
    with pytest.raises(ProducerIdError):
        ProducerIdManager(tmp_path)
