#pragma once
// The random-weight models of tests/golden/synth: each <arch>.args holds the `strata synth` flags
// that bench/reference_dumps.sh wrote its llama.cpp reference with; this writes the same model.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "src/model/synth.hpp"

namespace strata::model::golden_testing {

/// synth_options from the flags in `args_file` (--flag value pairs; a ../shared/ path is taken
/// from shared_dir), writing `out`.
inline synth_options synth_options_from_args(const std::string& args_file, const std::string& shared_dir,
                                             const std::filesystem::path& out) {
  std::ifstream in(args_file);
  std::map<std::string, std::string> flags;
  for (std::string flag, value; in >> flag >> value;) flags[flag] = value;
  auto num = [&](const char* f, int dflt) { return flags.count(f) ? std::stoi(flags[f]) : dflt; };
  synth_options o;
  o.arch = flags["--arch"];
  o.layers = num("--layers", 0);
  o.hidden = num("--hidden", 0);
  o.heads = num("--heads", 0);
  o.kv_heads = num("--kv-heads", 0);
  o.head_dim = num("--head-dim", 0);
  o.ffn = num("--ffn", 0);
  o.ssm_state = num("--ssm-state", 0);
  o.ssm_k_heads = num("--ssm-k-heads", 0);
  o.ssm_v_heads = num("--ssm-v-heads", 0);
  o.ssm_conv = num("--ssm-conv", o.ssm_conv);
  o.attn_interval = num("--attn-interval", o.attn_interval);
  o.experts = num("--experts", o.experts);
  o.experts_used = num("--experts-used", o.experts_used);
  o.expert_ffn = num("--expert-ffn", o.expert_ffn);
  o.ctx = num("--ctx", static_cast<int>(o.ctx));
  o.seed = static_cast<std::uint64_t>(num("--seed", 0));
  o.type = flags.count("--type") ? flags["--type"] : o.type;
  o.vocab = flags["--vocab"];
  const std::string prefix = "../shared/";
  if (o.vocab.rfind(prefix, 0) == 0) o.vocab = shared_dir + "/" + o.vocab.substr(prefix.size());
  o.out = out;
  return o;
}

/// A temporary file that is removed when the test binary ends.
struct temp_model {
  std::filesystem::path path;
  ~temp_model() {
    if (!path.empty()) std::filesystem::remove(path);
  }
};

/// tests/golden/synth/<arch>.args synthesized once per test binary; "" where that fails.
inline std::string synth_model(const std::string& arch, const std::string& shared_dir) {
  static std::map<std::string, temp_model> made;
  auto it = made.find(arch);
  if (it == made.end()) {
    const auto out = std::filesystem::temp_directory_path() / ("strata_golden_" + std::to_string(::getpid()) + "_" + arch + ".gguf");
    synth_options o = synth_options_from_args("tests/golden/synth/" + arch + ".args", shared_dir, out);
    it = made.try_emplace(arch).first;  // built in place: a moved-from copy would remove the file
    if (synthesize(o)) it->second.path = out;
  }
  return it->second.path.string();
}

}  // namespace strata::model::golden_testing
