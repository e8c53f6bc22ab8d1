"""The container files: the Dockerfile passes hadolint, docker-compose.yml validates with
``docker-compose config -q``, and the broker properties both pass on are valid."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from tests.integration.broker_process import REPO_ROOT

pytestmark = pytest.mark.timeout(60)

VENV_BIN = REPO_ROOT / ".venv" / "bin"


def tool(name: str) -> str:
    found = shutil.which(name) or (str(VENV_BIN / name) if (VENV_BIN / name).exists() else None)
    assert found is not None, f"{name} is not installed: run ./scripts/setup"
    return found


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run([tool("hadolint"), "--no-color", str(REPO_ROOT / "Dockerfile")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_does_flag_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN pip install minikafka\n")
    result = subprocess.run([tool("hadolint"), "--no-color", str(bad)], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode != 0 and "DL3006" in result.stdout  # untagged base image


def test_docker_compose_file_is_valid() -> None:
    result = subprocess.run([tool("docker-compose"), "-f", str(REPO_ROOT / "docker-compose.yml"),
                             "config", "-q"], capture_output=True, text=True, timeout=30,
                            cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    config = subprocess.run([tool("docker-compose"), "-f", str(REPO_ROOT / "docker-compose.yml"),
                             "config"], capture_output=True, text=True, timeout=30, cwd=REPO_ROOT)
    assert "9092" in config.stdout and "/data" in config.stdout


def test_dockerfile_broker_properties_are_valid() -> None:
    text = (REPO_ROOT / "Dockerfile").read_text()
    match = re.search(r"^ENTRYPOINT (\[.*?\])$", text, re.S | re.M)
    assert match is not None
    argv = json.loads(match.group(1).replace("\\\n", ""))
    assert argv[:2] == ["minikafka", "broker"]
    overrides = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--override"]
    config = BrokerConfig.load(None, overrides)
    assert config.listeners[0].port == 9092
    assert str(config.log_dir) == "/data"
    assert "EXPOSE 9092" in text and 'VOLUME ["/data"]' in text
