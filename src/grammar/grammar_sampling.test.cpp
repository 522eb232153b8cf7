// Sampling under a grammar from random logits at temperature 1 (what a random-weight model
// gives): whatever is drawn, the text parses and validates against the schema, or the run hits
// its token limit. Prints its seed; STRATA_TEST_SEED reruns one.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "src/grammar/grammar_test_support.test.hpp"
#include "src/sampling/sampler.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::grammar {
namespace {

namespace json = boost::json;

// Every value bounded (enums, ranges, lengths, item counts), so that random tokens finish the
// document in a few dozen tokens.
const std::string k_schema = R"({"type": "object",
  "properties": {
    "id": {"type": "integer", "minimum": 0, "maximum": 999},
    "kind": {"enum": ["alpha", "beta", "gamma"]},
    "ok": {"type": "boolean"},
    "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 3},
    "inner": {"type": "object", "properties": {"level": {"type": "integer", "minimum": -5, "maximum": 5}},
              "required": ["level"]}},
  "required": ["id", "kind", "ok", "tags", "inner"]})";

/// The schema's rules, checked by hand on a parsed document; "" when it holds, else what fails.
std::string check(const json::value& v) {
  if (!v.is_object()) return "not an object";
  const auto& o = v.as_object();
  if (o.size() != 5) return "not exactly the five properties";
  const auto* id = o.if_contains("id");
  if (!id || !id->is_int64() || id->as_int64() < 0 || id->as_int64() > 999) return "id";
  const auto* k = o.if_contains("kind");
  if (!k || !k->is_string() || (k->as_string() != "alpha" && k->as_string() != "beta" && k->as_string() != "gamma")) return "kind";
  const auto* ok = o.if_contains("ok");
  if (!ok || !ok->is_bool()) return "ok";
  const auto* tags = o.if_contains("tags");
  if (!tags || !tags->is_array() || tags->as_array().size() > 3) return "tags";
  for (const auto& t : tags->as_array())
    if (!t.is_string() || (t.as_string() != "x" && t.as_string() != "y")) return "tags item";
  const auto* inner = o.if_contains("inner");
  if (!inner || !inner->is_object() || inner->as_object().size() != 1) return "inner";
  const auto* level = inner->as_object().if_contains("level");
  if (!level || !level->is_int64() || level->as_int64() < -5 || level->as_int64() > 5) return "inner.level";
  return "";
}

/// Draws up to max_tokens tokens under `g` from random logits; the text, and whether it ended
/// with an end-of-generation token.
std::pair<std::string, bool> generate(const compile_result& g, std::mt19937_64& rng, int max_tokens) {
  const auto& tok = fixture_tokenizer();
  sampling::sampling_params p;
  p.temperature = 1.0f;
  p.seed = rng();
  sampling::sampler s(p, {});
  grammar_matcher m(g.grammar);
  std::normal_distribution<float> noise(0.0f, 3.0f);
  std::vector<float> logits(static_cast<std::size_t>(tok.n_vocab()));
  std::vector<std::int32_t> out;
  for (int i = 0; i < max_tokens; ++i) {
    for (auto& x : logits) x = noise(rng);
    m.mask_logits(logits.data(), tok.n_vocab());
    const auto c = s.draw(logits.data(), tok.n_vocab());
    EXPECT_TRUE(m.accept(c.token)) << "the sampler drew a masked token " << c.token;
    if (tok.is_eog(c.token)) return {tok.decode(out), true};
    out.push_back(c.token);
  }
  return {tok.decode(out), false};
}

TEST(grammar_sampling, random_logits_at_temperature_one_always_give_a_document_that_validates) {
  const auto seed = test_seed();
  std::mt19937_64 rng(seed);
  auto g = fixture().compile(json_schema(k_schema, true));
  ASSERT_TRUE(g) << g.error.message;
  for (int run = 0; run < 20; ++run) {
    auto [text, ended] = generate(g, rng, 400);
    ASSERT_TRUE(ended) << "run " << run << " did not finish: " << text;
    boost::system::error_code ec;
    json::value v = json::parse(text, ec);
    ASSERT_FALSE(ec) << "run " << run << " does not parse: " << text;
    EXPECT_EQ(check(v), "") << "run " << run << ": " << text;
  }
}

TEST(grammar_sampling, random_logits_under_a_gbnf_grammar_stay_in_its_language) {
  const auto seed = test_seed();
  std::mt19937_64 rng(seed);
  auto g = fixture().compile(ebnf(R"gbnf(root ::= "(" item ("," item)* ")"
item ::= [a-c] | "[" [0-9] "]")gbnf"));
  ASSERT_TRUE(g) << g.error.message;
  for (int run = 0; run < 20; ++run) {
    auto [text, ended] = generate(g, rng, 200);
    if (!ended) continue;  // the list may go on past the budget; what was written still matched
    ASSERT_GE(text.size(), 3u);
    EXPECT_EQ(text.front(), '(');
    EXPECT_EQ(text.back(), ')');
    for (char ch : text) EXPECT_NE(std::string("(),[]abc0123456789").find(ch), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace strata::grammar
