#pragma once
// Test code only: a copy of a GGUF file with one metadata key dropped and others added, for the
// tests that check how hparams reads variants of a synthesized layout.

#include <gtest/gtest.h>

#include <filesystem>
#include <span>
#include <string>
#include <utility>

#include "src/model/gguf_file.hpp"
#include "src/model/gguf_writer.hpp"

namespace strata::model::testing {

/// A copy of f at `path` without metadata key `drop`, with whatever `add` writes.
template <class Add>
gguf_file rewrite(const gguf_file& f, const std::string& drop, const std::filesystem::path& path, Add&& add) {
  gguf_writer w;
  for (const std::string& k : f.keys())
    if (k != drop) {
      EXPECT_TRUE(w.copy_kv(f, k)) << k;
    }
  add(w);
  for (const gguf_tensor& t : f.tensors())
    EXPECT_TRUE(w.add_tensor(t.name, t.type, std::span<const std::int64_t>(t.ne.data(), static_cast<std::size_t>(t.n_dims)),
                             std::span<const std::byte>(t.data, t.n_bytes)));
  EXPECT_TRUE(w.write_file(path));
  auto g = gguf_file::open(path);
  EXPECT_TRUE(g);
  return std::move(*g);
}

}  // namespace strata::model::testing
