"""Reading a vmprof profile: top functions by self and total time, collapsed stacks, a flame graph.

No maintained Python library renders a flame graph from arbitrary stacks, so the SVG is drawn
here, and the standard collapsed-stack text (``a;b;c 12``, the input of flamegraph.pl, inferno and
speedscope) is written next to it for any other viewer.
"""
from __future__ import annotations

import collections
import hashlib
import os
from typing import Dict, List, Tuple
from xml.sax.saxutils import escape, quoteattr

Stacks = Dict[Tuple[str, ...], int]

WIDTH = 1200
ROW = 17
PAD = 10


def frame_name(raw: str) -> str:
    """``py:func:line:path`` as ``func (file.py:line)``."""
    parts = raw.split(":", 3)
    if len(parts) == 4 and parts[0] == "py":
        return f"{parts[1]} ({os.path.basename(parts[3])}:{parts[2]})"
    return raw


def read_stacks(path: str) -> Stacks:
    """Sample counts per call stack (root first) of a vmprof file."""
    import vmprof

    with open(path, "rb"):
        pass  # a file that can't be read is said so (OSError, naming it)
    try:
        stats = vmprof.read_profile(path)
    except Exception as exc:  # noqa: BLE001 - vmprof's reader fails as it goes on other bytes
        raise ValueError(f"{path} is not a vmprof profile, or is cut short (vmprof's reader: "
                         f"{type(exc).__name__}: {exc}); profiles are written by SIGUSR2 to "
                         f"profiler.dir") from None
    names = stats.adr_dict or {}
    stacks: Stacks = collections.Counter()
    for profile in stats.profiles:
        stack: List[str] = []
        for addr in profile[0]:
            raw = names.get(addr) if isinstance(addr, int) and addr > 0 else None
            if raw is None:
                continue  # line numbers and JIT addresses without a name
            name = frame_name(raw)
            if not stack or stack[-1] != name:  # PyPy repeats a frame around JIT entry
                stack.append(name)
        if stack:
            stacks[tuple(stack)] += int(profile[1]) if len(profile) > 1 else 1
    return dict(stacks)


def top(stacks: Stacks, limit: int = 20) -> Tuple[int, List[Tuple[str, int, int]]]:
    """(samples, [(function, self samples, total samples)]) sorted by self time."""
    self_n: Dict[str, int] = collections.Counter()
    total_n: Dict[str, int] = collections.Counter()
    samples = 0
    for stack, n in stacks.items():
        samples += n
        self_n[stack[-1]] += n
        for name in set(stack):
            total_n[name] += n
    rows = sorted(((name, self_n.get(name, 0), total) for name, total in total_n.items()),
                  key=lambda r: (-r[1], -r[2], r[0]))
    return samples, rows[:limit]


def collapsed(stacks: Stacks) -> str:
    return "".join(f"{';'.join(s)} {n}\n" for s, n in sorted(stacks.items()))


def _tree(stacks: Stacks) -> dict:
    root: dict = {"n": 0, "kids": {}}
    for stack, n in stacks.items():
        root["n"] += n
        node = root
        for name in stack:
            node = node["kids"].setdefault(name, {"n": 0, "kids": {}})
            node["n"] += n
    return root


def _colour(name: str) -> str:
    h = hashlib.md5(name.encode()).digest()
    return f"rgb({205 + h[0] % 50},{80 + h[1] % 120},{h[2] % 60})"


def svg(stacks: Stacks, title: str = "streamer profile") -> str:
    """A flame graph (root at the bottom, width proportional to samples) as one SVG document."""
    root = _tree(stacks)
    total = max(root["n"], 1)
    scale = (WIDTH - 2 * PAD) / total
    frames: List[Tuple[int, float, float, str, int]] = []

    def walk(node: dict, depth: int, x: float) -> int:
        deepest = depth
        for name, kid in sorted(node["kids"].items()):
            w = kid["n"] * scale
            frames.append((depth, x, w, name, kid["n"]))
            deepest = max(deepest, walk(kid, depth + 1, x))
            x += w
        return deepest

    depth = walk(root, 0, PAD)
    height = (depth + 1) * ROW + 3 * PAD + 20
    out = [f'<?xml version="1.0" encoding="UTF-8"?>\n'
           f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="monospace" font-size="11">',
           f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#fdfdf6"/>',
           f'<text x="{WIDTH // 2}" y="{PAD + 12}" text-anchor="middle" font-size="15">'
           f'{escape(title)} ({root["n"]} samples)</text>']
    for level, x, w, name, n in frames:
        if w < 0.3:
            continue
        y = height - PAD - (level + 1) * ROW
        label = f"{name}: {n} samples, {100.0 * n / total:.1f}%"
        out.append(f'<g><title>{escape(label)}</title>'
                   f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{ROW - 1}" '
                   f'fill={quoteattr(_colour(name))} rx="2"/>')
        chars = int(w / 7)
        if chars >= 4:
            text = name if len(name) <= chars else name[:chars - 2] + ".."
            out.append(f'<text x="{x + 3:.2f}" y="{y + ROW - 5}">{escape(text)}</text>')
        out.append("</g>")
    out.append("</svg>\n")
    return "\n".join(out)


def report(path: str, svg_path: str, collapsed_path: str, limit: int = 20) -> str:
    """Reads a profile, writes the SVG and the collapsed stacks; returns the top table as text."""
    stacks = read_stacks(path)
    if not stacks:
        raise ValueError(f"{path} holds no samples: was the profile stopped right after it "
                         f"started, or is it not a vmprof file?")
    with open(svg_path, "w", encoding="utf-8") as fh:
        fh.write(svg(stacks, os.path.basename(path)))
    with open(collapsed_path, "w", encoding="utf-8") as fh:
        fh.write(collapsed(stacks))
    samples, rows = top(stacks, len(stacks) * 64)
    lines = [f"{samples} samples in {path}"]
    for title, order in (("by self time", rows),
                         ("by total time", sorted(rows, key=lambda r: (-r[2], -r[1], r[0])))):
        lines.append(f"\ntop functions {title}:\n{'self%':>7} {'total%':>7}  function")
        for name, self_n, total_n in order[:limit]:
            lines.append(f"{100.0 * self_n / samples:7.1f} {100.0 * total_n / samples:7.1f}  {name}")
    lines.append("")
    lines.append(f"flame graph: {svg_path}")
    lines.append(f"collapsed stacks: {collapsed_path}")
    return "\n".join(lines)
