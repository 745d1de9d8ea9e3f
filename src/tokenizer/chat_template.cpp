#include "tokenizer/chat_template.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_lexer.h"
#include "tokenizer/jinja_parser.h"
#include "tokenizer/jinja_text.h"
#include "tokenizer/jinja_value.h"

namespace pypto {

using jinja::Value;

struct ChatTemplate::Impl {
  std::vector<jinja::NodePtr> program;
};

ChatTemplate::ChatTemplate() : impl_(std::make_unique<Impl>()) {}
ChatTemplate::~ChatTemplate() = default;

std::shared_ptr<const ChatTemplate> ChatTemplate::parse(const std::string& source) {
  std::shared_ptr<ChatTemplate> t(new ChatTemplate());
  t->impl_->program = jinja::parse(jinja::tokenize(source));
  return t;
}

namespace {

// JS objects list "array index" keys ("0", "17", < 2^32-1, no leading zeros) first, in numeric
// order, then the other keys in insertion order. The oracle sees the context through
// JSON.parse + Object.entries, so tojson output follows that order.
bool is_array_index(const std::string& k, unsigned long long& value) {
  if (k.empty() || k.size() > 10) return false;
  if (k.size() > 1 && k[0] == '0') return false;
  value = 0;
  for (char c : k) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned long long>(c - '0');
  }
  return value < 4294967295ULL;
}

template <class J>
Value from_json(const J& j, int depth = 1) {
  if (depth > jinja::kMaxValueDepth)
    fail("chat template: the render context nests more than ", jinja::kMaxValueDepth, " levels deep");
  switch (j.type()) {
    case J::value_t::null: return Value::null();
    case J::value_t::boolean: return Value::from_bool(j.template get<bool>());
    case J::value_t::number_integer: return Value::integer(static_cast<double>(j.template get<long long>()));
    case J::value_t::number_unsigned:
      return Value::integer(static_cast<double>(j.template get<unsigned long long>()));
    case J::value_t::number_float: {
      const double d = j.template get<double>();
      // Number.isInteger: 2.0 arrives in the oracle as an integer.
      return (std::isfinite(d) && std::floor(d) == d) ? Value::integer(d) : Value::floating(d);
    }
    case J::value_t::string: return Value::string(j.template get<std::string>());
    case J::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e, depth + 1));
      return Value::new_list(std::move(items));
    }
    case J::value_t::object: {
      Value d = Value::new_dict();
      using Entry = std::pair<const std::string*, const J*>;
      std::vector<std::pair<unsigned long long, Entry>> index_keys;
      std::vector<Entry> other_keys;
      for (auto it = j.begin(); it != j.end(); ++it) {
        unsigned long long idx;
        if (is_array_index(it.key(), idx))
          index_keys.emplace_back(idx, Entry{&it.key(), &it.value()});
        else
          other_keys.emplace_back(&it.key(), &it.value());
      }
      std::stable_sort(index_keys.begin(), index_keys.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      for (const auto& [idx, e] : index_keys) d.dict->entries.emplace_back(*e.first, from_json(*e.second, depth + 1));
      for (const auto& e : other_keys) d.dict->entries.emplace_back(*e.first, from_json(*e.second, depth + 1));
      for (const auto& kv : d.dict->entries) d.dict->depth = std::max(d.dict->depth, 1 + jinja::nesting_depth(kv.second));
      return d;
    }
    default: fail("chat template: unsupported JSON value in the render context");
  }
}

template <class J>
std::string render_with(const std::vector<jinja::NodePtr>& program, const J& context) {
  if (!context.is_object() && !context.is_null()) fail("chat template: the render context must be a JSON object");
  jinja::Interpreter interpreter;
  auto global = jinja::make_env(nullptr);
  jinja::install_globals(*global, interpreter.namespace_registry());
  if (context.is_object()) {
    for (auto it = context.begin(); it != context.end(); ++it) {
      // The oracle declares each variable once; a name that shadows a built-in is an error.
      if (global->find(it.key())) fail("chat template: Variable already declared: ", it.key());
      global->set(it.key(), from_json(it.value()));
    }
  }
  return jinja::to_output_utf8(interpreter.run(program, global));
}

}  // namespace

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  return render_with(impl_->program, context);
}

std::string ChatTemplate::render(const nlohmann::json& context) const { return render_with(impl_->program, context); }

}  // namespace pypto
