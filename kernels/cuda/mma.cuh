#pragma once
// The tensor-core and shared-memory instructions the GEMM and the prefill attention share
// (sm_80 and later): mma.sync m16n8k16 with f16 inputs and f32 sums, ldmatrix, and cp.async.
//
// Fragments of m16n8k16 (g = lane / 4, t = lane % 4), two f16 values a register:
//   A (16 x 16, row major): a0 (g, 2t..2t+1), a1 (g + 8, 2t..), a2 (g, 2t + 8..), a3 (g + 8, 2t + 8..)
//   B (16 x 8, column n = g): b0 (k 2t..2t+1), b1 (k 2t + 8..)
//   C (16 x 8, f32): c0, c1 (g, 2t..2t+1), c2, c3 (g + 8, 2t..2t+1)

#include <cuda_fp16.h>

namespace strata::kernels::cuda {

/// c += a * b.
__device__ __forceinline__ void mma16816(float* c, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

/// Four 8 x 8 f16 matrices from shared memory: lanes 8i..8i+7 give the 16-byte rows of matrix i;
/// r[i] is this lane's part of matrix i (row lane / 4, columns 2 (lane % 4)..+1).
__device__ __forceinline__ void ldmatrix_x4(unsigned* r, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}

/// The same, each matrix transposed: r[i] holds (row 2 (lane % 4)..+1, column lane / 4).
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned* r, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}

/// Copies 16 bytes from global to shared memory without passing through registers; when `live`
/// is false the 16 bytes become zeros and nothing is read.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool live) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(live ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
/// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/// Two floats as one register of f16 (x in the low half).
__device__ __forceinline__ unsigned pack_half2(float x, float y) {
  const __half2 h = __floats2half2_rn(x, y);
  return *reinterpret_cast<const unsigned*>(&h);
}

/// x and y as two f16 parts each: hi = their rounding (as pack_half2), lo = what it left, rounded.
/// hi + lo holds about 22 bits of each value, so a product taken with both parts on the tensor
/// cores is nearly as exact as one of f32 values.
__device__ __forceinline__ void split_half2(float x, float y, unsigned& hi, unsigned& lo) {
  const __half2 h = __floats2half2_rn(x, y);
  const float2 back = __half22float2(h);
  hi = *reinterpret_cast<const unsigned*>(&h);
  lo = pack_half2(x - back.x, y - back.y);
}

}  // namespace strata::kernels::cuda
