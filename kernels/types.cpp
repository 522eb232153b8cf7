#include "kernels/types.hpp"

#include <cstdio>

namespace strata::kernels {

std::optional<dtype> dtype_from_id(std::uint32_t id) {
  switch (id) {
    case 0: case 1: case 2: case 3: case 6: case 7: case 8: case 12: case 13: case 14: case 20: case 30: case 39:
      return static_cast<dtype>(id);
    default: return std::nullopt;
  }
}

const char* dtype_name(dtype t) { return ggml_type_name(static_cast<std::uint32_t>(t)); }

const char* ggml_type_name(std::uint32_t id) {
  static const char* const names[] = {"f32",  "f16",  "q4_0",  "q4_1",    "q4_2",    "q4_3",    "q5_0",  "q5_1",
                                      "q8_0", "q8_1", "q2_K",  "q3_K",    "q4_K",    "q5_K",    "q6_K",  "q8_K",
                                      "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs",
                                      "i8",   "i16",  "i32",   "i64",     "f64",     "iq1_m",   "bf16",  "q4_0_4_4",
                                      "q4_0_4_8", "q4_0_8_8", "tq1_0", "tq2_0", "iq4_nl_4_4", "iq4_nl_4_8", "iq4_nl_8_8",
                                      "mxfp4"};
  if (id < sizeof(names) / sizeof(names[0])) return names[id];
  thread_local char buf[24];
  std::snprintf(buf, sizeof(buf), "unknown(%u)", id);
  return buf;
}

std::int64_t block_elements(dtype t) {
  switch (t) {
    case dtype::f32: case dtype::f16: case dtype::bf16: return 1;
    case dtype::q4_0: case dtype::q4_1: case dtype::q5_0: case dtype::q5_1: case dtype::q8_0: case dtype::iq4_nl:
    case dtype::mxfp4: return 32;
    case dtype::q4_k: case dtype::q5_k: case dtype::q6_k: return 256;
  }
  return 1;
}

std::size_t block_bytes(dtype t) {
  switch (t) {
    case dtype::f32: return 4;
    case dtype::f16: case dtype::bf16: return 2;
    case dtype::q4_0: return 18;
    case dtype::q4_1: return 20;
    case dtype::q5_0: return 22;
    case dtype::q5_1: return 24;
    case dtype::q8_0: return 34;
    case dtype::q4_k: return 144;
    case dtype::q5_k: return 176;
    case dtype::q6_k: return 210;
    case dtype::iq4_nl: return 18;
    case dtype::mxfp4: return 17;
  }
  return 0;
}

}  // namespace strata::kernels
