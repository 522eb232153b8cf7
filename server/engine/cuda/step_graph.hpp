#pragma once
// One layer's decode kernels replayed as a CUDA graph. A decode step queues a dozen short kernels
// per layer; as a graph the device runs them with shorter gaps between one and the next. The
// sequence is captured anew every step, because its parameters move (the attention's length and
// split count, the step's buffers), and the executable graph is updated in place when only
// parameters changed, or made anew when the kernels did (a split count of one drops the merge).
// A capture that fails (a call not allowed while capturing) turns the graph off for this layer
// and the kernels run directly, the same kernels either way.

#include <cstddef>
#include <functional>

#include <cuda_runtime_api.h>

namespace strata::engine::gpu {

class step_graph {
 public:
  step_graph() = default;
  ~step_graph();
  step_graph(const step_graph&) = delete;
  step_graph& operator=(const step_graph&) = delete;

  /// Queues queue(stream)'s kernels on stream as one graph launch (or directly, see above). The
  /// kernels must not allocate, free or wait: size buffers before.
  void run(cudaStream_t stream, const std::function<void(cudaStream_t)>& queue);

  /// Graph launches, and how many of them needed a new executable graph.
  long launches() const { return launches_; }
  long instantiations() const { return instantiations_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
  std::size_t nodes_ = 0;  // the kernels in exec_
  bool off_ = false;
  long launches_ = 0, instantiations_ = 0;
  double host_seconds_ = 0;  // spent in run(): capture, update or instantiation, launch
};

/// With STRATA_CUDA_GRAPH_STATS=1 each layer's graph prints its launches and the host time a launch
/// took (capture, update, launch) when it goes: against the device's time per layer, whether the
/// host keeps ahead of the device in decode.

/// Whether decode steps run as graphs: yes unless STRATA_CUDA_GRAPHS=0 (to compare).
bool graphs_enabled();

}  // namespace strata::engine::gpu
