"""Vector loads and stores: 128 bits as four float32, and 64 or 128 bits as 32-bit words.

Numba has no built-in way to emit ``ld.global.v4.f32``: float32x4 vector types, records,
complex64 views and 2-D ``(n, 4)`` arrays all compile to four scalar loads.  These intrinsics
bitcast the element pointer to a ``<4 x float>*`` (or ``<4 x i32>*``, ``<2 x i32>*``) with the
vector's own alignment, which NVVM lowers to one ``ld.global.v4.f32`` / ``ld.global.v4.u32`` /
``ld.global.v2.u32`` (``LDG.E.128`` / ``LDG.E.64`` in SASS), and the same for stores.

* ``load_f32x4`` / ``store_f32x4``: four float32 of a float32 array (the seed's ``FLOAT4``).
* ``load_u32x4`` / ``store_u32x4``, ``load_u32x2`` / ``store_u32x2``, ``load_u32`` /
  ``store_u32``: the 16 (8, 4) bytes that start at element ``i`` of a 1-D array of any 16- or
  32-bit dtype, as four (two, one) ``uint32`` words, little-endian (the word holding elements
  ``i`` and ``i + 1`` of a 16-bit array has element ``i`` in its low half).  16-bit storage
  (bfloat16 bits, float16) moves through these: one lane moves 8 (4, 2) elements with one
  instruction, and :mod:`ropelab.kernels.words16`
  unpacks the words to float32.

The caller guarantees what the hardware needs: the address of element ``i`` is a multiple of
the access size (16, 8 or 4 bytes).  The launcher checks the arrays' base addresses on the host
before it picks a vector kernel; the kernel's index arithmetic keeps ``i`` on the right
multiple.  The index is widened to 64 bits with its own signedness before the address is
formed, so an unsigned 32-bit index past ``2**31`` stays positive.

Under the simulator the same names are plain Python functions, and they check the index
alignment (relative to the array's start), so a kernel whose index math breaks the rule fails
in the simulator as it would fault on a GPU.
"""

from ..target import SIMULATED

if SIMULATED:
    import numpy as np

    def _check_alignment(array, i, nbytes):
        itemsize = np.asarray(array[i]).dtype.itemsize
        if (int(i) * itemsize) % nbytes:
            raise ValueError(f"a {8 * nbytes}-bit access at element {int(i)} of an array of "
                             f"{itemsize}-byte elements is misaligned")
        return itemsize

    def _words(array, i, count):
        itemsize = _check_alignment(array, i, 4 * count)
        i = int(i)
        if itemsize == 4:
            return tuple(np.asarray(array[i + k]).view(np.uint32)[()] for k in range(count))
        out = []
        for k in range(count):
            lo = np.uint32(np.asarray(array[i + 2 * k]).view(np.uint16))
            hi = np.uint32(np.asarray(array[i + 2 * k + 1]).view(np.uint16))
            out.append(np.uint32(lo | (hi << np.uint32(16))))
        return tuple(out)

    def _put_words(array, i, words):
        itemsize = _check_alignment(array, i, 4 * len(words))
        i = int(i)
        kind = np.asarray(array[i]).dtype
        for k, w in enumerate(words):
            w = np.uint32(w)
            if itemsize == 4:
                array[i + k] = np.array(w, np.uint32).view(kind)[()]
            else:
                lo = np.array(w & np.uint32(0xFFFF), np.uint16).view(kind)[()]
                hi = np.array(w >> np.uint32(16), np.uint16).view(kind)[()]
                array[i + 2 * k] = lo
                array[i + 2 * k + 1] = hi

    def load_f32x4(array, i):
        _check_alignment(array, i, 16)
        return array[i], array[i + 1], array[i + 2], array[i + 3]

    def store_f32x4(array, i, a, b, c, d):
        _check_alignment(array, i, 16)
        array[i], array[i + 1], array[i + 2], array[i + 3] = a, b, c, d

    def load_u32x4(array, i):
        return _words(array, i, 4)

    def store_u32x4(array, i, a, b, c, d):
        _put_words(array, i, (a, b, c, d))

    def load_u32x2(array, i):
        return _words(array, i, 2)

    def load_u32(array, i):
        return _words(array, i, 1)[0]

    def store_u32(array, i, a):
        _put_words(array, i, (a,))

    def store_u32x2(array, i, a, b):
        _put_words(array, i, (a, b))

else:
    from llvmlite import ir
    from numba import types
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    _I32 = ir.IntType(32)
    _I64 = ir.IntType(64)

    # ex: begin vec4_load
    def _vector_pointer(context, builder, array_type, array, index_type, index, vector):
        data = context.make_array(array_type)(context, builder, value=array).data
        if index_type.bitwidth < 64:  # gep would sign-extend a narrower index
            index = (builder.sext if index_type.signed else builder.zext)(index, _I64)
        element = builder.gep(data, [index])
        return builder.bitcast(element, vector.as_pointer())

    def _check(array, index, what, dtypes=None, bits=(16, 32)):
        ok = (isinstance(array, types.Array) and array.ndim == 1 and array.layout == "C"
              and getattr(array.dtype, "bitwidth", 0) in bits
              and (dtypes is None or array.dtype in dtypes))
        if not ok:
            raise TypingError(f"{what} needs a 1-D C-contiguous array of "
                              f"{'float32' if dtypes else '16- or 32-bit elements'}, got {array}")
        if not isinstance(index, types.Integer):
            raise TypingError(f"{what} needs an integer index, got {index}")

    def _load(count, element, result_type, name, dtypes=None):
        vector = ir.VectorType(element, count)

        def typer(typingctx, array, index):
            _check(array, index, name, dtypes)
            sig = types.UniTuple(result_type, count)(array, index)

            def codegen(context, builder, sig, args):
                ptr = _vector_pointer(context, builder, sig.args[0], args[0], sig.args[1],
                                      args[1], vector)
                vec = builder.load(ptr, align=count * 4)
                lanes = [builder.extract_element(vec, ir.Constant(_I32, k)) for k in range(count)]
                return context.make_tuple(builder, sig.return_type, lanes)

            return sig, codegen

        typer.__name__ = name
        return intrinsic(typer)
    # ex: end vec4_load

    def _store_codegen(count, element):
        vector = ir.VectorType(element, count)

        def codegen(context, builder, sig, args):
            ptr = _vector_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1],
                                  vector)
            vec = ir.Constant(vector, None)
            for k, value in enumerate(args[2:]):
                vec = builder.insert_element(vec, value, ir.Constant(_I32, k))
            builder.store(vec, ptr, align=count * 4)

        return codegen

    # The stores are spelled out per width: a numba intrinsic takes no *args.  The values are
    # declared float32 / uint32, so numba converts what the caller passes, as it would on an
    # array assignment.
    @intrinsic
    def store_f32x4(typingctx, array, index, a, b, c, d):
        _check(array, index, "store_f32x4", (types.float32,))
        f = types.float32
        return types.void(array, index, f, f, f, f), _store_codegen(4, ir.FloatType())

    @intrinsic
    def store_u32x4(typingctx, array, index, a, b, c, d):
        _check(array, index, "store_u32x4")
        u = types.uint32
        return types.void(array, index, u, u, u, u), _store_codegen(4, _I32)

    @intrinsic
    def store_u32x2(typingctx, array, index, a, b):
        _check(array, index, "store_u32x2")
        u = types.uint32
        return types.void(array, index, u, u), _store_codegen(2, _I32)

    @intrinsic
    def load_u32(typingctx, array, index):
        _check(array, index, "load_u32")

        def codegen(context, builder, sig, args):
            ptr = _vector_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1],
                                  _I32)
            return builder.load(ptr, align=4)

        return types.uint32(array, index), codegen

    @intrinsic
    def store_u32(typingctx, array, index, a):
        _check(array, index, "store_u32")

        def codegen(context, builder, sig, args):
            ptr = _vector_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1],
                                  _I32)
            builder.store(args[2], ptr, align=4)

        return types.void(array, index, types.uint32), codegen

    load_f32x4 = _load(4, ir.FloatType(), types.float32, "load_f32x4", (types.float32,))
    load_u32x4 = _load(4, _I32, types.uint32, "load_u32x4")
    load_u32x2 = _load(2, _I32, types.uint32, "load_u32x2")
