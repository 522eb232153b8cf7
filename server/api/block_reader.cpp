#include "server/api/block_reader.hpp"

namespace strata::api {

using kind = schema::content_block::kind;

block_reader::block_reader(const std::optional<chat::parser_options>& output, bool streaming) : streaming_(streaming) {
  if (output) parser_.emplace(*output);
}

void block_reader::feed(const std::string& text) {
  if (text.empty()) return;
  if (!parser_) return append(kind::text, text);
  add(parser_->feed(text));
}

void block_reader::finish() {
  if (parser_) add(parser_->finish());
}

void block_reader::add(const std::vector<chat::parse_event>& events) {
  for (const auto& ev : events) {
    switch (ev.type) {
      case chat::parse_event::kind::content: append(kind::text, ev.text); break;
      case chat::parse_event::kind::reasoning: append(kind::thinking, ev.text); break;
      case chat::parse_event::kind::call:
        ++calls_;
        blocks_.push_back({kind::tool_use, ev.call.arguments, ev.call.id, ev.call.name});
        record(ev.call.arguments);
        break;
    }
  }
}

void block_reader::append(kind k, const std::string& text) {
  if (text.empty()) return;
  if (blocks_.empty() || blocks_.back().type != k) blocks_.push_back({k, {}, {}, {}});
  blocks_.back().text += text;
  record(text);
}

void block_reader::record(const std::string& text) {
  if (streaming_) pieces_.push_back({static_cast<int>(blocks_.size()) - 1, text});
}

}  // namespace strata::api
