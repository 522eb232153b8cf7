// `strata chat-template`: renders a chat template for a conversation, byte for byte.

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include <boost/json.hpp>

#include "src/chat/chat_template.hpp"
#include "server/commands/command_registry.hpp"

namespace {

struct chat_template_options {
  std::string template_path;
  std::string messages_path;
  bool add_generation_prompt = false;
  std::string bos;
  std::string eos;
  std::string date;  ///< YYYY-MM-DD for strftime_now(), empty for the system clock
};

/// Noon (local time) of `date` given as YYYY-MM-DD, or nullopt when it does not read as one.
std::optional<std::chrono::system_clock::time_point> parse_date(const std::string& date) {
  std::tm tm{};
  char tail = 0;
  if (std::sscanf(date.c_str(), "%4d-%2d-%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tail) != 3) return std::nullopt;
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31) return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  std::time_t t = std::mktime(&tm);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(t);
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

int run_chat_template(const chat_template_options& opts) {
  std::string source, messages_text;
  if (!read_file(opts.template_path, source)) {
    std::cerr << "cannot read template " << opts.template_path << "\n";
    return 2;
  }
  if (!read_file(opts.messages_path, messages_text)) {
    std::cerr << "cannot read messages " << opts.messages_path << "\n";
    return 2;
  }
  boost::system::error_code ec;
  boost::json::value input = boost::json::parse(messages_text, ec);
  if (ec) {
    std::cerr << opts.messages_path << ": invalid JSON: " << ec.message() << "\n";
    return 2;
  }
  boost::json::array messages;
  boost::json::object extra;
  if (input.is_array()) {
    messages = input.as_array();
  } else if (input.is_object() && input.as_object().contains("messages") && input.as_object().at("messages").is_array()) {
    for (const auto& [k, v] : input.as_object()) {
      if (k == "messages") messages = v.as_array();
      else extra[k] = v;
    }
  } else {
    std::cerr << opts.messages_path << ": expected a JSON array of messages or an object with \"messages\"\n";
    return 2;
  }
  auto tpl = strata::chat::chat_template::parse(std::move(source));
  if (!tpl) {
    std::cerr << tpl.err().message << "\n";
    return 1;
  }
  if (!opts.date.empty()) {
    auto now = parse_date(opts.date);
    if (!now) {
      std::cerr << "--date must read YYYY-MM-DD, got " << opts.date << "\n";
      return 2;
    }
    tpl->set_clock([t = *now] { return t; });
  }
  auto out = tpl->render_chat(messages, opts.add_generation_prompt, opts.bos, opts.eos, extra);
  if (!out) {
    std::cerr << out.err().message << "\n";
    return 1;
  }
  std::fwrite(out->data(), 1, out->size(), stdout);
  std::fflush(stdout);
  return 0;
}

const bool registered = strata::commands::register_command(
    "chat-template", "Render a chat template for a conversation (as apply_chat_template would)",
    [](CLI::App& sub) {
      auto opts = std::make_shared<chat_template_options>();
      sub.add_option("--template", opts->template_path, "The Jinja chat template file")->required();
      sub.add_option("--messages", opts->messages_path,
                     "A JSON file: an array of messages, or an object with \"messages\" and any other "
                     "variables for the template (tools, documents, enable_thinking, ...)")
          ->required();
      sub.add_flag("--add-generation-prompt", opts->add_generation_prompt, "Open an assistant turn at the end");
      sub.add_option("--bos", opts->bos, "The bos_token string (default empty)");
      sub.add_option("--eos", opts->eos, "The eos_token string (default empty)");
      sub.add_option("--date", opts->date, "The day strftime_now() sees, YYYY-MM-DD (default: today)");
      sub.footer(
          "Prints the rendering to stdout byte for byte. A template error (raise_exception or a "
          "failure while rendering) prints its message to stderr and exits 1. tools and documents "
          "are none unless the messages file sets them; strftime_now() reads the system clock unless "
          "--date is given. Exit status 2: unreadable files or bad options.");
      return std::function<int()>([opts] { return run_chat_template(*opts); });
    });

}  // namespace
