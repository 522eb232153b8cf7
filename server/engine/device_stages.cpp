#include "server/engine/device_stages.hpp"

#include <stdexcept>

#if STRATA_CUDA
#include "server/engine/cuda/gpu_stages.hpp"
#endif

namespace strata::engine {

#if STRATA_CUDA
result<device_stages> make_gpu_stages(const std::shared_ptr<const model::model>& m, const kv::block_space& pages,
                                      std::int32_t page_tokens) {
  if (auto why = gpu::unsupported(*m); !why.empty()) return fail(errc::unsupported, "--device cuda: ", why);
  try {
    auto ctx = std::make_shared<gpu::gpu_context>(m->hp, page_tokens);
    device_stages d;
    std::size_t weights = 0, kv = 0;
    for (int il = 0; il < m->hp.n_layer; ++il) {
      auto l = std::make_shared<gpu::gpu_layer_stage>(m, il, pages, ctx);
      weights += l->weight_bytes();
      kv += l->kv_bytes();
      d.layers.push_back(std::move(l));
    }
    auto out = std::make_shared<gpu::gpu_output_stage>(m, ctx);
    weights += out->weight_bytes();
    d.output = std::move(out);
    d.summary = ctx->device_name() + ", " + std::to_string(weights >> 20) + " MiB of weights and " + std::to_string(kv >> 20) +
                " MiB of KV pages (f16 and q8_0 pools) on it";
    return d;
  } catch (const std::exception& e) {
    return fail(errc::unsupported, "--device cuda: ", e.what());
  }
}
#else
result<device_stages> make_gpu_stages(const std::shared_ptr<const model::model>&, const kv::block_space&, std::int32_t) {
  return fail(errc::unsupported, "--device cuda: this strata was built without CUDA (configure with -DSTRATA_CUDA=ON)");
}
#endif

}  // namespace strata::engine
