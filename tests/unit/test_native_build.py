"""The request path's compiled build (``protocol.native``): used only when current, the pure
modules otherwise, and the pure modules still tested where the compiled ones are installed."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

import protocol.frames
from protocol import native

pytestmark = pytest.mark.timeout(240)
# Bound on the pure-module re-run below (18 test files, integration ones among them, 434
# tests): 156 s at load 4-8 on this machine (17:46), so the old 220 s bound was hit once at
# load 5-9 (test_produce_backlog.py has joined since: 6 tests, ~10 s). Only a hang reaches
# 900 s.
RERUN_BOUND_S = 900

ROOT = Path(__file__).resolve().parents[2]
# The tests of each module scripts/build-request-path compiles (its unit tests; for the
# broker's, the integration tests of that part, on brokers started with the same
# environment): run again against the pure modules when the compiled ones run here.
UNIT_TESTS: dict[str, tuple[str, ...]] = {
    "protocol/primitives.py": ("unit/test_messages_primitives.py",
                               "unit/test_messages_bad_input.py"),
    "protocol/frames.py": ("unit/test_frames.py", "unit/test_frames_fastpath.py"),
    "protocol/batch_header.py": ("unit/test_records.py", "unit/test_record_validation.py"),
    "protocol/records.py": ("unit/test_records.py", "unit/test_records_fuzz.py"),
    "protocol/record_codec.py": ("unit/test_records.py",),
    "protocol/fileslice.py": ("unit/test_frames.py",),
    "broker/record_validation.py": ("unit/test_record_validation.py",),
    "broker/network/connection.py": ("integration/test_network_pipeline.py",
                                     "integration/test_network_bad_input.py",
                                     "integration/test_produce_backlog.py"),
    "broker/network/request_channel.py": ("unit/test_request_channel_workers.py",
                                          "integration/test_network_pipeline.py"),
    "broker/handlers/produce.py": ("integration/test_produce_errors.py",
                                   "integration/test_produce_fetch_versions.py"),
    "broker/handlers/fetch.py": ("integration/test_fetch.py",
                                 "integration/test_produce_fetch_versions.py"),
    "broker/network/memory_pool.py": ("integration/test_network_pipeline.py",),
    "broker/partition.py": ("unit/test_partition_isr.py", "unit/test_partition_metadata.py"),
    "broker/replica_manager.py": ("unit/test_replica_manager.py",),
    "storage/log.py": ("unit/test_storage_log.py", "unit/test_storage_faults.py"),
}


def run_python(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != native.ENV_VAR}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**environ, **env}, check=True, cwd=ROOT).stdout


def test_the_compiled_build_runs_only_where_it_was_built() -> None:
    """scripts/setup does not build it (measured slower under P5; see the README): the pure
    modules run, and ``BUILD`` says why, unless scripts/build-request-path made a current
    build, which then runs."""
    if native.COMPILED:
        assert native.BUILD.startswith("compiled by mypyc ("), native.BUILD
        assert Path(protocol.frames.__file__).is_relative_to(native.BUILD_DIR)
        assert protocol.frames.__file__.endswith(tuple(EXTENSION_SUFFIXES))
        return
    assert native.BUILD.startswith("pure Python ("), native.BUILD
    assert protocol.frames.__file__ == str(ROOT / "protocol" / "frames.py")
    setup = (ROOT / "scripts" / "setup").read_text().splitlines()
    assert not [line for line in setup
                if "build-request-path" in line and not line.lstrip().startswith("#")]


def test_every_compiled_module_has_unit_tests_listed_here() -> None:
    modules = set(compiled_modules())
    assert modules and modules <= set(UNIT_TESTS), modules - set(UNIT_TESTS)
    for tests in UNIT_TESTS.values():
        assert all((ROOT / "tests" / t).is_file() for t in tests), tests
    if native.COMPILED:
        manifest = json.loads((native.BUILD_DIR / native.MANIFEST).read_text())
        assert set(manifest["sources"]) == modules


def compiled_modules() -> list[str]:
    script = (ROOT / "scripts" / "build-request-path").read_text()
    listed = script[script.index("MODULES = ["):script.index("]", script.index("MODULES = ["))]
    return re.findall(r'"([\w/]+\.py)"', listed)


def test_no_except_name_is_bound_to_two_exception_types_in_a_compiled_function() -> None:
    """mypyc types ``e`` in ``except A as e: ... except B as e:`` as an A, and the B clause
    then raises TypeError instead of running (in the compiled build only)."""
    reused = []
    for module in compiled_modules():
        for fn in ast.walk(ast.parse((ROOT / module).read_text())):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                types: dict[str, set[str]] = {}
                for node in ast.walk(fn):
                    if isinstance(node, ast.ExceptHandler) and node.name and node.type:
                        types.setdefault(node.name, set()).add(ast.unparse(node.type))
                reused += [f"{module}:{fn.lineno} {fn.name}: {name} as {sorted(t)}"
                           for name, t in types.items() if len(t) > 1]
    assert not reused


def test_the_environment_forces_the_pure_modules() -> None:
    out = run_python("import protocol.native as n, protocol.frames as f, broker.record_validation"
                     " as v; print(n.BUILD); print(f.__file__); print(v.__file__)",
                     MINIKAFKA_REQUEST_PATH="pure")
    assert out.splitlines() == [f"pure Python ({native.ENV_VAR}=pure)",
                                str(ROOT / "protocol" / "frames.py"),
                                str(ROOT / "broker" / "record_validation.py")]
    out = run_python("import protocol.native as n; print(n.BUILD)", MINIKAFKA_REQUEST_PATH="fast")
    assert "'fast' is neither 'auto' nor 'pure'" in out


def _fake_build(tmp_path: Path) -> tuple[Path, Path]:
    """A build directory whose manifest covers one source and one dependency in ``root``."""
    root, build = tmp_path / "root", tmp_path / "build"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "hot.py").write_text("X = 1\n")
    (root / "pkg" / "dep.py").write_text("Y = 2\n")
    (build / "pkg").mkdir(parents=True)
    suffix = EXTENSION_SUFFIXES[0]
    (build / "pkg" / f"hot{suffix}").write_bytes(b"")
    (build / f"g__mypyc{suffix}").write_bytes(b"")
    (build / native.MANIFEST).write_text(json.dumps({
        "extension_suffix": suffix,
        "extensions": {"pkg.hot": f"pkg/hot{suffix}", "g__mypyc": f"g__mypyc{suffix}"},
        "sources": {"pkg/hot.py": native.sha256(root / "pkg" / "hot.py")},
        "depends": {"pkg/dep.py": native.sha256(root / "pkg" / "dep.py")},
    }))
    return root, build


def test_a_build_is_used_only_while_its_sources_and_their_imports_are_unchanged(
        tmp_path: Path) -> None:
    root, build = _fake_build(tmp_path)
    files, why = native.check(build, root)
    assert (files, why) == ({"pkg.hot": build / "pkg" / f"hot{EXTENSION_SUFFIXES[0]}",
                             "g__mypyc": build / f"g__mypyc{EXTENSION_SUFFIXES[0]}"}, "")
    (root / "pkg" / "dep.py").write_text("Y = 3\n")  # a Final constant mypyc copied, say
    assert native.check(build, root) == (
        {}, "pkg/dep.py changed since the build: rerun scripts/build-request-path")
    root, build = _fake_build(tmp_path / "2")
    (root / "pkg" / "hot.py").write_text("X = 2\n")
    assert native.check(build, root)[1].startswith("pkg/hot.py changed since the build")
    root, build = _fake_build(tmp_path / "3")
    (build / "pkg" / f"hot{EXTENSION_SUFFIXES[0]}").unlink()
    assert "is missing" in native.check(build, root)[1]


def test_a_build_for_another_interpreter_or_none_at_all_is_not_used(tmp_path: Path) -> None:
    root, build = _fake_build(tmp_path)
    manifest = json.loads((build / native.MANIFEST).read_text())
    manifest["extension_suffix"] = ".cpython-399-x86_64-linux-gnu.so"
    (build / native.MANIFEST).write_text(json.dumps(manifest))
    files, why = native.check(build, root)
    assert not files and "the build is for '.cpython-399-x86_64-linux-gnu.so'" in why
    assert native.check(tmp_path / "none", root) == (
        {}, "no compiled build (scripts/build-request-path)")


@pytest.mark.timeout(RERUN_BOUND_S + 60)
def test_the_unit_tests_of_the_compiled_modules_pass_on_the_pure_modules(tmp_path: Path) -> None:
    """Where a compiled build runs the suite, the unit tests of the compiled modules run once
    more here with MINIKAFKA_REQUEST_PATH=pure, so the pure modules stay tested. A run on
    the pure modules (no build, as CI, or forced) is that test already."""
    if not native.COMPILED:
        assert native.BUILD.startswith("pure Python (")
        assert protocol.frames.__file__.endswith(".py")
        return
    tests = sorted({f"tests/{t}" for ts in UNIT_TESTS.values() for t in ts})
    environ = {**os.environ, native.ENV_VAR: "pure"}
    check = ("import protocol.native as n, protocol.frames as f; "
             "assert not n.COMPILED and f.__file__.endswith('.py'), n.BUILD")
    subprocess.run([sys.executable, "-c", check], env=environ, cwd=ROOT, check=True, timeout=60)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         f"--basetemp={tmp_path}", *tests],
        env=environ, cwd=ROOT, capture_output=True, text=True, timeout=RERUN_BOUND_S)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " skipped" not in done.stdout, done.stdout[-2000:]
