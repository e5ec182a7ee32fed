
template <typename I>
__device__ __forceinline__ void rope_pair(const float* x, float* out, const int* positions,
                                          I n_pairs, I idx, float base) {
    I token = idx / n_pairs;
    I pair = idx % n_pairs;
    float x0 = x[2 * idx];
    float x1 = x[2 * idx + 1];
    float exponent = (float)(2 * pair) / (float)(2 * n_pairs);
    float inv_freq = 1.0f / powf(base, exponent);
    float angle = (float)positions[token] * inv_freq;
    float c = cosf(angle), s = sinf(angle);
    out[2 * idx] = x0 * c - x1 * s;
    out[2 * idx + 1] = x0 * s + x1 * c;
}

extern "C" __global__ void rope_flat_i64(const float* x, float* out, const int* positions,
                                         long long n_pairs, long long total_pairs, float base) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < total_pairs) rope_pair<long long>(x, out, positions, n_pairs, idx, base);
}

extern "C" __global__ void rope_flat_i32(const float* x, float* out, const int* positions,
                                         int n_pairs, int total_pairs, float base) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < total_pairs) rope_pair<int>(x, out, positions, n_pairs, idx, base);
}

// Two adjacent pairs per thread through one 16-byte load and store; n_pairs must be even so
// that every quad starts on a 16-byte boundary.
extern "C" __global__ void rope_float4_i64(const float* x, float* out, const int* positions,
                                           long long n_pairs, long long quads_per_row,
                                           long long total_quads, float base) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total_quads) return;
    long long token = idx / quads_per_row;
    long long pair = 2 * (idx % quads_per_row);
    long long i = token * 2 * n_pairs + 2 * pair;
    float pos = (float)positions[token];
    float inv_hidden = 1.0f / (float)(2 * n_pairs);
    float a0 = pos / powf(base, (float)(2 * pair) * inv_hidden);
    float a1 = pos / powf(base, (float)(2 * pair + 2) * inv_hidden);
    float4 v = *reinterpret_cast<const float4*>(x + i);
    float c0 = cosf(a0), s0 = sinf(a0), c1 = cosf(a1), s1 = sinf(a1);
    float4 r;
    r.x = v.x * c0 - v.y * s0;
    r.y = v.x * s0 + v.y * c0;
    r.z = v.z * c1 - v.w * s1;
    r.w = v.z * s1 + v.w * c1;
    *reinterpret_cast<float4*>(out + i) = r;
}

extern "C" __global__ void empty_kernel() {}
