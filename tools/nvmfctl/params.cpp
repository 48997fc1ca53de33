#include "params.h"

#include <cctype>

namespace nvmf::ctl {

namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// A word that names a key: "--" and then something. "--" alone is not a key.
bool is_key_word(std::string_view word) { return word.size() > 2 && word.substr(0, 2) == "--"; }

std::string add_key(const std::string& key, Json value, Json* params) {
  if (params->contains(key)) return "--" + key + " given twice";
  (*params)[key] = std::move(value);
  return "";
}

}  // namespace

Json parse_param_value(std::string_view text) {
  // Surrounding whitespace would be skipped by the JSON parser; " 12" was typed as text.
  if (text.empty() || is_space(text.front()) || is_space(text.back())) return Json(text);
  Json parsed = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Json(text);
  // Numbers, true/false/null, arrays, objects; and a quoted JSON string is the way to pass
  // text that would otherwise read as one of those ('"1024"', '"null"').
  return parsed;
}

std::string parse_method_args(const std::vector<std::string>& words, MethodArgs* args) {
  Json params = Json::object();
  Json whole;  // --params, merged at the end so that duplicates are found either way round
  bool whole_given = false;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word == "-h" || word == "--help") {
      args->help = true;
      continue;
    }
    if (word == "-o" || (word.size() > 2 && word.substr(0, 2) == "-o" && word[2] != '-')) {
      // -o FORMAT or -oFORMAT: the tool's output format (a param is always --key).
      if (word == "-o") {
        if (i + 1 == words.size()) return "-o needs a value: human or json";
        args->output = words[++i];
      } else {
        args->output = word.substr(2);
      }
      continue;
    }
    if (!is_key_word(word)) {
      return "unexpected '" + word + "': parameters are --key VALUE, --key=VALUE or --params JSON";
    }
    std::string key;
    std::string value;
    const size_t equals = word.find('=');
    if (equals != std::string::npos) {
      key = word.substr(2, equals - 2);
      value = word.substr(equals + 1);
      if (key.empty()) return "'" + word + "': no key before '='";
    } else {
      key = word.substr(2);
      // A following --word is the next key, not this one's value ('--key=--x' passes one).
      if (i + 1 == words.size() || is_key_word(words[i + 1])) {
        return "--" + key + " needs a value (--" + key + " VALUE or --" + key + "=VALUE)";
      }
      value = words[++i];
    }
    if (key == "params") {
      if (whole_given) return "--params given twice";
      whole_given = true;
      whole = Json::parse(value, nullptr, /*allow_exceptions=*/false);
      if (whole.is_discarded() || !whole.is_object()) {
        return "--params: not a JSON object: " + value;
      }
      continue;
    }
    if (std::string error = add_key(key, parse_param_value(value), &params); !error.empty()) {
      return error;
    }
  }
  if (whole_given) {
    for (auto& [key, value] : whole.items()) {
      if (params.contains(key)) return "--" + key + " given twice (also in --params)";
      params[key] = value;
    }
  }
  args->params = std::move(params);
  return "";
}

}  // namespace nvmf::ctl
