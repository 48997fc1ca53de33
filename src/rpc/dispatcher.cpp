// JSON-RPC 2.0 request handling (https://www.jsonrpc.org/specification): validation of the
// request object, batches, notifications, and the param_* helpers. Exceptions live only here:
// a method may throw, handle() turns everything into an error response (STYLE 7).
#include <cassert>
#include <exception>
#include <optional>
#include <utility>

#include "rpc/framing.h"
#include "rpc/rpc.h"

namespace nvmf::rpc {

namespace {

constexpr const char* kGetMethodsName = "rpc_get_methods";
constexpr const char* kGetMethodsSummary = "list the methods with a one-line summary each";

// nlohmann's what() starts with "[json.exception.parse_error.101] " (or out_of_range.406 for
// a number too large); the rest says what and where.
std::string without_exception_prefix(const char* what) {
  std::string text(what);
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find("] ");
    if (close != std::string::npos) text.erase(0, close + 2);
  }
  return text;
}

Json invalid(const std::string& why, bool* invalid_seen) {
  *invalid_seen = true;
  return detail::error_response(nullptr, error_code::invalid_request, "invalid request: " + why);
}

Outcome get_methods(const std::map<std::string, std::string>& summaries, const Json& params) {
  params_allow_only(params, {});
  Json list = Json::array();
  for (const auto& [name, summary] : summaries) {  // std::map: already sorted by name
    list.push_back(Json{{"name", name}, {"summary", summary}});
  }
  return list;
}

// Runs the method, turning what it throws into the JSON-RPC error it stands for.
template <typename Call>
Outcome run_method(const Call& call) {
  try {
    return call();
  } catch (const ParamError& error) {
    return RpcError{error_code::invalid_params, error.message};
  } catch (const std::exception& error) {
    return RpcError{error_code::internal_error, std::string("internal error: ") + error.what()};
  } catch (...) {
    return RpcError{error_code::internal_error, "internal error: unknown exception"};
  }
}

// One request object, alone or in a batch: its response, or nullopt for a notification.
// Sets *invalid_seen for an invalid request (the stream is closed after the answer).
std::optional<Json> serve_request(const std::map<std::string, Method>& methods,
                                  const std::map<std::string, std::string>& summaries,
                                  const Json& request, bool* invalid_seen) {
  if (!request.is_object()) return invalid("not an object", invalid_seen);
  // The id first, so that later errors can be addressed to it.
  Json id = nullptr;
  bool notification = true;
  auto id_field = request.find("id");
  if (id_field != request.end()) {
    if (!id_field->is_number() && !id_field->is_string() && !id_field->is_null()) {
      return invalid("\"id\" must be a number, a string or null", invalid_seen);
    }
    id = *id_field;
    notification = false;
  }
  auto version = request.find("jsonrpc");
  if (version == request.end() || !version->is_string() || *version != "2.0") {
    Json response = invalid("\"jsonrpc\" must be \"2.0\"", invalid_seen);
    response["id"] = id;
    return response;
  }
  auto method = request.find("method");
  if (method == request.end() || !method->is_string()) {
    Json response = invalid("\"method\" must be a string", invalid_seen);
    response["id"] = id;
    return response;
  }

  const Json empty_params = Json::object();
  const Json* params = &empty_params;
  auto params_field = request.find("params");
  if (params_field != request.end()) params = &*params_field;
  const std::string& name = method->get_ref<const std::string&>();

  Outcome outcome;
  if (!params->is_object()) {
    // The specification allows positional params (an array); no method of ours takes them.
    outcome = RpcError{error_code::invalid_params,
                       "invalid params: params must be an object (named parameters)"};
  } else if (auto found = methods.find(name); found != methods.end()) {
    outcome = run_method([&] { return found->second(*params); });
  } else if (name == kGetMethodsName) {
    outcome = run_method([&] { return get_methods(summaries, *params); });
  } else {
    outcome = RpcError{error_code::method_not_found,
                       "method not found: " + name + " (rpc_get_methods lists them)"};
  }
  if (notification) return std::nullopt;  // not even errors are answered (specification 4.1)
  if (auto* error = std::get_if<RpcError>(&outcome)) {
    return detail::error_response(id, error->code, error->message);
  }
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(std::get<Json>(outcome))}};
}

}  // namespace

Dispatcher::Dispatcher() {
  // Served by handle() itself (a Method capturing `this` would dangle in a copy); only the
  // summary is registered, so that summaries() lists it too.
  summaries_.emplace(kGetMethodsName, kGetMethodsSummary);
}

void Dispatcher::add(const std::string& name, const std::string& summary, Method method) {
  assert(!name.empty() && method);
  assert(summaries_.count(name) == 0 && "method registered twice");
  methods_.insert_or_assign(name, std::move(method));
  summaries_.insert_or_assign(name, summary);
}

std::string Dispatcher::handle(std::string_view request, bool* close_after) const {
  bool invalid_seen = false;
  std::string response;
  try {
    Json parsed;
    try {
      parsed = Json::parse(request.begin(), request.end());
    } catch (const Json::exception& error) {
      // parse_error, or out_of_range for a number a double cannot hold ("4e444"): valid JSON
      // text, but not a request we can read, so the same answer as for any unreadable text.
      if (close_after) *close_after = true;
      return detail::dump(detail::error_response(nullptr, error_code::parse_error,
                                                 without_exception_prefix(error.what())));
    }
    if (parsed.is_array()) {
      if (parsed.empty()) {
        response = detail::dump(invalid("empty batch", &invalid_seen));
      } else {
        Json responses = Json::array();
        for (const Json& element : parsed) {
          std::optional<Json> answer = serve_request(methods_, summaries_, element, &invalid_seen);
          if (answer) responses.push_back(std::move(*answer));
        }
        if (!responses.empty()) response = detail::dump(responses);
      }
    } else {
      std::optional<Json> answer = serve_request(methods_, summaries_, parsed, &invalid_seen);
      if (answer) response = detail::dump(*answer);
    }
  } catch (const std::exception& error) {
    // Out of memory and the like, outside any method: answer what can be answered.
    response = detail::dump(detail::error_response(nullptr, error_code::internal_error,
                                                   std::string("internal error: ") + error.what()));
  }
  if (close_after) *close_after = invalid_seen;
  return response;
}

// ---- param helpers ----

namespace {

[[noreturn]] void param_fail(const char* key, const std::string& problem) {
  throw ParamError{std::string("params.") + key + ": " + problem};
}

// The value of `key`, or null when absent.
const Json* find_param(const Json& params, const char* key) {
  if (!params.is_object()) throw ParamError{"params: must be an object"};
  auto found = params.find(key);
  return found == params.end() ? nullptr : &*found;
}

std::string range_text(uint64_t min, uint64_t max) {
  return std::to_string(min) + ".." + std::to_string(max);
}

uint64_t uint_within(const Json& value, const char* key, uint64_t min, uint64_t max) {
  if (!value.is_number_integer())
    param_fail(key, "must be an integer within " + range_text(min, max));
  if (!value.is_number_unsigned()) {
    // Parsed non-negative numbers are unsigned; signed ones come from code (Json j = 5).
    const int64_t signed_value = value.get<int64_t>();
    if (signed_value < 0) {
      param_fail(key, std::to_string(signed_value) + " is not within " + range_text(min, max));
    }
  }
  const uint64_t number = value.get<uint64_t>();
  if (number < min || number > max) {
    param_fail(key, std::to_string(number) + " is not within " + range_text(min, max));
  }
  return number;
}

}  // namespace

std::string param_string(const Json& params, const char* key) {
  const Json* value = find_param(params, key);
  if (value == nullptr) param_fail(key, "required");
  if (!value->is_string()) param_fail(key, "must be a string");
  return value->get<std::string>();
}

std::string param_string(const Json& params, const char* key, const std::string& fallback) {
  const Json* value = find_param(params, key);
  if (value == nullptr) return fallback;
  if (!value->is_string()) param_fail(key, "must be a string");
  return value->get<std::string>();
}

uint64_t param_uint(const Json& params, const char* key, uint64_t min, uint64_t max) {
  const Json* value = find_param(params, key);
  if (value == nullptr) param_fail(key, "required");
  return uint_within(*value, key, min, max);
}

uint64_t param_uint(const Json& params, const char* key, uint64_t min, uint64_t max,
                    uint64_t fallback) {
  const Json* value = find_param(params, key);
  if (value == nullptr) return fallback;
  return uint_within(*value, key, min, max);
}

bool param_bool(const Json& params, const char* key, bool fallback) {
  const Json* value = find_param(params, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) param_fail(key, "must be true or false");
  return value->get<bool>();
}

void params_allow_only(const Json& params, std::initializer_list<const char*> allowed) {
  if (!params.is_object()) throw ParamError{"params: must be an object"};
  for (const auto& item : params.items()) {
    bool known = false;
    for (const char* name : allowed) known = known || item.key() == name;
    if (!known) param_fail(item.key().c_str(), "unknown key");
  }
}

}  // namespace nvmf::rpc
