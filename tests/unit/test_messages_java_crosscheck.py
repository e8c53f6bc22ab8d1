"""Cross-check every generated message and version with Apache Kafka's own Java classes.

Values drawn from our schema-derived strategies are encoded by us; Kafka 3.9.1's generated
``*Data`` classes (kafka-clients, group-coordinator jars) read the bytes, must consume all of
them, and write the message back: the bytes Java writes must equal ours exactly. Request and
response header versions for every (api key, version) must equal Kafka's ``ApiKeys``. One JVM
runs every case (source-file launch of a small reader program).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.codegen import MessageSpec
from protocol.frames import request_header_version, response_header_version
from tests.unit.message_strategies import all_specs, message_strategy

ROOT = Path(__file__).resolve().parents[2]
LIBS = ROOT / "tools" / "kafka-jars" / "libs"
EXAMPLES_PER_VERSION = 3

JAVA_SOURCE = r"""
import java.io.*;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.*;
import org.apache.kafka.common.protocol.ApiKeys;

public class CrossCheck {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in), 1 << 16);
        PrintStream out = new PrintStream(new BufferedOutputStream(System.out, 1 << 16), false);
        HexFormat hex = HexFormat.of();
        String line;
        while ((line = in.readLine()) != null) {
            String[] p = line.split(" ", -1);
            try {
                if (p[0].equals("header")) {
                    ApiKeys k = ApiKeys.forId(Short.parseShort(p[1]));
                    short v = Short.parseShort(p[2]);
                    out.println("H " + k.requestHeaderVersion(v) + " " + k.responseHeaderVersion(v));
                    continue;
                }
                Message m;
                if (p[0].startsWith("api:")) {
                    String[] q = p[0].split(":");
                    ApiMessageType t = ApiMessageType.fromApiKey(Short.parseShort(q[1]));
                    m = q[2].equals("request") ? t.newRequest() : t.newResponse();
                } else {
                    m = (Message) Class.forName(p[0]).getDeclaredConstructor().newInstance();
                }
                short v = Short.parseShort(p[1]);
                ByteBuffer buf = ByteBuffer.wrap(hex.parseHex(p[2]));
                m.read(new ByteBufferAccessor(buf), v);
                if (buf.hasRemaining()) {
                    out.println("ERR " + buf.remaining() + " bytes left unread");
                    continue;
                }
                ObjectSerializationCache cache = new ObjectSerializationCache();
                ByteBuffer o = ByteBuffer.allocate(m.size(cache, v));
                m.write(new ByteBufferAccessor(o), cache, v);
                out.println("OK " + hex.formatHex(o.array()));
            } catch (Throwable e) {
                out.println("ERR " + e.toString().replace('\n', ' '));
            }
        }
        out.flush();
    }
}
"""


def java_class(spec: MessageSpec) -> str:
    if spec.kind in ("request", "response"):
        return f"api:{spec.api_key}:{spec.kind}"
    if spec.schema_file.startswith("internal/"):
        return f"org.apache.kafka.coordinator.group.generated.{spec.name}"
    suffix = "Data" if spec.kind == "header" else ""
    return f"org.apache.kafka.common.message.{spec.name}{suffix}"


def _examples(spec: MessageSpec) -> list[tuple[int, bytes]]:
    """EXAMPLES_PER_VERSION encoded messages for each version of ``spec``."""
    out: list[tuple[int, bytes]] = []

    @settings(max_examples=EXAMPLES_PER_VERSION, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def collect(data: Any) -> None:
        for version in spec.versions:
            msg = data.draw(message_strategy(spec.name, version))
            out.append((version, msg.encode(version)))

    collect()
    return out


@pytest.mark.java
@pytest.mark.timeout(240)
def test_kafka_java_reads_and_rewrites_our_bytes_exactly(tmp_path: Path) -> None:
    if not list(LIBS.glob("kafka-clients-*.jar")):
        pytest.skip("Kafka jars not fetched: run tools/fetch-kafka-jars")
    cases: list[tuple[str, int, bytes]] = []
    lines: list[str] = []
    headers: list[tuple[int, int]] = []
    for spec in all_specs():
        for version, wire in _examples(spec):
            cases.append((spec.name, version, wire))
            lines.append(f"{java_class(spec)} {version} {wire.hex()}")
        if spec.kind == "request":
            assert spec.api_key is not None
            headers += [(spec.api_key, v) for v in spec.versions]
    lines += [f"header {key} {version}" for key, version in headers]
    source = tmp_path / "CrossCheck.java"
    source.write_text(JAVA_SOURCE)
    result = subprocess.run(
        ["java", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", f"{LIBS}/*", str(source)],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=200,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    answers = result.stdout.splitlines()
    assert len(answers) == len(cases) + len(headers)
    # Header versions per (api key, version), Kafka's exceptions included.
    for (key, version), answer in zip(headers, answers[len(cases):], strict=True):
        ours = f"H {request_header_version(key, version)} {response_header_version(key, version)}"
        assert answer == ours, (key, version)
    failures = []
    for (name, version, wire), answer in zip(cases, answers[: len(cases)], strict=True):
        if answer != f"OK {wire.hex()}":
            failures.append(f"{name} v{version}: ours {wire.hex()} java {answer[:300]}")
    pairs = {(n, v) for n, v, _ in cases}
    print(f"Kafka Java cross-check: {len(cases)} messages, {len(pairs)} (message, version) "
          f"pairs, {len(failures)} failures; {len(headers)} header versions agree")
    assert not failures, "\n".join(failures[:40])
    assert len(pairs) == sum(len(s.versions) for s in all_specs())
