"""R11 (routing): lossless shortest paths stay up-down, so the channel dependency graph has no cycle.

Tiers come from the spec (leaf/tor 0, spine 1, core 2, or ``tier``). A path between two edge switches is up-down
when its tiers rise strictly and then fall strictly; a lateral hop (equal tiers) or a valley (down then up)
creates the bounce paths that form cyclic buffer dependencies (Hu et al., Tagger, CoNEXT 2017). The channel
dependency graph over all shortest paths is also searched for a cycle directly.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.fabric.spec import FabricSpec
from tensorfabric.findings import Finding

RULE = "routing.not-up-down"


def _graph(spec: FabricSpec) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {s.name: set() for s in spec.switches}
    for link in spec.links:
        a, b = link.a.partition(":")[0], link.b.partition(":")[0]
        if link.lossless and a in graph and b in graph:
            graph[a].add(b)
            graph[b].add(a)
    return graph


def _distances(graph: dict[str, set[str]], start: str) -> dict[str, int]:
    dist = {start: 0}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph[node]):
            if nxt not in dist:
                dist[nxt] = dist[node] + 1
                queue.append(nxt)
    return dist


def _find_cycle(deps: dict[tuple[str, str], set[tuple[str, str]]]) -> list[tuple[str, str]] | None:
    colour: dict[tuple[str, str], int] = {}
    stack: list[tuple[str, str]] = []

    def visit(node: tuple[str, str]) -> list[tuple[str, str]] | None:
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(deps.get(node, ())):
            if colour.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in colour:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        colour[node] = 2
        return None

    for node in sorted(deps):
        if node not in colour:
            found = visit(node)
            if found:
                return found
    return None


@rule(RULE, "error", "R11", "a lossless shortest path is not up-down (cyclic buffer dependency possible)")
def check(ctx: LintContext) -> Iterator[Finding]:
    spec = ctx.spec
    if spec is None:
        return
    tier = {s.name: s.effective_tier for s in spec.switches}
    graph = _graph(spec)
    hosts = {h.name for h in spec.hosts}
    ends = [(lk.a.partition(":")[0], lk.b.partition(":")[0]) for lk in spec.links]
    edge_switches = sorted({x for a, b in ends for x, y in ((a, b), (b, a)) if x in graph and y in hosts})
    dist = {name: _distances(graph, name) for name in graph}
    deps: dict[tuple[str, str], set[tuple[str, str]]] = {}
    bad: dict[tuple[str, str, str], tuple[str, str]] = {}
    for src in edge_switches:
        for dst in edge_switches:
            total = dist[src].get(dst)
            if src == dst or total is None:
                continue
            # u -> v -> w lies on a shortest src..dst path iff d(src,u) + 2 + d(w,dst) == d(src,dst);
            # only switches v on some shortest path (d(src,v) + d(v,dst) == total) can be the middle.
            from_src, to_dst = dist[src], dist[dst]
            for v in graph:
                dv = from_src.get(v)
                if dv is None or dv + to_dst.get(v, total + 1) != total:
                    continue
                before = [u for u in graph[v] if from_src.get(u) == dv - 1]
                after = [w for w in graph[v] if to_dst.get(w) == total - dv - 1]
                for u in before:
                    for w in after:
                        deps.setdefault((u, v), set()).add((v, w))
                        lateral = tier[u] == tier[v] or tier[v] == tier[w]
                        valley = tier[v] < tier[u] and tier[v] < tier[w]
                        if lateral or valley:
                            bad.setdefault((u, v, w), (src, dst))
            if total == 1 and tier[src] == tier[dst]:
                bad.setdefault((src, dst, dst), (src, dst))
    for (u, v, w), (src, dst) in sorted(bad.items()):
        hops = f"{u} -> {v}" + (f" -> {w}" if w != v else "")
        yield finding(RULE, f"path {src} .. {dst}", f"shortest lossless path uses {hops} (tiers "
                      f"{tier[u]}, {tier[v]}{', ' + str(tier[w]) if w != v else ''}): not up-down",
                      {"hops": [u, v] + ([w] if w != v else []), "tiers": [tier[u], tier[v], tier[w]]},
                      "remove the lateral link, mark it lossless: false, or remap its traffic to a lossy queue")
    cycle = _find_cycle(deps)
    if cycle:
        chain = " => ".join(f"{a}->{b}" for a, b in cycle)
        yield finding(RULE, "fabric", f"cyclic buffer dependency among lossless links: {chain}",
                      {"cycle": [f"{a}->{b}" for a, b in cycle]}, "keep lossless routes up-down (Tagger, CoNEXT 2017)")
