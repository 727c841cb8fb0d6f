/* Kernels of the opencl-events study (seed: OpenCL Event Overhead).
 *
 * scale_offset: the unit of work of the callback and wait experiments, one read and one
 *   write of a float32 buffer (memory-bound, so time grows with the buffer size).
 * worker_step: one step of a logical worker in the dependency experiment. Worker w
 *   writes its own slice of `buf` from an index hash (its "phase" input) and from its
 *   parent's slice, so it depends on the parent's step of the same run and, through the
 *   shared slice, on its own previous step.
 * combine: the final kernel; sums every worker's slice into the host-pointer buffer that
 *   the host then maps.
 */

/* Input of worker w at element i: exact in float32 (16 bits over 2^16), so the NumPy
 * reference reproduces it bit for bit with uint32 arithmetic. */
inline float worker_input(uint i, uint w)
{
    uint h = i * 2654435761u + w * 40503u;
    return (float)(h & 0xFFFFu) * (1.0f / 65536.0f);
}

__kernel void scale_offset(__global const float *in, __global float *out, float gain, float offset)
{
    size_t i = get_global_id(0);
    out[i] = in[i] * gain + offset;
}

__kernel void worker_step(__global float *buf, uint n, uint w, int parent, float gain, float mix)
{
    uint i = (uint)get_global_id(0);
    float p = parent >= 0 ? buf[(size_t)parent * n + i] : 1.0f;
    buf[(size_t)w * n + i] = worker_input(i, w) * gain + p * mix;
}

__kernel void combine(__global const float *buf, __global float *out, uint n, uint workers)
{
    uint i = (uint)get_global_id(0);
    float acc = 0.0f;
    for (uint w = 0; w < workers; ++w)
        acc += buf[(size_t)w * n + i];
    out[i] = acc;
}
