// strata: an OpenAI-compatible LLM inference server with a tiered KV cache.

#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "kernels/simd.hpp"
#include "server/commands/command_registry.hpp"

namespace strata::commands {
std::vector<command_entry>& command_list() {
  static std::vector<command_entry> list;
  return list;
}
}  // namespace strata::commands

int main(int argc, char** argv) {
  using namespace strata::commands;
  CLI::App app{"strata: an OpenAI-compatible LLM inference server with a tiered KV cache"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "strata 0.1.0");

  std::map<CLI::App*, std::function<int()>> runners;
  for (auto& entry : command_list()) {
    CLI::App* sub = app.add_subcommand(entry.name, entry.help);
    runners[sub] = entry.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // A STRATA_ISA the CPU cannot honour stops every command at once, before any work.
  if (const auto isa = strata::kernels::configured_simd_level(); !isa.error.empty()) {
    std::fprintf(stderr, "strata: %s\n", isa.error.c_str());
    return 2;
  }
  for (auto& [sub, run] : runners) {
    if (sub->parsed()) return run();
  }
  return 2;
}
