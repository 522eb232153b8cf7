#pragma once
// One block of 32 activations (one value per lane of a warp) rounded to 8 bits, as act_q8 holds
// them: levels round(v * 127 / amax), the block's (d = amax / 127, d * sum of its levels). Shared
// by quantize_act and rms_norm_quantize so that both give the same bytes.

#include <cstdint>

namespace strata::kernels::cuda {

__device__ __forceinline__ void quantize_block(float v, int lane, std::int8_t* q, float2* ds) {
  float amax = fabsf(v);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  const int l = max(-127, min(127, __float2int_rn(v * inv)));
  q[lane] = static_cast<std::int8_t>(l);
  int sum = l;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
  const float d = amax / 127.0f;
  if (lane == 0) *ds = make_float2(d, d * static_cast<float>(sum));
}

}  // namespace strata::kernels::cuda
