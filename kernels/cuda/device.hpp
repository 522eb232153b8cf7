#pragma once
// Device memory and error checks of the CUDA kernels. Everything here is plain C++ over the CUDA
// runtime API, so that code compiled without nvcc (a layer actor) can own buffers and call the
// kernels: every kernel takes device pointers and the stream it is queued on.

#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include <cuda_runtime_api.h>

namespace strata::kernels::cuda {

/// A failed CUDA call; what() names the call and the CUDA error.
struct cuda_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Throws cuda_error when e is not cudaSuccess.
void check(cudaError_t e, const char* what);
/// Throws cuda_error when the last launch failed to start (cudaGetLastError).
void check_launch(const char* what);

/// The multiprocessors of the current device (asked once).
int multiprocessor_count();

/// Whether the decode kernels may start before the kernel ahead of them ends (pdl.cuh): on
/// unless the environment sets STRATA_CUDA_PDL=0 (read once).
bool pdl_enabled();
/// pdl_enabled() for the launch named `what`: off also where STRATA_CUDA_PDL_OFF lists the name
/// (comma-separated, as launch_pdl names its launches), to find which launch a difference needs.
bool pdl_enabled(const char* what);

/// An owned device allocation (cudaMalloc; never managed memory). Move-only.
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t bytes);
  device_buffer(device_buffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr, o.bytes_ = 0; }
  device_buffer& operator=(device_buffer&& o) noexcept;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer();

  void* data() const { return p_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  std::size_t bytes() const { return bytes_; }
  /// Copies n bytes from host memory to the start of the buffer (or at `offset`), queued on stream.
  void upload(const void* src, std::size_t n, cudaStream_t stream, std::size_t offset = 0);
  /// Copies n bytes from the buffer to host memory and waits for the stream.
  void download(void* dst, std::size_t n, cudaStream_t stream, std::size_t offset = 0) const;

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

/// An owned CUDA event without timing (cudaEventDisableTiming). Move-only. An event never
/// recorded is complete: a stream told to wait for it does not wait.
class device_event {
 public:
  device_event();
  device_event(device_event&& o) noexcept : e_(o.e_) { o.e_ = nullptr; }
  device_event& operator=(device_event&& o) noexcept;
  device_event(const device_event&) = delete;
  device_event& operator=(const device_event&) = delete;
  ~device_event();

  cudaEvent_t get() const { return e_; }
  /// Records the work queued on stream so far.
  void record(cudaStream_t stream);

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace strata::kernels::cuda
