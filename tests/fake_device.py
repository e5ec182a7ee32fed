"""A device without a GPU, for driving the engine's device route in CPU tests: arrays seen only
through ``__cuda_array_interface__`` (fake memory, never read), and a binder that records the
pointers and stream it would launch with instead of calling ``cuLaunchKernel``."""

from ropelab.ops import arrays, call


class CAI:
    """A device array as any library exports it: only ``__cuda_array_interface__``."""

    def __init__(self, ptr, shape, typestr="<f4", strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3}


class RecordingBound:
    """What ``kernels.launch.bind`` would return; ``fired`` lists ``(pointers, stream)``."""

    def __init__(self, plan, caller):
        self.plan, self.caller, self.fired = plan, caller, []

    def fire(self, ptrs, stream):
        self.fired.append((tuple(ptrs), stream))


def route(monkeypatch):
    """Generator for a fixture: the engine takes its device route for :class:`CAI` arrays and
    binds :class:`RecordingBound` objects, yielded as a list; the call cache starts and ends
    empty."""
    bounds = []

    def bind(plan, caller):
        bounds.append(RecordingBound(plan, caller))
        return bounds[-1]

    monkeypatch.setattr(call, "bind", bind)
    monkeypatch.setattr(call, "register_fast_types", lambda: None)
    monkeypatch.setattr(call, "SIMULATED", False)
    monkeypatch.setitem(arrays.FAST_META, CAI, arrays.cai_meta)
    call.clear()
    yield bounds
    call.clear()
