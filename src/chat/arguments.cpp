#include "src/chat/arguments.hpp"

#include "src/chat/template_exception.hpp"

namespace strata::chat {

arguments::arguments(const call_args& args, std::string_view function, std::vector<std::string_view> params)
    : function_(function), names_(std::move(params)), bound_(names_.size()) {
  if (args.positional.size() > names_.size()) {
    throw_template_error(function_, "() takes at most ", std::to_string(names_.size()), " argument(s) (",
                         std::to_string(args.positional.size()), " given)");
  }
  for (std::size_t i = 0; i < args.positional.size(); ++i) bound_[i] = args.positional[i];
  for (const auto& [name, v] : args.named) {
    std::size_t i = 0;
    while (i < names_.size() && names_[i] != name) ++i;
    if (i == names_.size()) throw_template_error(function_, "() got an unexpected keyword argument '", name, "'");
    if (bound_[i]) throw_template_error(function_, "() got multiple values for argument '", name, "'");
    bound_[i] = v;
  }
}

std::int64_t arguments::get_int(std::size_t i, std::int64_t fallback) const {
  if (!has(i) || bound_[i]->is_none()) return fallback;
  const value& v = *bound_[i];
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  throw_template_error(function_, "(): argument '", std::string(names_[i]), "' must be an integer, not ", std::string(v.type_name()));
}

std::optional<std::string> arguments::get_string(std::size_t i) const {
  if (!has(i) || bound_[i]->is_none() || bound_[i]->is_undefined()) return std::nullopt;
  const value& v = *bound_[i];
  if (!v.is_string()) {
    throw_template_error(function_, "(): argument '", std::string(names_[i]), "' must be a string, not ", std::string(v.type_name()));
  }
  return v.as_string();
}

}  // namespace strata::chat
