#include "server/engine/cuda/step_graph.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/device.hpp"

namespace strata::engine::gpu {

namespace cu = kernels::cuda;

namespace {

bool graph_stats() {
  static const bool on = [] {
    const char* v = std::getenv("STRATA_CUDA_GRAPH_STATS");
    return v && std::strcmp(v, "1") == 0;
  }();
  return on;
}

}  // namespace

step_graph::~step_graph() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_stats() && launches_ > 0)
    std::fprintf(stderr, "step_graph: %ld launches, %ld instantiations, %.1f us of host time a launch\n", launches_, instantiations_,
                 host_seconds_ * 1e6 / static_cast<double>(launches_));
}

void step_graph::run(cudaStream_t stream, const std::function<void(cudaStream_t)>& queue) {
  const auto start = std::chrono::steady_clock::now();
  if (off_) {
    queue(stream);
    return;
  }
  cu::check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    queue(stream);
  } catch (const cu::cuda_error& e) {
    // A call the capture refused: nothing ran yet; drop the capture and run the kernels directly.
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    off_ = true;
    std::fprintf(stderr, "CUDA graph capture failed (%s): this layer's kernels run without a graph\n", e.what());
    queue(stream);
    return;
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  cu::check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  std::size_t nodes = 0;
  cu::check(cudaGraphGetNodes(graph, nullptr, &nodes), "cudaGraphGetNodes");
  // An update takes new parameters (kernels included), not a new shape: a kernel more or fewer
  // (the attention's merge comes and goes with its split count) needs a new executable graph.
  if (exec_ && nodes != nodes_) {
    cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
  }
  if (exec_) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(exec_, graph, &info) != cudaSuccess) {
      cudaGetLastError();  // another change an update cannot take: make a new executable graph
      cudaGraphExecDestroy(exec_);
      exec_ = nullptr;
    }
  }
  nodes_ = nodes;
  if (!exec_) {
    const cudaError_t e = cudaGraphInstantiate(&exec_, graph, 0);
    if (e != cudaSuccess) {
      cudaGraphDestroy(graph);
      exec_ = nullptr;
      cu::check(e, "cudaGraphInstantiate");
    }
    ++instantiations_;
  }
  cudaGraphDestroy(graph);
  cu::check(cudaGraphLaunch(exec_, stream), "cudaGraphLaunch");
  ++launches_;
  host_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool graphs_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("STRATA_CUDA_GRAPHS");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

}  // namespace strata::engine::gpu
