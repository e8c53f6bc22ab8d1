"""Runs the code blocks of a user-guide page (``docs/*.md``), in order, as a reader would.

A page is Markdown; each fenced block (```lang) is run according to its language, and a
directive in an HTML comment on the line just before the fence (invisible when rendered)
says more: ``<!-- test: background -->``, ``<!-- test: file=server.properties -->``, ...

- ``sh``: run by bash (``set -euo pipefail``) in the page's working directory, with the
  venv's ``minikafka`` first on PATH; must exit 0, or the code given by ``expect-exit=N``.
  ``background``: started and left running until the end of the page (then SIGTERM, and it
  must exit 0), once every port it names accepts connections. ``docker``: ``docker`` and
  ``docker-compose`` are shims that check what they are given (``docker-compose config``
  on the repository's compose file, the service and the profile exist) instead of needing
  a Docker engine.
- ``python``: executed in the page's namespace (blocks share it, as in one session);
  ``pytest=PATH``: written as a test file (PATH under the working directory; a bare name
  goes into ``tests/``) and run, with the page's other ``pytest`` blocks of the same top
  directory, by a pytest subprocess with that directory as its root (``file=`` blocks may
  put a ``pytest.ini`` there; the plugin comes from the installed package); ``spark``: executed in a namespace shared by every Spark page (one session).
- ``properties``, ``json``, ``yaml``, ``text`` with ``file=NAME``: written to NAME in the
  working directory for later blocks. ``properties`` without a file is broker configuration
  and must validate (``BrokerConfig.from_properties``, what start-up does first).
- ``text`` with ``output``: what the previous block printed must contain these lines, in
  order (each matches a whole line; ``*`` stands for anything, nothing else is special).

Addresses: ports 9092-9099 in any block are mapped to free ports of 127.0.0.1, the same
mapping for the whole page, so pages never depend on a fixed port being free.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
VENV_BIN = Path(sys.executable).parent
BLOCK_TIMEOUT_S = 180
READY_TIMEOUT_S = 60
_FENCE = re.compile(r"^(```+)\s*([\w+-]*)\s*$")
_DIRECTIVE = re.compile(r"^<!--\s*test:\s*(.*?)\s*-->\s*$")
_PORT = re.compile(r"(?<!\d)(909[2-9])(?!\d)")
KNOWN = {"sh", "python", "properties", "json", "yaml", "text"}


@dataclass
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def parse(path: Path) -> list[Block]:
    """Every fenced block of a page with the directive just before it, if any."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        fence, lang = match.group(1), match.group(2) or "text"
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), None)
        if end is None:
            raise AssertionError(f"{path.name}:{i + 1}: unclosed code block")
        options: dict[str, str] = {}
        directive = _DIRECTIVE.match(lines[i - 1]) if i else None
        if directive is not None:
            for word in shlex.split(directive.group(1)):
                key, _, value = word.partition("=")
                options[key] = value
        blocks.append(Block(path.name, i + 1, lang, "\n".join(lines[i + 1:end]) + "\n", options))
        i = end + 1
    return blocks


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PageRun:
    """The state of one page while its blocks run: working directory, port mapping,
    background processes, the Python namespace, the last output."""

    def __init__(self, workdir: Path, namespace: dict[str, Any] | None = None) -> None:
        self.workdir = workdir
        self.ports: dict[str, str] = {}
        self.background: list[tuple[Block, subprocess.Popen[bytes], Path]] = []
        self.namespace: dict[str, Any] = namespace if namespace is not None else {}
        self.last_output = ""
        self.pytest_blocks: list[Block] = []
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
        self.env["PATH"] = f"{VENV_BIN}{os.pathsep}{self.env.get('PATH', '')}"
        self.env["MINIKAFKA_LOG_LEVEL"] = "WARN"

    def substitute(self, text: str) -> str:
        def port(match: re.Match[str]) -> str:
            return self.ports.setdefault(match.group(1), str(free_port()))
        return _PORT.sub(port, text)

    # -- running ---------------------------------------------------------------------

    def run(self, block: Block) -> None:
        if block.lang not in KNOWN:
            raise AssertionError(f"{block.where}: no way to run a ```{block.lang} block")
        code = self.substitute(block.code)
        if "file" in block.options:
            target = self.workdir / block.options["file"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code)
            if block.lang == "sh":
                target.chmod(0o755)
            return
        handler = getattr(self, f"_run_{block.lang}")
        try:
            handler(block, code)
        except AssertionError as exc:
            raise AssertionError(f"{block.where}: {exc}") from None

    def _run_text(self, block: Block, code: str) -> None:
        if "output" not in block.options:
            raise AssertionError("a ```text block needs file=NAME or output")
        got = iter(self.last_output.splitlines())
        for line in (line for line in code.splitlines() if line.strip()):
            pattern = re.compile(".*".join(map(re.escape, line.split("*"))))
            if not any(pattern.fullmatch(out) for out in got):
                raise AssertionError(f"output has no line {line!r} (after the lines matched "
                                     f"before it):\n--- output ---\n{self.last_output}")

    def _run_properties(self, block: Block, code: str) -> None:
        from broker.config import BrokerConfig
        from storage.checkpoints import read_properties

        path = self.workdir / f".block-{block.line}.properties"
        path.write_text(code)
        BrokerConfig.from_properties(read_properties(path))

    def _run_json(self, block: Block, code: str) -> None:
        raise AssertionError("a ```json block needs file=NAME")

    def _run_yaml(self, block: Block, code: str) -> None:
        raise AssertionError("a ```yaml block needs file=NAME")

    def _run_python(self, block: Block, code: str) -> None:
        if "pytest" in block.options:
            self.pytest_blocks.append(block)
            return
        out = io.StringIO()
        cwd = os.getcwd()
        os.chdir(self.workdir)
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, block.where, "exec"), self.namespace)
        finally:
            os.chdir(cwd)
            self.last_output = out.getvalue()

    def _run_sh(self, block: Block, code: str) -> None:
        env = dict(self.env)
        if "docker" in block.options:
            env["PATH"] = f"{Path(__file__).parent / 'docker_shims'}{os.pathsep}{env['PATH']}"
            env["DOC_REPO"] = str(REPO)
        script = "set -euo pipefail\n" + code
        if "background" in block.options:
            self._start_background(block, code, script, env)
            return
        result = subprocess.run(["bash", "-c", script], cwd=self.workdir, env=env,
                                capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S,
                                check=False)
        self.last_output = result.stdout + result.stderr
        expected = int(block.options.get("expect-exit", "0"))
        if result.returncode != expected:
            raise AssertionError(f"exit {result.returncode} (expected {expected}):\n"
                                 f"{self.last_output}")

    def _start_background(self, block: Block, code: str, script: str, env: dict[str, str]) -> None:
        log = self.workdir / f".background-{block.line}.log"
        with open(log, "wb") as out:
            # One command (``VAR=value cmd ...``), run by exec so that the SIGTERM at the
            # end reaches it and its own exit code is what is checked.
            proc = subprocess.Popen(["bash", "-c", f"exec env {code}"],
                                    cwd=self.workdir, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.background.append((block, proc, log))
        ports = [int(self.ports[p]) for p in _PORT.findall(block.code)]
        if not ports:
            raise AssertionError("a background block must name the port it serves")
        deadline = time.monotonic() + READY_TIMEOUT_S
        for port in ports:
            while True:
                if proc.poll() is not None:
                    raise AssertionError(f"exited with {proc.returncode}:\n{log.read_text()}")
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"port {port} not served after {READY_TIMEOUT_S} s:\n"
                                         f"{log.read_text()}")
                time.sleep(0.05)

    def run_pytest_blocks(self) -> None:
        projects: dict[str, list[Block]] = {}
        for block in self.pytest_blocks:
            name = block.options["pytest"] or f"test_block_{block.line}.py"
            path = Path(name if "/" in name else f"tests/{name}")
            target = self.workdir / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(self.substitute(block.code))
            projects.setdefault(path.parts[0], []).append(block)
        for top, blocks in projects.items():
            root = self.workdir / top
            result = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore",
                 "--rootdir", str(root), "-o", "timeout=120", "-rfEs"],
                cwd=root, env=self.env, capture_output=True, text=True, timeout=300,
                check=False)
            where = ", ".join(b.where for b in blocks)
            if result.returncode != 0:
                raise AssertionError(f"pytest blocks {where} failed:\n{result.stdout}\n"
                                     f"{result.stderr}")
            if " skipped" in result.stdout or "no tests ran" in result.stdout:
                raise AssertionError(f"pytest blocks {where} skipped or ran nothing:\n"
                                     f"{result.stdout}")

    def close(self) -> None:
        """Stop the background processes (SIGTERM to each one's process group); each must
        exit 0 (an ordered shutdown)."""
        problems = []
        for block, proc, log in reversed(self.background):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                code = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait(timeout=30)
            if code != 0:
                problems.append(f"{block.where}: exited with {code}:\n{log.read_text()}")
        self.background.clear()
        if problems:
            raise AssertionError("\n".join(problems))


def run_page(path: Path, workdir: Path, namespace: dict[str, Any] | None = None) -> list[Block]:
    """Run every block of ``path`` in ``workdir``; the blocks run."""
    blocks = parse(path)
    page = PageRun(workdir, namespace)
    try:
        for block in blocks:
            page.run(block)
        page.run_pytest_blocks()
    finally:
        page.close()
    return blocks
