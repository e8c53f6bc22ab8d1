"""Java ``.properties`` files (client settings: what Kafka's tools take with ``--command-config``,
``--producer.config``, ``--consumer.config``), as ``java.util.Properties.load`` reads them:

- blank lines and lines whose first non-blank character is ``#`` or ``!`` are comments;
- a line ending in an odd number of backslashes continues on the next (leading blanks of
  the continuation dropped);
- the key ends at the first unescaped ``=``, ``:`` or blank; blanks and one ``=``/``:``
  after it are skipped; the rest of the line is the value;
- escapes: ``\\t \\n \\r \\f``, ``\\uXXXX``, and ``\\`` before any other character is that
  character. The last value of a repeated key wins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

MAX_FILE_BYTES: Final = 1 << 20
_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_BLANKS: Final = " \t\f"


class PropertiesError(ValueError):
    """A file that cannot be read as properties."""


def _logical_lines(text: str) -> list[str]:
    out: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(_BLANKS) if pending is not None else raw
        if pending is None and (not line.strip(_BLANKS) or line.lstrip(_BLANKS)[0] in "#!"):
            continue
        slashes = len(line) - len(line.rstrip("\\"))
        if slashes % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        out.append((pending or "") + line)
        pending = None
    if pending is not None:
        out.append(pending)
    return out


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError(f"Malformed \\uxxxx encoding: \\u{digits}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        line = line.lstrip(_BLANKS)
        i = 0
        while i < len(line):
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=:" or c in _BLANKS:
                break
            i += 1
        key = line[:i]
        rest = line[i:].lstrip(_BLANKS)
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(_BLANKS)
        props[_unescape(key)] = _unescape(rest)
    return props


def load_properties(path: str | Path) -> dict[str, str]:
    """The properties in ``path``; PropertiesError naming the file when it cannot be read."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise PropertiesError(f"{p}: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise PropertiesError(f"{p}: larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")  # what Properties.load(InputStream) reads
    return parse_properties(text)
