"""The census child: ``python -m ropelab.measure.census.child CLIENT`` (started by
:func:`ropelab.measure.census.engine.run_child`, with the simulator off).

Reads the client's payload as JSON on stdin, calls ``CLIENT.compile_rows(payload)`` and prints
each row as one JSON line as soon as it is counted (the parent's progress bar follows them).
``CLIENT`` is a module of ``ropelab.measure``: the census sits below the course, and a kernel
that lives only in a notebook reaches the child as source (:mod:`.shipped`), not as a module.
"""

import importlib
import json
import sys

CLIENTS = "ropelab.measure."


def main(argv) -> int:
    if len(argv) != 2 or not argv[1].startswith(CLIENTS):
        print(json.dumps({"fatal": f"the census child compiles for modules of {CLIENTS[:-1]} "
                                   f"only, not {argv[1:]}"}), flush=True)
        return 2
    payload = json.loads(sys.stdin.read() or "null")
    from numba import cuda

    if cuda.compile_ptx is None:
        print(json.dumps({"fatal": "compile_ptx unavailable (simulator active in the child)"}),
              flush=True)
        return 1
    client = importlib.import_module(argv[1])
    for row in client.compile_rows(payload):
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
