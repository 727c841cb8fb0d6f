// CUDA twin of scale_offset in event_overhead.cl, for the experiment=cuda comparison:
// the same read-compute-write of a float32 buffer, so OpenCL and CUDA times line up.
extern "C" __global__ void scale_offset(const float *in, float *out, float gain, float offset,
                                        unsigned long long n)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] * gain + offset;
}
