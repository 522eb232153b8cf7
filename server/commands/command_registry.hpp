#pragma once
// The `strata <subcommand>` registry: each server/commands/*_command.cpp registers itself.

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace strata::commands {

/// Adds a subcommand's options to `sub` and returns what runs it once the command line is parsed.
/// The runner returns the process exit code.
using command_setup = std::function<std::function<int()>(CLI::App& sub)>;

struct command_entry {
  std::string name;
  std::string help;
  command_setup setup;
};

/// All registered subcommands, in registration order.
std::vector<command_entry>& command_list();

/// Registers a subcommand; use at namespace scope: `const bool registered = register_command(...)`.
inline bool register_command(std::string name, std::string help, command_setup setup) {
  command_list().push_back({std::move(name), std::move(help), std::move(setup)});
  return true;
}

}  // namespace strata::commands
