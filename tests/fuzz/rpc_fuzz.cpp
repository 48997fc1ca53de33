// Fuzz target: JSON-RPC requests to nvmf_tgt's methods (tools/nvmf_tgt/rpc_methods.h)
// through rpc::Dispatcher::handle, as the server hands it each request it reads: framing,
// batches, notifications, ids, params, and every method's parameter checks and effects on an
// in-process Target without a transport (as a test of the configuration would make it; see
// tests/tools/nvmf_tgt_rpc_test.cpp for the one with a transport).
//
// Input: requests, one per line (at most 16), run in order on one target.
// Properties: handle() never throws and answers "" or JSON-RPC 2.0 responses (result xor an
// error with a code and a message); no method fails with internal_error (-32603: it threw
// something other than ParamError, i.e. a parameter was not checked); a call that fails
// leaves the target as it was (subsystems, namespaces, listeners, hosts, bdevs and their
// configurations, the log level: what save_config, subsystem_list, bdev_list and
// log_get_level show); after the last request, save_config answers a configuration that
// parse_target_config reads back.
// Not run (the input is skipped): anything with a "path" key (save_config and uring bdevs
// write files) and malloc bdevs above 1 MiB (their memory is faulted in at creation). nvme
// bdevs get a controller pool whose opener refuses every address.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "bdev/nvme_bdev.h"
#include "bdev/registry.h"
#include "fuzz_input.h"
#include "rpc/rpc.h"
#include "rpc_methods.h"
#include "target/config.h"
#include "target/target.h"

NVMF_LOG_COMPONENT_DECLARE(target);  // log_set_level sets every component alike

namespace rpc = nvmf::rpc;
using rpc::Json;

namespace {

constexpr size_t kRequestsMax = 16;
constexpr uint64_t kMallocBytesMax = 1 << 20;

// False for what the fuzzer must not run (see the header).
bool safe(const Json& value) {
  if (value.is_array()) {
    for (const Json& element : value) {
      if (!safe(element)) return false;
    }
    return true;
  }
  if (!value.is_object()) return true;
  if (value.contains("path")) return false;
  const auto type = value.find("type");
  if (type != value.end() && type->is_string() && *type == "malloc") {
    uint64_t blocks = 131072;  // MallocBdevOpts' default
    uint64_t block_size = 512;
    if (auto it = value.find("num_blocks"); it != value.end() && it->is_number_unsigned()) {
      blocks = it->get<uint64_t>();
    }
    if (auto it = value.find("block_size"); it != value.end() && it->is_number_unsigned()) {
      block_size = it->get<uint64_t>();
    }
    if (block_size != 0 && blocks > kMallocBytesMax / block_size) return false;
  }
  for (const auto& [key, child] : value.items()) {
    if (!safe(child)) return false;
  }
  return true;
}

// A response object as JSON-RPC 2.0 shapes it. Returns whether it is an error.
bool check_response(const Json& response) {
  FUZZ_CHECK(response.is_object());
  FUZZ_CHECK(response.contains("jsonrpc") && response["jsonrpc"] == "2.0");
  FUZZ_CHECK(response.contains("id"));
  const bool has_result = response.contains("result");
  const bool has_error = response.contains("error");
  FUZZ_CHECK(has_result != has_error);
  if (has_result) return false;
  const Json& error = response["error"];
  FUZZ_CHECK(error.is_object() && error.contains("code") && error["code"].is_number_integer());
  FUZZ_CHECK(error.contains("message") && error["message"].is_string());
  const int code = error["code"].get<int>();
  FUZZ_CHECK_MSG(code != rpc::error_code::internal_error,
                 error["message"].get<std::string>().c_str());
  return true;
}

// Every element of the request carries an id (so each call is answered).
bool all_answered(const Json& request) {
  if (request.is_array()) {
    for (const Json& element : request) {
      if (!element.is_object() || !element.contains("id")) return false;
    }
    return !request.empty();
  }
  return request.is_object() && request.contains("id");
}

class Session {
 public:
  Session()
      : nvme_pool_(
            [](const std::string&) -> nvmf::bdev::NvmeControllerPool::DeviceResult {
              return nvmf::Unexpected(nvmf::Errc::not_found, "no PCI devices in the fuzzer");
            },
            nvmf::nvme_pcie::ControllerOpts{}) {
    auto made = nvmf::target::Target::create(nvmf::target::TargetOpts{});
    FUZZ_CHECK(made.has_value());
    target_ = std::move(*made);
    context_ = std::make_unique<nvmf::tgt::RpcContext>(
        nvmf::tgt::RpcContext{.target = *target_, .registry = registry_, .nvme_pool = nvme_pool_});
    context_->drain_timeout_ms = 0;  // nothing is ever connected: never wait
    nvmf::tgt::register_rpc_methods(dispatcher_, *context_);
  }
  // Members go in reverse order: the dispatcher, the target (its namespaces use the bdevs),
  // the registry's bdevs, then the pool their controllers would come from.

  // What save_config answers is a configuration nvmf_tgt -c reads back.
  void check_save_config() {
    const Json answer = Json::parse(call("save_config"));
    FUZZ_CHECK(answer.contains("result"));
    std::string message;
    auto parsed = nvmf::target::parse_target_config(answer["result"].dump(), &message);
    FUZZ_CHECK_MSG(parsed.has_value(), message.c_str());
  }

  void run(std::string_view request) {
    Json parsed_request;
    bool parsed = true;
    try {
      parsed_request = Json::parse(request.begin(), request.end());
    } catch (const Json::exception&) {
      parsed = false;
    }
    if (state_.empty()) state_ = state();
    bool close_after = false;
    const std::string response = dispatcher_.handle(request, &close_after);
    if (!parsed) {
      FUZZ_CHECK(close_after);  // a parse error closes the connection
    }
    // The state after this request is the one before the next.
    const std::string before = std::move(state_);
    state_ = state();
    if (response.empty()) return;               // notifications only
    const Json answer = Json::parse(response);  // throws (a finding) if it is not JSON
    bool all_errors = true;
    if (answer.is_array()) {
      FUZZ_CHECK(!answer.empty());
      for (const Json& element : answer) all_errors = check_response(element) && all_errors;
    } else {
      all_errors = check_response(answer);
    }
    if (parsed && all_errors && all_answered(parsed_request)) {
      FUZZ_CHECK_MSG(state_ == before, "a failed call changed the target");
    }
  }

 private:
  std::string call(const char* method) {
    const Json request = {{"jsonrpc", "2.0"}, {"id", 0}, {"method", method}};
    return dispatcher_.handle(request.dump(), nullptr);
  }
  // What a user can see of the target through the methods (save_config, subsystem_list,
  // bdev_list, log_get_level), read from the objects directly: save_config through the
  // dispatcher costs more than the rest of an input. One field after another, each ended.
  std::string state() {
    std::string out;
    const auto field = [&](const auto& value) {
      if constexpr (std::is_convertible_v<decltype(value), std::string_view>) {
        out += value;
      } else {
        out += std::to_string(value);
      }
      out += '\x1f';
    };
    const auto bytes = [&](const auto& array) {
      out.append(reinterpret_cast<const char*>(array.data()), array.size());
      out += '\x1f';
    };
    for (const nvmf::target::SubsystemInfo& info : target_->subsystems_info()) {
      field(info.nqn);
      field(info.serial_number);
      field(info.model_number);
      field(int{info.allow_any_host});
      for (const std::string& host : info.hosts) field(host);
      field(info.max_namespaces);
      for (const nvmf::target::NamespaceInfo& ns : info.namespaces) {
        field(ns.nsid);
        field(ns.bdev);
        bytes(ns.uuid);
        bytes(ns.nguid);
        bytes(ns.eui64);
      }
      for (const nvmf::target::ListenerAddress& address : info.listeners) {
        field(int{address.trtype});
        field(int{address.adrfam});
        field(address.traddr);
        field(address.trsvcid);
      }
      field(info.controllers.size());
      out += '\n';
    }
    registry_.for_each([&](const nvmf::bdev::Bdev& bdev) {
      field(bdev.name());
      field(bdev.backend_name());
      field(bdev.block_size_bytes());
      field(bdev.block_count());
      bytes(bdev.uuid());
      field(int{bdev.removed()});
      out += '\n';
    });
    for (const nvmf::target::BdevConfig& config : context_->bdevs) {
      field(nvmf::target::bdev_config_to_json(config));
    }
    field(static_cast<int>(nvmf::log_get_level(nvmf_log_component_target)));
    return out;
  }

  nvmf::bdev::NvmeControllerPool nvme_pool_;
  nvmf::bdev::BdevRegistry registry_;
  std::unique_ptr<nvmf::target::Target> target_;
  std::unique_ptr<nvmf::tgt::RpcContext> context_;
  rpc::Dispatcher dispatcher_;
  std::string state_;  // state() after the last request
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  nvmf::fuzz::drop_log_lines();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> requests;
  for (size_t start = 0; start <= text.size() && requests.size() < kRequestsMax;) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) requests.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  for (std::string_view request : requests) {
    try {
      if (!safe(Json::parse(request.begin(), request.end()))) return 0;
    } catch (const Json::exception&) {
      // Not JSON: the dispatcher answers a parse error without running anything.
    }
  }
  {
    Session session;
    for (std::string_view request : requests) session.run(request);
    session.check_save_config();
  }
  nvmf::fuzz::drop_log_lines();  // log_set_level may have changed it
  return 0;
}
