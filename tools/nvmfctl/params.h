// nvmfctl tgt: the words after METHOD as the JSON-RPC params object. Pure (no I/O), so the
// mapping is unit-tested without a target.
//
//   --key VALUE | --key=VALUE   params["key"] = VALUE as JSON when it is a JSON number, true,
//                               false, null, an array or an object; a JSON string literal
//                               ('"1024"') is that string; anything else is the text itself
//   --params JSON               the whole object (merged with the --key ones; no key twice)
//   -o human|json, -h, --help   the tool's own (output format, the method's summary)
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace nvmf::ctl {

using Json = nlohmann::json;

// The value of one --key VALUE, as described above.
Json parse_param_value(std::string_view text);

// What follows METHOD on the command line.
struct MethodArgs {
  Json params = Json::object();
  std::string output;  // -o FORMAT after METHOD; empty when not given
  bool help = false;   // -h or --help after METHOD
};

// Fills *args from the words after METHOD. "" or a one-line reason naming the word (a key
// given twice, a key without a value, a word that is not --key, --params that is not an
// object): a usage error.
std::string parse_method_args(const std::vector<std::string>& words, MethodArgs* args);

}  // namespace nvmf::ctl
