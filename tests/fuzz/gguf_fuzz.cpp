// libFuzzer target: arbitrary bytes as a GGUF file through the whole load path. gguf_file::parse
// must turn any bytes into a file or an error, never a crash; whatever it accepts must be safe to
// read through every accessor, and hparams::from_gguf, model_weights::bind and
// tokenizer::from_gguf must each refuse what is inconsistent (and what they accept must be safe to
// use: every bound tensor lies inside the input, the tokenizer encodes and decodes).

#include <cstddef>
#include <cstdint>
#include <span>

#include "src/model/gguf_file.hpp"
#include "src/model/hparams.hpp"
#include "src/model/weights.hpp"
#include "src/tokenizer/tokenizer.hpp"

namespace {

volatile std::uint8_t sink = 0;

/// Touches the first and last byte of a view: AddressSanitizer checks they lie inside the input.
void touch(const strata::model::tensor_view& v) {
  if (!v) return;
  const auto* p = static_cast<const std::uint8_t*>(v.data);
  const std::size_t n = strata::kernels::row_bytes(v.type, v.cols) * static_cast<std::size_t>(v.rows);
  if (n > 0) sink = sink + p[0] + p[n - 1];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace strata;
  auto f = model::gguf_file::parse(std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size));
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
  for (const model::gguf_tensor& t : f->tensors()) {
    if (t.n_bytes > 0) sink = sink + static_cast<std::uint8_t>(t.data[0]) + static_cast<std::uint8_t>(t.data[t.n_bytes - 1]);
    if (f->find_tensor(t.name) != &t) __builtin_trap();
  }
  (void)f->architecture();

  if (auto hp = model::hparams::from_gguf(*f)) {
    if (auto w = model::model_weights::bind(*f, *hp)) {
      touch(w->token_embd);
      touch(w->output);
      touch(w->output_norm);
      for (const auto& l : w->layers)
        for (const auto* v : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wqkv, &l.wo, &l.ffn_norm, &l.gate, &l.up, &l.gate_up, &l.down}) touch(*v);
    }
  }
  if (auto tok = tokenizer::tokenizer::from_gguf(*f)) {
    auto ids = tok->encode("Hello world, <s> caf\xC3\xA9 123 \xE2\x96\x81 <|im_end|>", true, true);
    for (std::int32_t id : ids)
      if (id < 0 || id >= tok->n_vocab()) __builtin_trap();
    (void)tok->decode(ids, true);
    for (std::int32_t id : {tok->bos_id(), tok->eos_id(), tok->eot_id(), tok->pad_id(), tok->unk_id()})
      if (id >= tok->n_vocab()) __builtin_trap();
  }
  return 0;
}
