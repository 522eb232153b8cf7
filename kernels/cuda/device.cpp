#include "kernels/cuda/device.hpp"

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace strata::kernels::cuda {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw cuda_error(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

void check_launch(const char* what) { check(cudaGetLastError(), what); }

int multiprocessor_count() {
  static const int n = [] {
    int dev = 0, count = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
    return count;
  }();
  return n;
}

bool pdl_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("STRATA_CUDA_PDL");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

bool pdl_enabled(const char* what) {
  static const std::string off = [] {
    const char* v = std::getenv("STRATA_CUDA_PDL_OFF");
    return v ? "," + std::string(v) + "," : std::string();
  }();
  if (!pdl_enabled()) return false;
  return off.empty() || off.find("," + std::string(what) + ",") == std::string::npos;
}

device_buffer::device_buffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes) check(cudaMalloc(&p_, bytes), "cudaMalloc");
}

device_buffer& device_buffer::operator=(device_buffer&& o) noexcept {
  if (this != &o) {
    if (p_) cudaFree(p_);
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

device_buffer::~device_buffer() {
  if (p_) cudaFree(p_);
}

void device_buffer::upload(const void* src, std::size_t n, cudaStream_t stream, std::size_t offset) {
  if (offset + n > bytes_) throw cuda_error("device_buffer::upload: past the end of the buffer");
  check(cudaMemcpyAsync(static_cast<char*>(p_) + offset, src, n, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync (upload)");
}

void device_buffer::download(void* dst, std::size_t n, cudaStream_t stream, std::size_t offset) const {
  if (offset + n > bytes_) throw cuda_error("device_buffer::download: past the end of the buffer");
  check(cudaMemcpyAsync(dst, static_cast<const char*>(p_) + offset, n, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync (download)");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

device_event::device_event() { check(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "cudaEventCreate"); }

device_event& device_event::operator=(device_event&& o) noexcept {
  if (this != &o) {
    if (e_) cudaEventDestroy(e_);
    e_ = o.e_;
    o.e_ = nullptr;
  }
  return *this;
}

device_event::~device_event() {
  if (e_) cudaEventDestroy(e_);
}

void device_event::record(cudaStream_t stream) { check(cudaEventRecord(e_, stream), "cudaEventRecord"); }

}  // namespace strata::kernels::cuda
