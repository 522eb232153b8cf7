// libFuzzer target: gguf_file::parse must turn any bytes into a file or an error, never a crash,
// and whatever it accepts must be safe to read through every accessor.

#include <cstddef>
#include <cstdint>
#include <span>

#include "src/model/gguf_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto f = strata::model::gguf_file::parse(std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size));
  if (!f) return 0;
  for (const std::string& key : f->keys()) {
    (void)f->get_string(key);
    (void)f->get_int(key);
    (void)f->get_float(key);
    (void)f->get_bool(key);
    (void)f->get_string_array(key);
    (void)f->get_float_array(key);
    (void)f->get_int_array(key);
    (void)f->raw_value(key);
  }
  volatile std::uint8_t sink = 0;
  for (const strata::model::gguf_tensor& t : f->tensors()) {
    // Touch the first and last byte: AddressSanitizer checks they lie inside the input.
    if (t.n_bytes > 0) sink = sink + static_cast<std::uint8_t>(t.data[0]) + static_cast<std::uint8_t>(t.data[t.n_bytes - 1]);
    if (f->find_tensor(t.name) != &t) __builtin_trap();
  }
  (void)f->architecture();
  return 0;
}
