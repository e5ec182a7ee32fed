"""What a kernel's PTX says about its time: a pure function of the PTX text, no GPU.

:func:`analyze` reads the one ``.entry`` of a numba-compiled module and returns plain counts
the time model (:mod:`.features`) turns into times:

*Memory rounds.*  A warp issues in program order and stops at the first instruction whose
operand is a load still in flight.  ``ptxas`` hoists independent loads inside a basic block
above such waits, but not across a branch, and never a global load above an earlier global
store (``x`` and ``out`` may be the same memory).  So each global load gets an *issue round*
(how many memory latencies the warp has waited before it can issue) and a *value round*
(issue + 1):

- issue round = the largest value round among its address and guard operands, the waits
  already taken in earlier basic blocks, and the data round of every earlier global store;
- a ``bar.sync`` waits for everything issued before it.

``rounds`` is the largest value round: the latencies one pass through the kernel pays in
series.  ``first_round_loads`` counts the loads issued before any wait (round 0): what one
thread keeps in flight.  A loop (a branch back to an earlier label) pays ``rounds_loop``
latencies per iteration: its loads' value rounds minus their issue rounds, at least one when
the loop loads anything.

*Branches.*  A warp whose lanes disagree on a branch (:mod:`.diverge` evaluates the guard for
one warp's lanes) runs both arms in turn: the second arm's loads wait for the first's, and its
traffic and instructions add to the first's.  A warp that goes one way together runs one arm:
``sectors_path_out``, ``lines_path_out`` and ``<class>_path_out`` are the heaviest path's
outside loops, arms chained where they split a warp; ``arm_share_out`` and ``arm_share_loop``
are the share of the useful bytes one *thread's* path moves (one arm either way).
libdevice's huge-argument path of ``sin`` and ``cos`` (:data:`HUGE_ANGLE`), which no timing
case takes, is left out of every count (``cold``: its instructions).

*Access pattern.*  Each register carries its *lane step* (:mod:`.lanes`), so an address's
step is the bytes between neighbouring lanes' accesses; each global access counts the 32-byte
sectors and 128-byte lines a warp touches and the bytes its lanes use.  ``miss_loop`` is the
share of a loop's load rounds that miss the L1 (its useful bytes over its lines' bytes).

*Instructions* by class, outside loops and inside them: ``alu`` (everything not listed),
``sfu`` (``*.approx`` special functions other than division: sin, cos, ex2, lg2, rsqrt, rcp,
sqrt, tanh), ``fdiv`` (``div.approx.f32``: a reciprocal and a multiply), ``div32``/``div64``
(integer div/rem by width), ``f64`` (any ``.f64`` opcode), ``shfl``, ``shared`` (shared-memory
loads, stores, atomics), ``global`` (global loads, stores, atomics), ``bar``, ``atom``
(atomics in any space).  ``ld.param`` and directives are not instructions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .diverge import divergent_branches
from .issue import ISSUE_CYCLES
from .lanes import access_bytes, line_use, lines, sectors, useful_bytes
from .lanes import immediate as _immediate
from .lanes import parameter_values  # noqa: F401  (the analysis's input, laid out there)
from .lanes import registers as _registers
from .lanes import step as _step

_SFU = ("sin", "cos", "ex2", "lg2", "rsqrt", "rcp", "sqrt", "tanh")
_NO_DEST = ("st", "bra", "ret", "bar", "red", "membar", "fence", "exit", "trap", "prefetch",
            "barrier", "call")


@dataclass
class Instruction:
    opcode: str
    dest: list
    sources: list  # registers read (address registers included)
    immediates: list  # integer immediates among the operands, in order
    guard: str | None = None
    address: str | None = None  # the register inside [...], for memory instructions
    target: str | None = None  # a branch's label
    args: list = field(default_factory=list)  # the operands after the destination, as text
    negated: bool = False  # @!%p: runs where the guard is false

    @property
    def parts(self) -> list:
        return self.opcode.split(".")

    @property
    def head(self) -> str:
        return self.parts[0]

    @property
    def space(self) -> str:
        parts = self.parts
        return parts[1] if len(parts) > 1 and self.head in ("ld", "st", "atom", "red") else ""


@dataclass
class Kernel:
    instructions: list = field(default_factory=list)
    labels: dict = field(default_factory=dict)  # label -> index of the next instruction
    shared_bytes: int = 0  # static shared arrays
    local_bytes: int = 0
    params: dict = field(default_factory=dict)  # register -> index of the parameter it holds
    nounroll: set = field(default_factory=set)  # labels of loops marked .pragma "nounroll"


def _split_operands(text: str) -> list:
    out, depth, current = [], 0, ""
    for ch in text:
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        out.append(current.strip())
    return out


def _entry_body(ptx: str) -> tuple[str, str]:
    """(the text before the first ``.entry``, the entry's body between its braces)."""
    start = ptx.find(".entry")
    if start < 0:
        raise ValueError("no .entry in this PTX")
    open_brace = ptx.find("{", ptx.find(")", start))
    depth, k = 0, open_brace
    while k < len(ptx):
        depth += {"{": 1, "}": -1}.get(ptx[k], 0)
        if depth == 0:
            break
        k += 1
    return ptx[:start], ptx[open_brace + 1:k]


def parse(ptx: str) -> Kernel:
    """The entry's instructions (``ld.param`` left out: parameters are free), labels and the
    static shared and local memory it declares."""
    head, body = _entry_body(ptx)
    kernel = Kernel()
    for m in re.finditer(r"\.shared\s+\.align\s+\d+\s+\.b8\s+\w+\[(\d+)\]", head + body):
        kernel.shared_bytes += int(m.group(1))
    for m in re.finditer(r"\.local\s+\.align\s+\d+\s+\.b8\s+\w+\[(\d+)\]", body):
        kernel.local_bytes += int(m.group(1))
    for raw in body.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if re.fullmatch(r"[$\w]+:", line):
            kernel.labels[line[:-1]] = len(kernel.instructions)
            continue
        if line.startswith(".pragma") and '"nounroll"' in line:
            # LLVM marks the remainder loop of a loop it unrolled so: see _loops
            kernel.nounroll.update(name for name, at in kernel.labels.items()
                                   if at == len(kernel.instructions))
            continue
        if line[0] in ".{}(":
            continue
        guard, negated = None, False
        if line.startswith("@"):
            guard, _, line = line.partition(" ")
            negated = guard.startswith("@!")
            guard = guard.lstrip("@!")
            line = line.strip()
        line = line.rstrip(";").strip()
        opcode, _, rest = line.partition(" ")
        opcode = opcode.strip()
        if opcode.startswith("ld.param"):
            m = re.match(r"(%\w+)\s*,\s*\[\w*?_param_(\d+)\]", rest.strip())
            if m:
                kernel.params[m.group(1)] = int(m.group(2))
            continue
        if not re.match(r"^[a-z]", opcode):
            continue
        operands = _split_operands(rest) if rest else []
        ins = _instruction(opcode, operands, guard)
        ins.negated = negated
        kernel.instructions.append(ins)
    return kernel


def _instruction(opcode: str, operands: list, guard) -> Instruction:
    head = opcode.split(".")[0]
    dest, sources, immediates, address, target = [], [], [], None, None
    if head == "bra":
        target = operands[-1].strip() if operands else None
        operands = []
    elif head == "call":
        if operands and operands[0].startswith("("):
            dest = _registers(operands[0])
            operands = operands[1:]
    elif head not in _NO_DEST and operands:
        dest = _registers(operands[0])
        operands = operands[1:]
    for op in operands:
        if op.startswith("["):
            regs = _registers(op)
            if regs:
                address = regs[0]
        sources += _registers(op)
        value = _immediate(op)
        if value is not None:
            immediates.append(value)
    if guard:
        sources.append(guard)
    return Instruction(opcode, dest, sources, immediates, guard, address, target, operands)


# --------------------------------------------------------------------------------------------
# The analysis
# --------------------------------------------------------------------------------------------

def _loops(kernel: Kernel, blocks: list, succ: list) -> set:
    """Indices of the instructions inside a loop: from a label to a later branch back to it
    (``blocks``: :func:`_blocks` of ``kernel``, ``succ``: their :func:`_successors`).

    When LLVM unrolls a loop whose trip count is not known it emits the unrolled body and a
    remainder loop for the last few iterations, marked ``.pragma "nounroll"``.  The remainder
    runs fewer times than the unroll factor whatever the data, so it is counted as code run
    once, not as a second loop pass: counted as a loop, its loads made each pass look one
    load longer and one memory round deeper than the body the threads actually repeat."""
    loops = []
    reach = _reaches(blocks, succ)
    for k, ins in enumerate(kernel.instructions):
        start = kernel.labels.get(ins.target) if ins.head == "bra" else None
        # A branch to an earlier label is a loop only when the label's code leads back to
        # the branch: LLVM lays a cold path (libdevice's reduction of a huge sin argument, a
        # pow of special values) out after the kernel's exit and jumps back to where it
        # rejoins, which is no cycle.
        if start is not None and start <= k and reach(start, k):
            loops.append((ins.target, start, k))
    remainder = {name for name, _, _ in loops if name in kernel.nounroll}
    if len(remainder) == len({name for name, _, _ in loops}):
        remainder = set()  # no unrolled body beside it: the marked loop is the loop
    inside = set()
    for name, start, end in loops:
        if name not in remainder:
            inside.update(range(start, end + 1))
    return inside


def _reaches(blocks: list, succ: list):
    """``reach(a, b)``: whether instruction ``b`` can run after instruction ``a`` (falling
    through, or by any branch), over basic blocks (``succ``: :func:`_successors`)."""
    of = {k: i for i, (start, end) in enumerate(blocks) for k in range(start, end)}

    def reach(a: int, b: int) -> bool:
        src, dst = of[a], of[b]
        seen, todo = {src}, [src]
        while todo:
            i = todo.pop()
            if i == dst:
                return True
            for j in succ[i]:
                if j not in seen:
                    seen.add(j)
                    todo.append(j)
        return False

    return reach


def _targets(kernel: Kernel, blocks: list) -> dict:
    """Block index -> the block its closing branch jumps to, earlier or later (a branch to a
    label the entry does not hold is left out)."""
    first = {start: b for b, (start, _) in enumerate(blocks)}
    out = {}
    for b, (_, end) in enumerate(blocks):
        last = kernel.instructions[end - 1]
        target = first.get(kernel.labels.get(last.target)) if last.head == "bra" else None
        if target is not None:
            out[b] = target
    return out


def _successors(kernel: Kernel, blocks: list, targets: dict) -> list:
    """Block index -> the blocks that can run next: the following block where the last
    instruction falls through (not a ``ret``, an ``exit`` or an unguarded branch), and a
    branch's target (``targets``: :func:`_targets`)."""
    succ = []
    for b, (_, end) in enumerate(blocks):
        last = kernel.instructions[end - 1]
        nxt = []
        falls = not (last.head in ("ret", "exit") or (last.head == "bra" and last.guard is None))
        if falls and b + 1 < len(blocks):
            nxt.append(b + 1)
        if b in targets:
            nxt.append(targets[b])
        succ.append(nxt)
    return succ


def _blocks(kernel: Kernel) -> list:
    """Basic blocks as (first, last + 1) instruction indices, in program order."""
    starts = {0, *kernel.labels.values()}
    for k, ins in enumerate(kernel.instructions):
        if ins.head in ("bra", "ret", "exit"):
            starts.add(k + 1)
    n = len(kernel.instructions)
    edges = sorted(s for s in starts if s < n) + [n]
    return list(zip(edges, edges[1:]))


def _predecessors(succ: list) -> dict:
    """Block index -> earlier blocks that reach it (fall-through or a forward branch), from
    :func:`_successors`; the branches back to a loop's head are left out: one pass in program
    order then sees every predecessor before the block."""
    preds = {b: [] for b in range(len(succ))}
    for b, nxt in enumerate(succ):
        for target in nxt:
            if target > b:
                preds[target].append(b)
    return preds


# libdevice's single-precision sin, cos and sincos reduce an argument of magnitude 105615 or
# more by the long Payne-Hanek path (a table of 2/pi's bits, a local array); below it, by a few
# multiply-adds.  The branch compares |x| with this bound.
HUGE_ANGLE = "0f47CE4780"


def _cold(kernel: Kernel, blocks: list, targets: dict) -> set:
    """Instructions of libdevice's huge-argument path of sin and cos (:data:`HUGE_ANGLE`),
    which no angle of a timing case takes (positions times frequencies stay far below it):
    counted, they would add a hundred instructions and a local array to every such kernel.

    The path is either the fall-through of the branch that skips it (up to the branch's
    target), or the branch's target, laid out after the exit, up to its jump back
    (``targets``: :func:`_targets`; a branch closes its block, so each is a block's last)."""
    setp = {}
    cold = set()
    for here, (start, end) in enumerate(blocks):
        for ins in kernel.instructions[start:end]:
            if ins.head == "setp":
                setp.update((d, ins) for d in ins.dest)
        ins = kernel.instructions[end - 1]
        target = targets.get(here)
        if ins.head != "bra" or ins.guard not in setp or target is None or target <= here:
            continue
        test = setp[ins.guard]
        if HUGE_ANGLE not in test.args:
            continue
        # p = |x| < bound (lt, ltu) or the other way round; @!p inverts it
        small = test.parts[1] in ("lt", "ltu", "le", "leu")
        if test.args[0] == HUGE_ANGLE:  # bound first: the comparison reads the other way
            small = not small
        if small != ins.negated:  # jumps past the path when |x| is small
            for b in range(here + 1, target):
                cold.update(range(*blocks[b]))
            continue
        for b in range(target, len(blocks)):
            cold.update(range(*blocks[b]))
            last = kernel.instructions[blocks[b][1] - 1]
            if last.head in ("ret", "exit") or (last.head == "bra" and last.guard is None
                                                 and targets.get(b, 0) <= target):
                break
    return cold


def _class(ins: Instruction) -> str:
    parts, head = ins.parts, ins.head
    if head in ("div", "rem") and any(p[:1] in "su" and p[1:] in ("16", "32", "64")
                                      for p in parts[1:]):
        return "div64" if parts[-1][1:] == "64" else "div32"
    if head == "div" and "approx" in parts:
        return "fdiv"
    if head in _SFU and "approx" in parts:
        return "sfu"
    if "f64" in parts:
        return "f64"
    if head == "shfl":
        return "shfl"
    if head == "bar" or head == "barrier":
        return "bar"
    if head in ("ld", "st", "atom", "red") and ins.space == "shared":
        return "shared"
    if head in ("ld", "st", "atom", "red") and ins.space == "global":
        return "global"
    return "alu"


CLASSES = ("alu", "sfu", "fdiv", "div32", "div64", "f64", "shfl", "shared", "global", "bar")


def analyze(ptx: str, params=None, block=None) -> dict:
    """Counts of one kernel's PTX (see the module docstring); plain JSON-able numbers.

    ``params``: the values of the kernel's PTX parameters in order, where known (integers;
    None for a pointer), as :func:`parameter_values` lays a launch's arguments out.  A known
    parameter (a stride, a row length) makes the lane steps of the addresses built from it
    known too.  ``block``: the launch's block shape, which with ``params`` says which branches
    split a warp (:mod:`.diverge`)."""
    kernel = parse(ptx)
    blocks = _blocks(kernel)
    targets = _targets(kernel, blocks)
    succ = _successors(kernel, blocks, targets)  # the graph, built once for both
    loop = _loops(kernel, blocks, succ)
    preds = _predecessors(succ)
    split = divergent_branches(kernel, params, block)
    cold = _cold(kernel, blocks, targets)
    order = _serial_arms(blocks, preds, split, targets)
    steps, consts, signs, rounds = {}, {}, set(), {}
    for reg, index in kernel.params.items():
        if params is not None and index < len(params) and isinstance(params[index], int):
            consts[reg] = params[index]
    # Per block, at its end: latencies waited for, the data round of the latest global store
    # (a later global load issues after it), the largest value round issued (a barrier waits
    # for all of it).
    exits = []
    counts = {f"{c}_{where}": 0 for c in CLASSES for where in ("out", "loop")}
    counts["atom"] = counts["cold"] = 0
    memory, classes = [], {}
    for b, (start, end) in enumerate(blocks):
        entry = [exits[p] for p in order[b]] or [(0, 0, 0)]
        waited, store_floor, issued = (max(e[i] for e in entry) for i in range(3))
        entry_waited = waited
        for k in range(start, end):
            ins = kernel.instructions[k]
            if k in cold:
                counts["cold"] += 1
                continue
            where = "loop" if k in loop else "out"
            counts[f"{_class(ins)}_{where}"] += 1
            if where == "out":
                per = classes.setdefault(b, {})
                per[_class(ins)] = per.get(_class(ins), 0) + 1
            counts["atom"] += ins.head in ("atom", "red")
            need = max([rounds.get(s, 0) for s in ins.sources] + [0])
            step, const, sign = _step(ins, steps, consts, signs)
            value_round = need
            is_global = ins.space == "global" and ins.head in ("ld", "st", "atom", "red")
            if ins.head in ("ld", "atom") and ins.space == "global":
                # hoisted inside the block above its waits, never above a store or a barrier
                value_round = max(need, entry_waited, store_floor) + 1
                issued = max(issued, value_round)
            else:
                waited = max(waited, need)
            if ins.head in ("bar", "barrier"):
                waited = entry_waited = max(waited, issued)
            if ins.head in ("st", "atom", "red") and ins.space == "global":
                store_floor = max(store_floor, need)
            if is_global:
                memory.append({"op": {"ld": "ld", "st": "st"}.get(ins.head, "atom"),
                               "bytes": access_bytes(ins.opcode),
                               "step": steps.get(ins.address, 0.0) if ins.address else 0.0,
                               "loop": k in loop, "block": b,
                               "issue": need if ins.head == "st" else value_round - 1,
                               "value": value_round})
            for d in ins.dest:
                rounds[d], steps[d] = value_round, step
                if const is not None:
                    consts[d] = const
                else:
                    consts.pop(d, None)
                (signs.add if sign else signs.discard)(d)
        exits.append((waited, store_floor, issued))
    out = _summary(kernel, counts, memory)
    out["arm_share_loop"] = _arm_share(blocks, preds, memory, loop)
    out["arm_share_out"] = _arm_share(blocks, preds, memory, None)
    out.update(_warp_path_out(blocks, order, memory, classes))
    out["divergent_branches"] = len(split)
    return out


def _serial_arms(blocks: list, preds: dict, split: set, targets: dict) -> dict:
    """:func:`_predecessors` with the arms of each warp-splitting branch (``split``) chained: a
    warp runs the fall-through arm, then the branch's target arm (``targets``:
    :func:`_targets`), so the target's first block also follows the fall-through arm's last
    one (its loads wait for the first arm's)."""
    order = {b: list(p) for b, p in preds.items()}
    for b, (_, end) in enumerate(blocks):
        if end - 1 not in split:
            continue
        target = targets.get(b)
        if target is not None and target > b + 1 and target - 1 not in order[target]:
            order[target].append(target - 1)
    return order


def _heaviest(blocks: list, preds: dict, weight: dict, loop: set | None = None) -> list:
    """The blocks of the heaviest path by ``weight`` (block -> weight) through the blocks
    inside loops (``loop``: their instructions, from :func:`_loops`) or, with ``None``, from
    the entry through every block.  :func:`_predecessors` leaves the branches back out, so
    program order is a topological order."""
    best = {}  # block -> (the heaviest path's weight up to and with it, its previous block)
    for b, (start, _) in enumerate(blocks):
        if loop is not None and start not in loop:
            continue
        before = max(((best[p][0], p) for p in preds[b] if p in best), default=(0.0, None))
        best[b] = (weight.get(b, 0.0) + before[0], before[1])
    if not best:
        return []
    path, b = [], max(best, key=lambda k: best[k][0])
    while b is not None:
        path.append(b)
        b = best[b][1]
    return path


def _access_weight(memory: list, inside: bool, cost) -> dict:
    """Block -> the summed ``cost`` of its global accesses inside loops or outside them."""
    weight = {}
    for m in memory:
        if m["loop"] is inside:
            weight[m["block"]] = weight.get(m["block"], 0.0) + cost(m)
    return weight


def _arm_share(blocks: list, preds: dict, memory: list, loop: set | None) -> float:
    """The share of the useful bytes inside loops (``loop``) or outside them (``None``) that
    one thread's path moves (:func:`_heaviest`).  A thread takes one arm of an ``if``/``else``
    (a pass rotates a pair or copies it; the even lane of a pair stores one float, the odd
    lane the other), but the counts add both arms' accesses, which would halve the passes a
    thread makes, or the threads a launch's bytes keep busy; 1.0 for code without a branch."""
    weight = _access_weight(memory, loop is not None,
                            lambda m: useful_bytes(m["bytes"], m["step"]))
    total = sum(weight.values())
    if total <= 0:
        return 1.0
    return min(1.0, sum(weight.get(b, 0.0) for b in _heaviest(blocks, preds, weight, loop))
               / total)


def _warp_path_out(blocks: list, order: dict, memory: list, classes: dict) -> dict:
    """What a warp runs outside loops: the arms its lanes take, both where they split it
    (``order``: :func:`_serial_arms`), one where the warp goes one way together.  The heaviest
    such path by sectors, by lines, and by issue cycles (``classes``: block -> instruction
    class -> count), as ``sectors_path_out``, ``lines_path_out`` and ``<class>_path_out``."""
    out = {}
    for name, cost in (("sectors", lambda m: sectors(m["bytes"], m["step"])),
                       ("lines", lambda m: lines(m["bytes"], m["step"]))):
        weight = _access_weight(memory, False, cost)
        out[f"{name}_path_out"] = sum(weight.get(b, 0.0) for b in _heaviest(blocks, order, weight))
    cycles = {b: sum(ISSUE_CYCLES[c] * n for c, n in counts.items())
              for b, counts in classes.items()}
    path = _heaviest(blocks, order, cycles)
    for c in CLASSES:
        out[f"{c}_path_out"] = sum(classes.get(b, {}).get(c, 0) for b in path)
    return out


def _summary(kernel: Kernel, counts: dict, memory: list) -> dict:
    loads = [m for m in memory if m["op"] != "st"]
    out = dict(counts)
    out["rounds"] = max([m["value"] for m in loads] + [0])
    in_loop = [m for m in loads if m["loop"]]
    out["rounds_loop"] = 0
    if in_loop:
        depth = max(m["value"] for m in in_loop) - min(m["issue"] for m in in_loop)
        out["rounds_loop"] = max(1, depth)
    out["first_round_loads"] = sum(1 for m in loads if m["issue"] == 0)
    out["first_round_bytes"] = sum(m["bytes"] for m in loads if m["issue"] == 0)
    for where, flag in (("out", False), ("loop", True)):
        chosen = [m for m in memory if m["loop"] is flag]
        out[f"ld_bytes_{where}"] = sum(m["bytes"] for m in chosen if m["op"] != "st")
        out[f"st_bytes_{where}"] = sum(m["bytes"] for m in chosen if m["op"] != "ld")
        out[f"sectors_{where}"] = sum(sectors(m["bytes"], m["step"]) for m in chosen)
        out[f"useful_{where}"] = sum(useful_bytes(m["bytes"], m["step"]) for m in chosen)
        out[f"lines_{where}"] = sum(lines(m["bytes"], m["step"]) for m in chosen)
        out[f"unknown_steps_{where}"] = sum(1 for m in chosen if m["step"] is None)
    # The share of a loop's passes whose rounds go past the L1.  A load whose lanes use whole
    # lines (a coalesced read, a grid-stride walk) needs new lines every pass; one whose lanes
    # use a sliver of each line they touch (a thread walking its own row 4 bytes at a time, a
    # warp reading one element at a time) finds the next pass's bytes in the same lines, and
    # misses once per 128 bytes.  A pass waits for its slowest load, so the loop misses as
    # often as its most-missing load.
    out["miss_loop"] = max((line_use(m["bytes"], m["step"]) for m in in_loop), default=1.0)
    out["loads"] = len(loads)
    out["stores"] = len(memory) - len(loads)
    out["widths"] = sorted({m["bytes"] for m in memory})
    out["shared_bytes"] = kernel.shared_bytes
    out["local_bytes"] = kernel.local_bytes
    out["loops"] = int(any(m for m in memory if m["loop"]) or counts["alu_loop"] > 0)
    return out
