"""128-bit loads and stores of four float32: the ``FLOAT4`` macro of the seed, for Numba.

Numba has no built-in way to emit ``ld.global.v4.f32``: float32x4 vector types, records,
complex64 views and 2-D ``(n, 4)`` arrays all compile to four scalar loads.  These two
intrinsics bitcast the element pointer to ``<4 x float>*`` with 16-byte alignment, which
NVVM lowers to one ``ld.global.v4.f32`` / ``st.global.v4.f32`` (``LDG.E.128`` in SASS).

The caller guarantees what the hardware needs: the element index is a multiple of 4 and the
array's data pointer is 16-byte aligned (the launcher checks both on the host before it picks
the vector kernel).  Under the simulator the same names are plain Python functions.
"""

from ..target import SIMULATED

if SIMULATED:

    def load_f32x4(array, i):
        return array[i], array[i + 1], array[i + 2], array[i + 3]

    def store_f32x4(array, i, a, b, c, d):
        array[i], array[i + 1], array[i + 2], array[i + 3] = a, b, c, d

else:
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    # ex: begin vec4_load
    def _vector_pointer(context, builder, array_type, array, index):
        data = context.make_array(array_type)(context, builder, value=array).data
        element = builder.gep(data, [index])
        return builder.bitcast(element, ir.VectorType(ir.FloatType(), 4).as_pointer())

    def _check(array):
        if not (isinstance(array, types.Array) and array.dtype == types.float32 and array.ndim == 1
                and array.layout == "C"):
            raise TypeError(f"float4 access needs a 1-D C-contiguous float32 array, got {array}")

    @intrinsic
    def load_f32x4(typingctx, array, index):
        _check(array)
        sig = types.UniTuple(types.float32, 4)(array, index)

        def codegen(context, builder, sig, args):
            ptr = _vector_pointer(context, builder, sig.args[0], args[0], args[1])
            vec = builder.load(ptr, align=16)
            lanes = [builder.extract_element(vec, ir.Constant(ir.IntType(32), k)) for k in range(4)]
            return context.make_tuple(builder, sig.return_type, lanes)

        return sig, codegen
    # ex: end vec4_load

    @intrinsic
    def store_f32x4(typingctx, array, index, a, b, c, d):
        _check(array)
        sig = types.void(array, index, types.float32, types.float32, types.float32, types.float32)

        def codegen(context, builder, sig, args):
            ptr = _vector_pointer(context, builder, sig.args[0], args[0], args[1])
            vec = ir.Constant(ir.VectorType(ir.FloatType(), 4), None)
            for k, value in enumerate(args[2:]):
                vec = builder.insert_element(vec, value, ir.Constant(ir.IntType(32), k))
            builder.store(vec, ptr, align=16)

        return sig, codegen
