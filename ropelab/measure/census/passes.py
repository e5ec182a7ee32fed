"""What one thread runs on one pass through a kernel's PTX: counts that a duplicated loop body
does not double.

The census counts instructions in the PTX text.  A gate such as "one sin and one cos per pair"
means per execution, and the text can hold more copies than a thread ever runs: LLVM unswitches
a grid-stride loop on a loop-invariant test (Numba's ``i // n_pairs`` tests ``n_pairs == 0``,
so the loop exists twice, with and without the division), and only one copy runs.  A static
count then says 4 sin/cos for a kernel that computes one sin and one cos per pair.

The rule here: the kernel is a control-flow graph of basic blocks.  Each block belongs to the
innermost loop that holds it (a natural loop, found by its back edge), or to no loop.  A *pass*
is one trip through one such region: the straight-line code outside loops once, or one
iteration of one loop's own body (its inner loops are passes of their own).  A count per pass
is the most that any path through the region, back edges removed, executes: two copies of a
body on exclusive branches count once; two sin/cos computed one after the other count twice.
A loop LLVM unrolled (k copies of the body in one trip, and beside it a remainder loop marked
``.pragma "nounroll"`` that runs the body once a trip) is counted on its remainder: one
iteration of the source loop, what the learner wrote.

* ``sincos_pass``: the most ``sin.approx`` + ``cos.approx`` on one pass;
* ``pow_pass``: the most ``lg2.approx`` (the first half of a fast-math ``pow``) on one pass;
* ``pow_per_slot``: the most ``ex2.approx`` (the half of ``pow`` that depends on the exponent)
  on one iteration of a loop that also computes a sin or a cos in its own body: a ``pow``
  for every rotated slot.  A ``pow`` in an outer loop (a grid-stride loop over work units)
  whose inner loop does the rotating is once per unit, not per slot.

:func:`count_passes` returns them from PTX text (run in the census child for a learner's
kernel, :mod:`.shipped`, beside :mod:`.counting`'s counts).  PTX this parser does not
understand (an indirect branch) gets the static counts instead, which can only be larger.
"""

from __future__ import annotations

import re

_LABEL = re.compile(r"^([$\w]+):$")


def _opcodes(ptx: str):
    """(opcode, guarded, branch target) of each instruction, and label names, in text order."""
    for raw in ptx.splitlines():
        line = raw.split("//", 1)[0].strip()
        label = _LABEL.match(line)
        if label:
            yield "label", False, label.group(1)
            continue
        if line.startswith(".pragma") and '"nounroll"' in line:
            yield "nounroll", False, None  # LLVM's mark on an unrolled loop's remainder
            continue
        if not line or line[0] in ".{}()" or line.endswith(","):
            continue
        guarded = line.startswith("@")
        if guarded:
            parts = line.split(None, 1)
            if len(parts) < 2:
                continue
            line = parts[1]
        opcode = line.split(None, 1)[0].rstrip(";")
        if not re.match(r"^[a-z]", opcode):
            continue
        target = line.split()[-1].rstrip(";") if opcode.split(".")[0] == "bra" else None
        yield opcode, guarded, target


def back_edges_and_order(succ: list) -> tuple[set, list]:
    """For a graph of successor lists (node 0 the entry): the back edges of a depth-first walk
    from the entry, and the nodes it reaches in reverse post-order (a topological order once the
    back edges are gone)."""
    if not succ:
        return set(), []
    state = [0] * len(succ)  # 0 unseen, 1 on the walk's stack, 2 done
    back, post = set(), []
    stack = [(0, iter(succ[0]))]
    state[0] = 1
    while stack:
        node, successors = stack[-1]
        nxt = next(successors, None)
        if nxt is None:
            stack.pop()
            state[node] = 2
            post.append(node)
        elif state[nxt] == 1:
            back.add((node, nxt))
        elif state[nxt] == 0:
            state[nxt] = 1
            stack.append((nxt, iter(succ[nxt])))
    return back, post[::-1]


def most_on_a_path(succ: list, order: list, back: set, weight) -> int:
    """The largest sum of ``weight(node)`` along a path, back edges removed."""
    best = [0] * len(succ)
    top = 0
    for b in order:
        here = best[b] + weight(b)
        top = max(top, here)
        for s in succ[b]:
            if (b, s) not in back:
                best[s] = max(best[s], here)
    return top


class _Graph:
    """Basic blocks (their opcodes) and successor lists, block 0 the entry."""

    def __init__(self, ptx: str):
        self.ops: list[list[str]] = [[]]
        self.succ: list[list] = []
        self.nounroll: set[int] = set()  # blocks that head a loop's remainder
        labels: dict[str, int] = {}
        pending: list[tuple] = []  # (block, target label, falls through)
        self.understood = True

        def close(targets, falls):
            pending.append((len(self.ops) - 1, targets, falls))
            self.ops.append([])

        for opcode, guarded, target in _opcodes(ptx):
            head = opcode.split(".")[0]
            if opcode == "nounroll":
                self.nounroll.add(len(self.ops) - 1)
                continue
            if opcode == "label":
                if self.ops[-1]:
                    close([], True)  # the block before a label falls into it
                labels[target] = len(self.ops) - 1
                continue
            self.ops[-1].append(opcode)
            if head == "bra":
                close([target], guarded)
            elif head in ("ret", "exit", "trap"):
                close([], guarded)
            elif head == "brx":
                self.understood = False
        pending.append((len(self.ops) - 1, [], False))
        self.succ = [[] for _ in self.ops]
        for block, targets, falls in pending:
            for t in targets:
                if t not in labels:
                    self.understood = False
                    continue
                self.succ[block].append(labels[t])
            if falls and block + 1 < len(self.ops):
                self.succ[block].append(block + 1)

    def regions(self, back: set) -> list:
        """For each block, the header of the innermost loop holding it (None: no loop)."""
        pred = [[] for _ in self.ops]
        for b, successors in enumerate(self.succ):
            for s in successors:
                pred[s].append(b)
        bodies: dict[int, set] = {}
        for tail, header in back:
            body = bodies.setdefault(header, {header})
            work = [tail]
            while work:
                b = work.pop()
                if b not in body:
                    body.add(b)
                    work.extend(pred[b])
        region = [None] * len(self.ops)
        for header, body in sorted(bodies.items(), key=lambda kv: -len(kv[1])):
            for b in body:
                region[b] = header  # smaller (inner) loops are written last and win
        return region


def _count(ops: list, heads: tuple) -> int:
    return sum(1 for op in ops if op.split(".")[0] in heads and "approx" in op.split("."))


def _remainder_twins(graph: _Graph, region: list) -> dict:
    """Loop header -> the header of its remainder loop, for loops LLVM unrolled.

    Unrolling a loop whose trip count is known only at run time, LLVM emits the body k times
    and, next to it, a remainder loop for the last trip count mod k iterations, marked
    ``.pragma "nounroll"``: the source's body once.  A pass (one iteration of the source
    loop) is then counted on the remainder.  Each unrolled loop is paired with the nearest
    remainder in program order that lies outside it (LLVM puts it just before or after)."""
    remainders = sorted(graph.nounroll & {r for r in region if r is not None})
    loops = sorted({r for r in region if r is not None} - set(remainders))
    twins, taken = {}, set()
    for header in loops:
        body = {b for b, r in enumerate(region) if r == header}
        free = [t for t in remainders if t not in taken and t not in body]
        if free:
            twin = min(free, key=lambda t: abs(t - header))
            twins[header] = twin
            taken.add(twin)
    return twins


def count_passes(ptx: str) -> dict:
    """``sincos_pass``, ``pow_pass`` and ``pow_per_slot`` of one kernel's PTX (see the module
    docstring)."""
    graph = _Graph(ptx)
    if not graph.understood:
        every = [op for ops in graph.ops for op in ops]
        return {"sincos_pass": _count(every, ("sin", "cos")), "pow_pass": _count(every, ("lg2",)),
                "pow_per_slot": _count(every, ("ex2",))}
    back, order = back_edges_and_order(graph.succ)
    region = graph.regions(back)

    def in_region(heads: tuple, r) -> int:
        return most_on_a_path(graph.succ, order, back, lambda b: _count(
            graph.ops[b], heads) if region[b] == r else 0)

    twins = _remainder_twins(graph, region)

    def per_pass(heads: tuple, regions) -> int:
        counts = []
        for r in regions:
            here = in_region(heads, r)
            twin = in_region(heads, twins[r]) if r in twins else 0
            # an unrolled body holds k copies of one iteration, its remainder holds one
            counts.append(twin if twin and here > twin and here % twin == 0 else here)
        return max(counts, default=0)

    every_region = set(region)
    rotating = {r for r in every_region if r is not None and any(
        region[b] == r and _count(ops, ("sin", "cos")) for b, ops in enumerate(graph.ops))}
    return {"sincos_pass": per_pass(("sin", "cos"), every_region),
            "pow_pass": per_pass(("lg2",), every_region),
            "pow_per_slot": per_pass(("ex2",), rotating)}
