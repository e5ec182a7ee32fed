"""ropelab's exception classes, in one place so every module raises the same ones.

``RopeInputError`` (a ``ValueError``) is a bad *value* found before any kernel ran; a bad *type*
(a string where a number belongs, ``None`` where a bool belongs) is a plain ``TypeError``.
``RopeDeviceError`` reports what a kernel flagged on the device (see :func:`ropelab.check_errors`).
"""


class RopeInputError(ValueError):
    """Bad input to a ropelab function, detected before any kernel ran; no buffer was touched."""


class RopeDeviceError(RuntimeError):
    """A kernel flagged input it could not honour (an out-of-range device position).

    Raised by :func:`ropelab.check_errors`, never inside a call on device data: reading the
    device's error word is a synchronization, which the public functions do not do by default.
    """
