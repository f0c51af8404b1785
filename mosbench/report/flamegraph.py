"""A differential flame graph: the profile at the most cores, coloured by how each frame changed from
the fewest, both in CPU µs per unit of work (so a frame that grew with cores is red however the
throughput moved; one that shrank is blue). Between two runs the same graph: side B's profile coloured
by its change from side A's (analysis/explain). Brendan Gregg's layout: the outermost frame at the bottom,
callees stacked above, a frame as wide as its share of the time, siblings in name order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from mosbench.analysis.profiles import IDLE_COMMS, Profile

WIDTH = 1100
ROW = 16
MIN_SHARE = 0.002  # frames narrower than this share of the whole are left out (unreadable anyway)
MAX_DEPTH = 48  # deeper frames are left out: an interpreter's recursion would otherwise fill the page
FONT = 11
CHAR_W = 6.4  # of the font above, to cut labels to their frame


@dataclass
class Node:
    name: str
    high: float = 0.0  # µs per unit, inclusive
    low: float = 0.0
    children: dict[str, Node] = field(default_factory=dict)

    def child(self, name: str) -> Node:
        return self.children.setdefault(name, Node(name))


def tree(low: Profile, high: Profile) -> Node:
    root = Node("all")
    for prof, attr in ((high, "high"), (low, "low")):
        for stack, n in prof.stacks.items():
            frames = stack.split(";")
            if frames[0] in IDLE_COMMS:
                continue
            us = prof.us_per_unit(n)
            node = root
            setattr(node, attr, getattr(node, attr) + us)
            for f in frames:
                node = node.child(f)
                setattr(node, attr, getattr(node, attr) + us)
    return root


def _colour(delta: float, scale: float) -> str:
    """Red for growth, blue for shrinkage, pale for neither; scale is the largest |delta|."""
    x = min(abs(delta) / scale, 1.0) if scale > 0 else 0.0
    fade = int(235 - 170 * x)
    return f"rgb(235,{fade},{fade})" if delta > 0 else f"rgb({fade},{fade},235)" if delta < 0 else "rgb(225,225,225)"


def _at(side: int | str, cores: str = " cores") -> str:
    """Where a side was measured: "at 2 cores" along a sweep, "in THP always" between runs."""
    return f"at {side}{cores}" if isinstance(side, int) else f"in {side}"


def svg(low: Profile, high: Profile, low_cores: int | str, high_cores: int | str, unit: str) -> str | None:
    """The graph of `high` coloured by its change from `low`; each side named by its core count (a sweep)
    or its label (two runs)."""
    root = tree(low, high)
    if root.high <= 0:
        return None
    rects: list[tuple[int, float, float, Node]] = []  # depth, x, width, node
    deltas: list[float] = []

    def place(node: Node, depth: int, x: float) -> None:
        for name in sorted(node.children):
            c = node.children[name]
            w = c.high / root.high
            if w >= MIN_SHARE and depth < MAX_DEPTH:
                rects.append((depth, x, w, c))
                deltas.append(c.high - c.low)
                place(c, depth + 1, x)
            x += w

    place(root, 0, 0.0)
    scale = max((abs(d) for d in deltas), default=0.0)
    depth = max((r[0] for r in rects), default=0) + 1
    height = (depth + 3) * ROW
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="monospace" font-size="{FONT}">',
           f'<text x="4" y="{ROW - 3}" font-size="{FONT + 1}">CPU µs per {escape(unit)} {escape(_at(high_cores))} '
           f'({root.high:.3g} in all), coloured by the change from {escape(str(low_cores))} '
           f'({root.low:.3g}): red grew, blue shrank</text>']
    for d, x, w, node in rects:
        px, pw = x * WIDTH, w * WIDTH
        y = height - (d + 1) * ROW - 2
        change = node.high - node.low
        tip = (f"{node.name}: {node.high:.4g} µs/{unit} {_at(high_cores)}, {node.low:.4g} {_at(low_cores, '')} "
               f"({'+' if change >= 0 else ''}{change:.4g}); {w:.1%} of the time")
        label = node.name if len(node.name) * CHAR_W < pw - 4 else node.name[:max(int((pw - 4) / CHAR_W) - 2, 0)] + ".."
        out.append(f'<g><title>{escape(tip)}</title><rect x="{px:.1f}" y="{y}" width="{max(pw - 0.5, 0.5):.1f}" '
                   f'height="{ROW - 1}" fill="{_colour(change, scale)}"/>'
                   + (f'<text x="{px + 2:.1f}" y="{y + ROW - 4}">{escape(label)}</text>' if pw > 3 * CHAR_W else "")
                   + "</g>")
    out.append("</svg>")
    return "\n".join(out)
