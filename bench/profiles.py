"""Top frames of a py-spy flamegraph SVG, by own (self) samples.

py-spy writes inferno flamegraphs: one ``<g>`` per frame with ``<title>NAME (N samples,
P%)</title>`` and a ``<rect>`` carrying ``fg:x`` / ``fg:w`` (start and width in samples) and
``y`` (depth, in pixels; py-spy draws an icicle, root "all" on top). A frame's own samples are its width minus its children's widths,
children being the frames one level deeper whose span lies inside it.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from pathlib import Path
from typing import Final

_FRAME: Final[re.Pattern[str]] = re.compile(
    r"<g><title>(?P<title>[^<]*)</title><rect (?P<attrs>[^>]*)/>", re.DOTALL
)
_ATTR: Final[re.Pattern[str]] = re.compile(r'([\w:]+)="([^"]*)"')
_TITLE: Final[re.Pattern[str]] = re.compile(
    r"^(?P<name>.*) \((?P<samples>[\d,]+) samples?, [\d.]+%\)$"
)
MAX_FRAMES: Final[int] = 200_000


def top_frames(svg: Path, limit: int = 12) -> list[str]:
    """Lines "pct%  samples  frame" for the frames with the most own samples."""
    text = svg.read_text(errors="replace")
    frames: list[tuple[str, int, int, float]] = []  # name, x, w, y
    for match in _FRAME.finditer(text):
        if len(frames) >= MAX_FRAMES:
            break
        attrs = dict(_ATTR.findall(match["attrs"]))
        title = _TITLE.match(html.unescape(match["title"]))
        if title is None or "fg:x" not in attrs or "fg:w" not in attrs:
            continue
        frames.append(
            (title["name"], int(attrs["fg:x"]), int(attrs["fg:w"]), float(attrs.get("y", "0")))
        )
    if not frames:
        return ["(no frames found)"]
    root = max(frames, key=lambda f: f[2])
    ys = sorted({f[3] for f in frames})
    # The root row is at one end; children sit one row further from it.
    step = 1 if root[3] == ys[0] else -1
    by_y: dict[float, list[tuple[int, int]]] = defaultdict(list)
    for _name, x, w, y in frames:
        by_y[y].append((x, w))
    own: dict[str, int] = defaultdict(int)
    for name, x, w, y in frames:
        index = ys.index(y) + step
        children = by_y[ys[index]] if 0 <= index < len(ys) else []
        child_w = sum(cw for cx, cw in children if cx >= x and cx + cw <= x + w)
        own[name] += max(0, w - child_w)
    total = root[2]
    ranked = sorted(((k, n) for k, n in own.items() if n > 0), key=lambda kv: -kv[1])[:limit]
    return [f"{100.0 * n / total:5.1f}%  {n:7d}  {name}" for name, n in ranked]
