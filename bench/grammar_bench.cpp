// grammar_bench: what constrained decoding costs per token. Builds the grammar engine for a
// model's vocabulary, compiles a 20-property JSON schema (cold, then again from the cache), and
// walks a schema-valid document token by token as a sampler would: fill the mask of allowed
// tokens, set the others' logits to -inf, accept the token. Prints the figures; asserts nothing.
//
//   grammar_bench [--model M.gguf] [--dump DIR] [--repeat N]
//
// --dump writes what bench/grammar_mask.py needs to time the xgrammar Python package on the same
// vocabulary, schema and tokens: vocab.bin (per token: u32 length, bytes), stop.txt, schema.json,
// tokens.txt. The last line is one JSON object of the figures, for that script.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "src/grammar/grammar_compiler.hpp"
#include "src/grammar/grammar_matcher.hpp"
#include "src/model/gguf_file.hpp"
#include "src/tokenizer/tokenizer.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using namespace strata;

double ms_since(clock_type::time_point t0) { return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count(); }

/// 20 properties of every kind a real schema has: strings (free, bounded, enums), numbers,
/// integers with ranges, booleans, arrays, a nested object; all required.
const char* const k_schema = R"({"type": "object", "properties": {
  "id": {"type": "integer"}, "name": {"type": "string"}, "email": {"type": "string"},
  "age": {"type": "integer", "minimum": 0, "maximum": 150}, "score": {"type": "number"},
  "active": {"type": "boolean"}, "role": {"enum": ["admin", "user", "guest"]},
  "tags": {"type": "array", "items": {"type": "string"}}, "city": {"type": "string"},
  "country": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
  "phone": {"type": "string"}, "created": {"type": "string"}, "level": {"type": "integer", "minimum": 1, "maximum": 10},
  "ratio": {"type": "number"}, "verified": {"type": "boolean"}, "notes": {"type": "string"},
  "status": {"enum": ["new", "open", "closed"]}, "manager": {"type": ["string", "null"]},
  "address": {"type": "object", "properties": {"street": {"type": "string"}, "number": {"type": "integer"}},
              "required": ["street", "number"]}},
  "required": ["id", "name", "email", "age", "score", "active", "role", "tags", "city", "country", "zip", "phone",
               "created", "level", "ratio", "verified", "notes", "status", "manager", "address"]})";

/// A document that follows the schema, written as the compiled grammar writes JSON (", ", ": ").
const char* const k_document =
    R"({"id": 1042, "name": "Ada Lovelace", "email": "ada@example.com", "age": 36, "score": 98.5, "active": true, )"
    R"("role": "admin", "tags": ["math", "engines", "poetry"], "city": "London", "country": "United Kingdom", )"
    R"("zip": "12345", "phone": "+44 20 7946 0958", "created": "1843-07-10", "level": 9, "ratio": 0.125, "verified": false, )"
    R"("notes": "Wrote the first published program, for the Analytical Engine.", "status": "open", "manager": null, )"
    R"("address": {"street": "St James's Square", "number": 12}})";

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  // Gemma 3's vocabulary (262k tokens, scripts/fetch-model.sh gemma3): larger than the ~150k of
  // Qwen2 and Llama 3, so the figures bound theirs.
  std::string model = std::string(std::getenv("HOME") ? std::getenv("HOME") : "") + "/.cache/strata/models/gemma-3-270m-q4_k_m.gguf";
  std::string dump;
  int repeat = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--model") model = argv[i + 1];
    else if (k == "--dump") dump = argv[i + 1];
    else if (k == "--repeat") repeat = std::max(1, std::atoi(argv[i + 1]));
  }
  auto f = model::gguf_file::open(model);
  if (!f) return std::fprintf(stderr, "grammar_bench: %s\n", f.err().message.c_str()), 1;
  auto tok = tokenizer::tokenizer::from_gguf(*f);
  if (!tok) return std::fprintf(stderr, "grammar_bench: %s\n", tok.err().message.c_str()), 1;

  auto t0 = clock_type::now();
  const auto vocab = grammar::vocabulary::of(*tok, tok->n_vocab());
  grammar::grammar_compiler compiler(vocab);
  const double setup_ms = ms_since(t0);

  sampling::grammar_spec spec;
  spec.type = sampling::grammar_spec::kind::json_schema;
  spec.text = k_schema;
  spec.strict = true;
  t0 = clock_type::now();
  auto g = compiler.compile(spec);
  const double compile_ms = ms_since(t0);
  if (!g) return std::fprintf(stderr, "grammar_bench: %s\n", g.error.message.c_str()), 1;
  t0 = clock_type::now();
  auto again = compiler.compile(spec);
  const double cached_ms = ms_since(t0);

  const auto tokens = tok->encode(k_document, false, false);
  std::vector<float> logits(static_cast<std::size_t>(vocab.size), 0.0f);
  std::vector<double> fill_us, step_us;
  for (int r = 0; r < repeat; ++r) {
    grammar::grammar_matcher m(g.grammar);
    std::vector<std::uint32_t> mask(static_cast<std::size_t>(m.mask_words()));
    for (auto t : tokens) {
      auto a = clock_type::now();
      m.fill_mask(mask);
      auto b = clock_type::now();
      m.mask_logits(logits.data(), vocab.size);  // fills again, then applies
      auto c = clock_type::now();
      if (!m.accept(t)) return std::fprintf(stderr, "grammar_bench: the document's token %d was refused\n", t), 1;
      auto d = clock_type::now();
      fill_us.push_back(std::chrono::duration<double, std::micro>(b - a).count());
      step_us.push_back(std::chrono::duration<double, std::micro>((c - b) + (d - c)).count());
    }
    if (!m.completed()) return std::fprintf(stderr, "grammar_bench: the document is not complete\n"), 1;
  }

  std::printf("vocabulary: %d tokens (%s), engine setup %.1f ms\n", vocab.size, model.c_str(), setup_ms);
  std::printf("schema of 20 properties: compile %.1f ms, again (cached) %.3f ms%s\n", compile_ms, cached_ms,
              again.grammar == g.grammar ? "" : " (NOT the cached grammar)");
  std::printf("document of %zu tokens x %d runs\n", tokens.size(), repeat);
  std::printf("mask fill per token: median %.1f us, p99 %.1f us\n", percentile(fill_us, 0.5), percentile(fill_us, 0.99));
  std::printf("fill + apply to logits + accept per token: median %.1f us, p99 %.1f us\n", percentile(step_us, 0.5),
              percentile(step_us, 0.99));

  if (!dump.empty()) {
    std::filesystem::create_directories(dump);
    std::ofstream v(dump + "/vocab.bin", std::ios::binary);
    for (const auto& t : vocab.tokens) {
      const auto n = static_cast<std::uint32_t>(t.size());
      v.write(reinterpret_cast<const char*>(&n), sizeof n);
      v.write(t.data(), static_cast<std::streamsize>(t.size()));
    }
    std::ofstream s(dump + "/stop.txt");
    for (auto id : vocab.stop_tokens) s << id << '\n';
    std::ofstream(dump + "/schema.json") << k_schema;
    std::ofstream ts(dump + "/tokens.txt");
    for (auto id : tokens) ts << id << '\n';
  }
  std::printf("{\"vocab\": %d, \"tokens\": %zu, \"compile_ms\": %.3f, \"cached_compile_ms\": %.4f, \"fill_median_us\": %.2f, "
              "\"fill_p99_us\": %.2f, \"step_median_us\": %.2f, \"step_p99_us\": %.2f}\n",
              vocab.size, tokens.size(), compile_ms, cached_ms, percentile(fill_us, 0.5), percentile(fill_us, 0.99),
              percentile(step_us, 0.5), percentile(step_us, 0.99));
  return 0;
}
