"""The course's glossary-worthy terms: the jargon a notebook may use only once it is defined.

Notebook 00 promises to define each term before any notebook uses it.  This list is what
``tests/test_glossary.py`` holds the notebooks to: every term here that a notebook's Markdown
or printed output uses must have an entry in notebook 00's glossary (a Markdown cell headed
``## 9. Glossary``, one ``* **name**: ...`` bullet per term), and where notebook 00 itself
uses a term before its glossary, the first cell that uses it must define it in place (in
italics, the primer's style: ``*special function units* (SFUs)``).  The on-ramp
(``00_on_ramp``), which comes before notebook 00, defines in place every term it uses.

The list is kept complete against the records too: every stall reason a profile record under
``data/profile/`` names must be a term here (a new stall reason in a new record fails the test
until it is defined).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    name: str  # the glossary entry's bold name
    pattern: str  # regex that finds a use of the term in prose or printed output
    aliases: tuple[str, ...] = ()  # other spellings whose italics count as a definition in 00

    def used_in(self, text: str) -> bool:
        return re.search(self.pattern, text) is not None

    def first_use(self, text: str) -> int:
        m = re.search(self.pattern, text)
        return -1 if m is None else m.start()


def _word(w: str) -> str:
    """A pattern for ``w`` as a whole word or identifier (``drain``, not ``drained``)."""
    return r"(?<![\w.])" + re.escape(w) + r"(?![\w])"


TERMS: tuple[Term, ...] = (
    # SASS instructions and suffixes named in the course (notebooks 02, 03, 06)
    Term("SASS", _word("SASS")),
    Term("PTX", _word("PTX")),
    Term("LDG.E.128", r"LDG\.E(\.128|\.64)?(?![\w])", ("LDG",)),
    Term("IADD3.X", _word("IADD3.X"), ("IADD3",)),
    Term("IADD3", r"(?<![\w.])IADD3(?![\w.])"),
    Term(".EX", r"`\.EX`|\.EX(?![\w])"),
    Term("BSSY", r"\bBSSY\b|\bBSYNC\b", ("BSYNC",)),
    Term("SHFL", r"\bSHFL(\.BFLY)?\b|\bshfl(_xor)?_sync\b|\bshuffles?\b",
         ("shfl_xor_sync", "shuffle", "warp shuffle")),
    # the machine
    Term("thread", r"\bthreads?\b"),
    Term("block", r"\bblocks?\b"),
    Term("grid", r"\bgrids?\b"),
    Term("barrier", r"\bbarriers?\b"),
    Term("race", r"\braces?\b"),
    Term("warp", r"\bwarps?\b"),
    Term("lane", r"\blanes?\b"),
    Term("SM", r"\bSMs?\b", ("streaming multiprocessor", "SMs")),
    Term("occupancy", r"\boccupancy\b|\bocc%"),
    Term("register", r"\bregisters?\b|(?<![\w])reg(?![\w])", ("register file",)),
    Term("SFU", r"\bSFUs?\b", ("special function units",)),
    Term("XU", r"\bXU%?"),
    Term("L1", r"\bL1\b"),
    Term("L2", r"\bL2\b", ("L2 cache",)),
    Term("HBM", r"\bHBM\b|\bDRAM%?\b", ("global memory",)),
    Term("sector", r"\bsectors?\b|sect/req"),
    Term("coalescing", r"\bcoalesc\w*", ("coalesced",)),
    Term("latency", r"\blatency\b"),
    Term("divergence", r"\bdivergen\w*"),
    Term("shared memory", r"\bshared memory\b"),
    Term("stream", r"\bstreams?\b"),
    # compiling
    Term("NVVM", _word("NVVM"), ("NVVM IR",)),
    Term("libdevice", _word("libdevice")),
    Term("fast-math", r"\bfast-?math\b|fastmath", ("fastmath=True",)),
    Term("NVRTC", _word("NVRTC")),
    Term("nvJitLink", _word("nvJitLink")),
    Term("nvdisasm", _word("nvdisasm")),
    # Nsight Compute metrics, as the profile table prints them
    Term("issue%", r"issue%|issue slots|issue-bound|\bissue_active"),
    Term("cycles/issue", r"cycles/issue|cycles per\s+instruction|cycles per issue"),
    Term("traffic", r"\btraffic\b"),
    # stall reasons (Nsight Compute's warp states)
    Term("long_scoreboard", _word("long_scoreboard")),
    Term("short_scoreboard", _word("short_scoreboard")),
    Term("mio_throttle", _word("mio_throttle")),
    Term("math_pipe_throttle", _word("math_pipe_throttle")),
    Term("drain", _word("drain")),
    Term("imc_miss", _word("imc_miss")),
    Term("not_selected", _word("not_selected")),
    Term("wait", r"(?<![\w])wait(?![\w])(?=[^\n]*\d+\.\d)|`wait`"),
    # measuring
    Term("roof", r"\broof\b"),
    Term("Little's law", r"Little's law"),
    Term("p20-p80", r"p20-p80"),
    Term("noise floor", r"noise floor"),
    Term("cold L2", r"cold L2"),
    Term("host_bound", _word("host_bound")),
    Term("CUDA events", r"\bCUDA events?\b|\bcuda\.event\b|\bevent_elapsed_time\b", ("CUDA event",)),
    # the machine, continued
    Term("warp-uniform", r"\bwarp-uniform\b"),
    Term("L1TEX", r"\bL1TEX\b|\bl1tex__"),
    # numbers
    Term("ulp", r"\bulps?\b|\bULPs?\b", ("unit in the last place",)),
    Term("float16", r"\bfloat16\b|\bfp16\b|\bFP16\b", ("half precision",)),
    Term("bfloat16", r"\bbfloat16\b|\bbf16\b|\bBF16\b", ("brain float",)),
    # models and their RoPE variants
    Term("RMSNorm", r"\bRMSNorm\b|\bRMS-normaliz\w*", ("RMS norm",)),
    Term("YaRN", r"\bYaRN\b|(?<![\w.])yarn\b"),
    Term("Llama 3.1 scaling", r"\bLlama 3\.1\b|\bllama3\.1\b|\bLlama3\b", ("Llama 3.1",)),
    Term("GQA", _word("GQA"), ("grouped-query attention",)),
    Term("GEMM", r"\bGEMMs?\b"),
    Term("SGD", _word("SGD")),
    # compiling, continued
    Term("LLVM", _word("LLVM")),
    # a memory the course compares with HBM
    Term("GDDR6X", _word("GDDR6X")),
)

BY_NAME = {t.name: t for t in TERMS}

