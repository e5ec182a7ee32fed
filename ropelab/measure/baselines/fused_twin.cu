
#define FULL_MASK 0xffffffffu

struct F32 {  // one float per 32-bit word
    static constexpr int PER_WORD = 1;
    static __device__ __forceinline__ void unpack(unsigned w, float* v) { v[0] = __uint_as_float(w); }
    static __device__ __forceinline__ unsigned pack(const float* v) { return __float_as_uint(v[0]); }
};

struct Bf16 {  // two bfloat16 per word, element 2k in the low half
    static constexpr int PER_WORD = 2;
    static __device__ __forceinline__ void unpack(unsigned w, float* v) {
        v[0] = __uint_as_float(w << 16);
        v[1] = __uint_as_float(w & 0xffff0000u);
    }
    static __device__ __forceinline__ unsigned pack(const float* v) {  // round to nearest even
        unsigned d;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(v[1]), "f"(v[0]));
        return d;
    }
};

struct Half {  // two float16 per word
    static constexpr int PER_WORD = 2;
    static __device__ __forceinline__ float to_float(unsigned short h) {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
        return f;
    }
    static __device__ __forceinline__ void unpack(unsigned w, float* v) {
        v[0] = to_float((unsigned short)(w & 0xffffu));
        v[1] = to_float((unsigned short)(w >> 16));
    }
    static __device__ __forceinline__ unsigned pack(const float* v) {
        unsigned d;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(v[1]), "f"(v[0]));
        return d;
    }
};

// A lane's WORDS consecutive 32-bit words, with the widest accesses that divide them.
template <int WORDS>
__device__ __forceinline__ void load_words(const void* p, unsigned* w) {
    if constexpr (WORDS % 4 == 0) {
#pragma unroll
        for (int k = 0; k < WORDS / 4; ++k) {
            uint4 u = reinterpret_cast<const uint4*>(p)[k];
            w[4 * k] = u.x; w[4 * k + 1] = u.y; w[4 * k + 2] = u.z; w[4 * k + 3] = u.w;
        }
    } else if constexpr (WORDS % 2 == 0) {
#pragma unroll
        for (int k = 0; k < WORDS / 2; ++k) {
            uint2 u = reinterpret_cast<const uint2*>(p)[k];
            w[2 * k] = u.x; w[2 * k + 1] = u.y;
        }
    } else {
#pragma unroll
        for (int k = 0; k < WORDS; ++k) w[k] = reinterpret_cast<const unsigned*>(p)[k];
    }
}

template <int WORDS>
__device__ __forceinline__ void store_words(void* p, const unsigned* w) {
    if constexpr (WORDS % 4 == 0) {
#pragma unroll
        for (int k = 0; k < WORDS / 4; ++k)
            reinterpret_cast<uint4*>(p)[k] = make_uint4(w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]);
    } else if constexpr (WORDS % 2 == 0) {
#pragma unroll
        for (int k = 0; k < WORDS / 2; ++k)
            reinterpret_cast<uint2*>(p)[k] = make_uint2(w[2 * k], w[2 * k + 1]);
    } else {
#pragma unroll
        for (int k = 0; k < WORDS; ++k) reinterpret_cast<unsigned*>(p)[k] = w[k];
    }
}

// S: storage (F32, Bf16, Half); ITEM: its size in bytes; G: lanes per head (32 or 16);
// SPLIT: NeoX pairs held whole by a lane (two runs); FULL: rotary_dim == HEAD_DIM.
template <typename S, int ITEM, int HEAD_DIM, int G, bool INTERLEAVE, bool SPLIT, bool FULL>
__global__ void fused_qknorm_rope_twin(char* qkv, const char* q_weight, const char* k_weight,
                                       const int* positions, const float* inv_freq,
                                       unsigned heads_q, unsigned heads_qk, unsigned heads_total,
                                       unsigned n_pairs, unsigned half_lanes, float eps,
                                       float attention_factor, unsigned tokens) {
    constexpr int E = HEAD_DIM / G;          // elements per lane
    constexpr int RUNS = SPLIT ? 2 : 1;      // runs of contiguous elements per lane
    constexpr int RUN = E / RUNS;
    constexpr int RUN_WORDS = RUN / S::PER_WORD;
    constexpr int PAIRS = E / 2;
    constexpr bool IN_LANE = INTERLEAVE || SPLIT;
    constexpr int HEADS_PER_WARP = 32 / G;
    const unsigned lane = threadIdx.x & 31u;
    const unsigned sub = lane & (G - 1);     // lane within its head's group
    const unsigned group = lane / G;
    const unsigned warp = blockIdx.y * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const unsigned head0 = warp * HEADS_PER_WARP;
    const unsigned token = blockIdx.x * blockDim.y + threadIdx.y;
    if (head0 >= heads_qk || token >= tokens) return;  // warp-uniform
    const unsigned head = head0 + group;
    const bool valid = head < heads_qk;      // a half warp past the last head still shuffles
    const size_t base = ((size_t)token * heads_total + head) * HEAD_DIM;

    float v[E];
#pragma unroll
    for (int q = 0; q < RUNS; ++q) {
        unsigned w[RUN_WORDS];
        const unsigned off = sub * RUN + q * (HEAD_DIM / 2);
        if (valid) {
            load_words<RUN_WORDS>(qkv + (base + off) * ITEM, w);
        } else {
#pragma unroll
            for (int k = 0; k < RUN_WORDS; ++k) w[k] = 0u;
        }
#pragma unroll
        for (int k = 0; k < RUN_WORDS; ++k) S::unpack(w[k], v + q * RUN + k * S::PER_WORD);
    }
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < E; ++i) ss += v[i] * v[i];
#pragma unroll
    for (int m = G / 2; m >= 1; m >>= 1) ss += __shfl_xor_sync(FULL_MASK, ss, m);
    const float scale = 1.0f / sqrtf(ss * (1.0f / HEAD_DIM) + eps);

    const char* weight = head < heads_q ? q_weight : k_weight;
#pragma unroll
    for (int q = 0; q < RUNS; ++q) {
        unsigned ww[RUN_WORDS];
        float wt[RUN];
        load_words<RUN_WORDS>(weight + (size_t)(sub * RUN + q * (HEAD_DIM / 2)) * ITEM, ww);
#pragma unroll
        for (int k = 0; k < RUN_WORDS; ++k) S::unpack(ww[k], wt + k * S::PER_WORD);
#pragma unroll
        for (int i = 0; i < RUN; ++i) v[q * RUN + i] *= wt[i];
    }

    const float pos = (float)positions[token];
    if (IN_LANE) {
        const float rot = scale * attention_factor;  // rides on cos and sin
        float f[PAIRS];
        if constexpr (FULL && PAIRS % 4 == 0) {
#pragma unroll
            for (int k = 0; k < PAIRS / 4; ++k) {
                const float4 u = reinterpret_cast<const float4*>(inv_freq + sub * PAIRS)[k];
                f[4 * k] = u.x; f[4 * k + 1] = u.y; f[4 * k + 2] = u.z; f[4 * k + 3] = u.w;
            }
        } else {
#pragma unroll
            for (int j = 0; j < PAIRS; ++j)
                f[j] = (FULL || sub * PAIRS + j < n_pairs) ? inv_freq[sub * PAIRS + j] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < PAIRS; ++j) {
            const int a = INTERLEAVE ? 2 * j : j;
            const int b = INTERLEAVE ? 2 * j + 1 : RUN + j;
            const float x0 = v[a], x1 = v[b];
            if (FULL || sub * PAIRS + j < n_pairs) {
                float s, c;
                __sincosf(pos * f[j], &s, &c);
                c *= rot;
                s *= rot;
                v[a] = x0 * c - x1 * s;
                v[b] = x0 * s + x1 * c;
            } else {  // partial rotary: normalized only
                v[a] = x0 * scale;
                v[b] = x1 * scale;
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < E; ++i) v[i] *= scale;
        const bool first_half = sub < half_lanes;
        const bool rotated = sub < 2 * half_lanes;
        const unsigned partner = first_half ? lane + half_lanes : rotated ? lane - half_lanes : lane;
        const unsigned pair0 = first_half ? sub * E : rotated ? (sub - half_lanes) * E : 0u;
        const float sign = first_half ? -1.0f : rotated ? 1.0f : 0.0f;
#pragma unroll
        for (int i = 0; i < E; ++i) {
            const float other = __shfl_sync(FULL_MASK, v[i], partner);
            if (rotated) {
                float s, c;
                __sincosf(pos * inv_freq[pair0 + i], &s, &c);
                v[i] = v[i] * (c * attention_factor) + sign * other * (s * attention_factor);
            }
        }
    }

    if (valid) {
#pragma unroll
        for (int q = 0; q < RUNS; ++q) {
            unsigned w[RUN_WORDS];
#pragma unroll
            for (int k = 0; k < RUN_WORDS; ++k) w[k] = S::pack(v + q * RUN + k * S::PER_WORD);
            store_words<RUN_WORDS>(qkv + (base + sub * RUN + q * (HEAD_DIM / 2)) * ITEM, w);
        }
    }
}
