// nvmf_tgt's JSON-RPC methods. Parameters use the configuration file's keys and its parser
// (target/config.h), so a bdev or subsystem reads the same in both; every error names the
// object it is about.
#include "rpc_methods.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "common/log.h"
#include "reactor/group.h"
#include "spec/string_field.h"

NVMF_LOG_COMPONENT(nvmf_tgt_rpc);

namespace nvmf::tgt {

namespace {

using rpc::Json;
using rpc::Outcome;
using rpc::RpcError;
namespace error_code = rpc::error_code;

std::string in_quotes(const std::string& text) { return "\"" + text + "\""; }

RpcError error(int code, std::string message) { return RpcError{code, std::move(message)}; }

RpcError no_subsystem(const std::string& nqn) {
  return error(error_code::not_found, "no subsystem named " + in_quotes(nqn));
}

RpcError no_bdev(const std::string& name) {
  return error(error_code::not_found, "no bdev named " + in_quotes(name));
}

std::string describe(const Error& failure) {
  char text[160];
  return error_describe(failure, text, sizeof(text));
}

// The params without `keys` (the ones a method reads itself), as text for a config parser.
std::string without(const Json& params, std::initializer_list<const char*> keys) {
  Json rest = params;
  for (const char* key : keys) rest.erase(key);
  return rest.dump();
}

bool required_bool(const Json& params, const char* key) {
  if (!params.contains(key)) throw rpc::ParamError{std::string("params.") + key + ": required"};
  if (!params.at(key).is_boolean()) {
    throw rpc::ParamError{std::string("params.") + key + ": must be true or false"};
  }
  return params.at(key).get<bool>();
}

template <typename Pred>
bool wait_until(unsigned timeout_ms, Pred&& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// ---- text forms ----

std::string uuid_text(const bdev::Uuid& uuid) {
  char text[bdev::kUuidStringSize];
  bdev::uuid_format(uuid, text);
  return text;
}

template <size_t N>
std::string hex_text(const std::array<uint8_t, N>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (uint8_t byte : bytes) {
    text += kDigits[byte >> 4];
    text += kDigits[byte & 0xF];
  }
  return text;
}

template <size_t N>
bool all_zero(const std::array<uint8_t, N>& bytes) {
  for (uint8_t byte : bytes) {
    if (byte != 0) return false;
  }
  return true;
}

const char* adrfam_name(uint8_t adrfam) { return adrfam == spec::adrfam::ipv6 ? "ipv6" : "ipv4"; }

// The listener's port; parse_listener_config has checked it is a number in 1..65535.
uint16_t port_of(const target::ListenerAddress& address) {
  unsigned port = 0;
  std::from_chars(address.trsvcid.data(), address.trsvcid.data() + address.trsvcid.size(), port);
  return static_cast<uint16_t>(port);
}

// The address that listens on every address of the family ("0.0.0.0 listens on every
// RDMA-capable address", docs/target-config.md).
std::string wildcard_of(const target::ListenerAddress& address) {
  return address.adrfam == spec::adrfam::ipv6 ? "::" : "0.0.0.0";
}

std::string endpoint(const target::ListenerAddress& address) {
  return address.traddr + ":" + address.trsvcid;
}

Json listener_json(const target::ListenerAddress& address) {
  return {{"trtype", "rdma"},
          {"adrfam", adrfam_name(address.adrfam)},
          {"traddr", address.traddr},
          {"trsvcid", address.trsvcid}};
}

Json subsystem_json(const target::SubsystemInfo& info) {
  Json namespaces = Json::array();
  for (const target::NamespaceInfo& ns : info.namespaces) {
    Json entry = {{"nsid", ns.nsid}, {"bdev", ns.bdev}, {"uuid", uuid_text(ns.uuid)}};
    entry["nguid"] = all_zero(ns.nguid) ? Json(nullptr) : Json(hex_text(ns.nguid));
    entry["eui64"] = all_zero(ns.eui64) ? Json(nullptr) : Json(hex_text(ns.eui64));
    namespaces.push_back(std::move(entry));
  }
  Json listeners = Json::array();
  for (const target::ListenerAddress& address : info.listeners) {
    listeners.push_back(listener_json(address));
  }
  Json controllers = Json::array();
  for (const target::ControllerInfo& controller : info.controllers) {
    Json qpairs = Json::array();
    for (const target::QpairInfo& qpair : controller.qpairs) {
      qpairs.push_back({{"qid", qpair.qid}, {"depth", qpair.depth}});
    }
    bdev::Uuid hostid;
    std::memcpy(hostid.data(), controller.hostid.data(), hostid.size());
    controllers.push_back({{"cntlid", controller.cntlid},
                           {"hostnqn", controller.hostnqn},
                           {"hostid", uuid_text(hostid)},
                           {"qpairs", std::move(qpairs)}});
  }
  return {{"nqn", info.nqn},
          {"subtype", info.discovery ? "discovery" : "nvme"},
          {"serial_number", info.serial_number},
          {"model_number", info.model_number},
          {"allow_any_host", info.allow_any_host},
          {"hosts", info.hosts},
          {"max_namespaces", info.max_namespaces},
          {"namespaces", std::move(namespaces)},
          {"listeners", std::move(listeners)},
          {"controllers", std::move(controllers)}};
}

// ---- the methods ----

class Methods {
 public:
  explicit Methods(RpcContext& context) : ctx_(context) {}

  // -- bdevs --

  Outcome bdev_create(const Json& params) {
    std::string message;
    auto parsed = target::parse_bdev_config(params.dump(), "params", &message);
    if (!parsed) return error(error_code::invalid_params, message);
    if (ctx_.registry.find(parsed->name) != nullptr) {
      return error(error_code::exists, "bdev " + in_quotes(parsed->name) + " exists");
    }
    auto built =
        target::build_bdev(*parsed, ctx_.registry, ctx_.target, "", &message, &ctx_.nvme_pool);
    if (!built) return error(error_code::failed, message);
    ctx_.bdevs.push_back(*parsed);
    NVMF_INFOLOG(nvmf_tgt_rpc, "bdev %s created (%s)", parsed->name.c_str(),
                 target::bdev_kind_name(parsed->kind));
    return Json{{"name", parsed->name}};
  }

  Outcome bdev_delete(const Json& params) {
    rpc::params_allow_only(params, {"name"});
    const std::string name = rpc::param_string(params, "name");
    bdev::Bdev* bdev = ctx_.registry.find(name);
    if (bdev == nullptr) return no_bdev(name);
    if (const bdev::Bdev* user = bdev->claimed_by(); user != nullptr) {
      return error(error_code::busy, "bdev " + name + " is the base of bdev " + user->name() +
                                         "; delete that one first");
    }
    for (const target::SubsystemInfo& subsystem : ctx_.target.subsystems_info()) {
      for (const target::NamespaceInfo& ns : subsystem.namespaces) {
        if (ns.bdev != name) continue;
        return error(error_code::busy, "bdev " + name + " is used by namespace " +
                                           std::to_string(ns.nsid) + " of " + subsystem.nqn);
      }
    }
    // No namespace names the bdev, but a poll group may be refreshing its namespace table
    // from a snapshot taken before the last one went (it opens channels outside the target
    // mutex). One message round trip per reactor lets every such refresh finish; after that
    // no channel can open, and the ones left close once their I/O is out.
    barrier();
    if (!wait_until(ctx_.drain_timeout_ms, [&] { return bdev->channel_count() == 0; })) {
      return error(error_code::busy, "bdev " + name + " still has " +
                                         std::to_string(bdev->channel_count()) +
                                         " open channels (I/O in flight); try again");
    }
    auto removed = ctx_.registry.remove(name);
    if (!removed) return error(error_code::busy, "bdev " + name + ": " + describe(removed.error()));
    removed->reset();
    std::erase_if(ctx_.bdevs,
                  [&](const target::BdevConfig& config) { return config.name == name; });
    NVMF_INFOLOG(nvmf_tgt_rpc, "bdev %s deleted", name.c_str());
    return Json(nullptr);
  }

  Outcome bdev_list(const Json& params) {
    rpc::params_allow_only(params, {});
    Json list = Json::array();
    ctx_.registry.for_each([&](const bdev::Bdev& bdev) {
      Json io_types = Json::array();
      for (unsigned type = 0; type < bdev::kIoTypeCount; ++type) {
        if (bdev.supports(static_cast<bdev::IoType>(type))) {
          io_types.push_back(bdev::io_type_name(static_cast<bdev::IoType>(type)));
        }
      }
      Json entry = {{"name", bdev.name()},
                    {"type", bdev.backend_name()},
                    {"block_size", bdev.block_size_bytes()},
                    {"num_blocks", bdev.block_count()},
                    {"uuid", uuid_text(bdev.uuid())},
                    {"queue_depth", bdev.queue_depth_max()},
                    {"io_types", std::move(io_types)},
                    {"channels", bdev.channel_count()},
                    {"removed", bdev.removed()}};
      if (!all_zero(bdev.nguid())) entry["nguid"] = hex_text(bdev.nguid());
      if (!all_zero(bdev.eui64())) entry["eui64"] = hex_text(bdev.eui64());
      // What bdev_create (or the -c file) was given, in the configuration's keys, as
      // save_config writes it (with the UUID the bdev got).
      if (const target::BdevConfig* config = config_of(bdev.name())) {
        entry["config"] = Json::parse(target::bdev_config_to_json(effective_config(*config, bdev)));
      }
      list.push_back(std::move(entry));
    });
    return list;
  }

  // The error bdev's rule: {name, io_types, action, count, every_nth, sct, sc, dnr} as the
  // "inject" object of its configuration; io_types [] clears it.
  Outcome bdev_error_inject(const Json& params) {
    const std::string name = rpc::param_string(params, "name");
    bdev::Bdev* found = ctx_.registry.find(name);
    if (found == nullptr) return no_bdev(name);
    bdev::ErrorBdev* error_bdev = bdev::as_error_bdev(*found);
    if (error_bdev == nullptr) {
      return error(error_code::invalid_params, "params.name: bdev " + in_quotes(name) + " is a " +
                                                   found->backend_name() +
                                                   " bdev, not an error bdev");
    }
    std::string message;
    auto injection = target::parse_error_injection(without(params, {"name"}), "params", &message);
    if (!injection) return error(error_code::invalid_params, message);
    if (auto set = error_bdev->inject(*injection); !set) {
      return error(error_code::invalid_params,
                   std::string("params.") + set.error().detail + ": refused by the error bdev");
    }
    return Json::parse(target::error_injection_to_json(error_bdev->injection()));
  }

  // What becomes of the I/O an error bdev dropped: {name, fate: "submit" | "abort"}.
  Outcome bdev_error_release_dropped(const Json& params) {
    rpc::params_allow_only(params, {"name", "fate"});
    const std::string name = rpc::param_string(params, "name");
    const std::string fate = rpc::param_string(params, "fate");
    bdev::Bdev* found = ctx_.registry.find(name);
    if (found == nullptr) return no_bdev(name);
    bdev::ErrorBdev* error_bdev = bdev::as_error_bdev(*found);
    if (error_bdev == nullptr) {
      return error(error_code::invalid_params,
                   "params.name: bdev " + in_quotes(name) + " is not an error bdev");
    }
    if (fate != "submit" && fate != "abort") {
      return error(error_code::invalid_params,
                   "params.fate: " + in_quotes(fate) + " is not submit or abort");
    }
    error_bdev->release_dropped(fate == "submit" ? bdev::DroppedFate::submit
                                                 : bdev::DroppedFate::abort);
    const bdev::ErrorBdevCounters counters = error_bdev->counters();
    return Json{{"failed", counters.failed}, {"dropped", counters.dropped}};
  }

  // Stalls or releases every I/O of a delay bdev: {name, stall: bool}.
  Outcome bdev_delay_stall(const Json& params) {
    rpc::params_allow_only(params, {"name", "stall"});
    const std::string name = rpc::param_string(params, "name");
    const bool stall = required_bool(params, "stall");
    bdev::Bdev* found = ctx_.registry.find(name);
    if (found == nullptr) return no_bdev(name);
    bdev::DelayBdev* delay = bdev::as_delay_bdev(*found);
    if (delay == nullptr) {
      return error(error_code::invalid_params,
                   "params.name: bdev " + in_quotes(name) + " is not a delay bdev");
    }
    if (stall) {
      delay->stall();
    } else {
      delay->release();
    }
    NVMF_NOTICELOG(nvmf_tgt_rpc, "delay bdev %s %s", name.c_str(), stall ? "stalled" : "released");
    return Json(nullptr);
  }

  // -- subsystems --

  Outcome subsystem_create(const Json& params) {
    rpc::params_allow_only(params, {"nqn", "serial_number", "model_number", "allow_any_host",
                                    "hosts", "max_namespaces"});
    std::string message;
    auto parsed =
        target::parse_subsystem_config(params.dump(), "params", ctx_.target.opts(), &message);
    if (!parsed) return error(error_code::invalid_params, message);
    const std::string& nqn = parsed->opts.nqn;
    if (find(nqn) != nullptr) return error(error_code::exists, "subsystem " + nqn + " exists");
    if (auto added = ctx_.target.add_subsystem(parsed->opts); !added) {
      const int code =
          added.error().code == Errc::already_exists ? error_code::exists : error_code::failed;
      return error(code, "cannot create subsystem " + nqn + ": " + describe(added.error()));
    }
    NVMF_INFOLOG(nvmf_tgt_rpc, "subsystem %s created", nqn.c_str());
    return Json{{"nqn", nqn}};
  }

  Outcome subsystem_delete(const Json& params) {
    rpc::params_allow_only(params, {"nqn"});
    const std::string nqn = rpc::param_string(params, "nqn");
    const target::SubsystemInfo* subsystem = find(nqn);
    if (subsystem == nullptr) return no_subsystem(nqn);
    if (subsystem->discovery) {
      return error(error_code::failed, "the discovery subsystem is built in and cannot be deleted");
    }
    const std::vector<target::ListenerAddress> listeners = subsystem->listeners;
    const size_t controllers = subsystem->controllers.size();
    if (auto removed = ctx_.target.remove_subsystem(nqn, target::ConnectedControllers::disconnect);
        !removed) {
      return error(error_code::failed,
                   "cannot delete subsystem " + nqn + ": " + describe(removed.error()));
    }
    // Its hosts are being disconnected; wait (bounded) until their controllers are gone, so
    // that a bdev_delete right after finds the bdevs free.
    if (!wait_until(ctx_.drain_timeout_ms,
                    [&] { return ctx_.target.removed_controller_count(nqn) == 0; })) {
      NVMF_WARNLOG(nvmf_tgt_rpc,
                   "subsystem %s deleted; %zu of its controllers still wait for I/O after %u ms",
                   nqn.c_str(), ctx_.target.removed_controller_count(nqn), ctx_.drain_timeout_ms);
    }
    for (const target::ListenerAddress& address : listeners) close_if_unused(address);
    NVMF_INFOLOG(nvmf_tgt_rpc, "subsystem %s deleted (%zu controllers disconnected)", nqn.c_str(),
                 controllers);
    return Json(nullptr);
  }

  Outcome subsystem_list(const Json& params) {
    rpc::params_allow_only(params, {});
    Json list = Json::array();
    for (const target::SubsystemInfo& info : ctx_.target.subsystems_info()) {
      list.push_back(subsystem_json(info));
    }
    return list;
  }

  Outcome subsystem_allow_any_host(const Json& params) {
    rpc::params_allow_only(params, {"nqn", "allow"});
    const std::string nqn = rpc::param_string(params, "nqn");
    const bool allow = required_bool(params, "allow");
    if (nvm_subsystem(nqn) == nullptr) return no_subsystem(nqn);
    if (auto set = ctx_.target.set_allow_any_host(nqn, allow); !set) {
      return error(error_code::failed, nqn + ": " + describe(set.error()));
    }
    return Json(nullptr);
  }

  // -- namespaces --

  Outcome namespace_add(const Json& params) {
    rpc::params_allow_only(params, {"nqn", "bdev", "nsid", "uuid", "nguid", "eui64"});
    const std::string nqn = rpc::param_string(params, "nqn");
    const target::SubsystemInfo* found = nvm_subsystem(nqn);
    if (found == nullptr) return no_subsystem(nqn);
    const target::SubsystemInfo& subsystem = *found;
    std::string message;
    auto parsed = target::parse_namespace_config(without(params, {"nqn"}), "params",
                                                 subsystem.max_namespaces, &message);
    if (!parsed) return error(error_code::invalid_params, message);
    if (ctx_.registry.find(parsed->bdev) == nullptr) return no_bdev(parsed->bdev);
    for (const target::NamespaceInfo& ns : subsystem.namespaces) {
      if (ns.nsid == parsed->nsid) {
        return error(error_code::exists,
                     "subsystem " + nqn + " already has namespace " + std::to_string(ns.nsid));
      }
    }
    auto added = target::build_namespace(*parsed, nqn, ctx_.registry, ctx_.target, "", &message);
    if (!added) {
      if (added.error().code == Errc::busy) return error(error_code::busy, message);
      if (added.error().code == Errc::out_of_range) {
        return error(error_code::failed, "subsystem " + nqn + " has no free NSID (max_namespaces " +
                                             std::to_string(subsystem.max_namespaces) + ")");
      }
      return error(error_code::failed, "subsystem " + nqn + ": " + message);
    }
    return Json{{"nsid", *added}};
  }

  Outcome namespace_remove(const Json& params) {
    rpc::params_allow_only(params, {"nqn", "nsid"});
    const std::string nqn = rpc::param_string(params, "nqn");
    // 1..FFFFFFFEh: the NSIDs a namespace may have (FFFFFFFFh is the broadcast value).
    const auto nsid = static_cast<uint32_t>(rpc::param_uint(params, "nsid", 1, 0xFFFFFFFE));
    const target::SubsystemInfo* found = nvm_subsystem(nqn);
    if (found == nullptr) return no_subsystem(nqn);
    bool active = false;
    for (const target::NamespaceInfo& ns : found->namespaces) active |= ns.nsid == nsid;
    if (!active) {
      return error(error_code::not_found,
                   "subsystem " + nqn + " has no namespace " + std::to_string(nsid));
    }
    if (auto removed = ctx_.target.remove_namespace(nqn, nsid); !removed) {
      return error(error_code::failed, "subsystem " + nqn + ": " + describe(removed.error()));
    }
    return Json(nullptr);
  }

  // -- listeners --

  // What listener_add and listener_remove take: the subsystem and the address.
  struct ListenerRequest {
    std::string nqn;
    target::ListenerAddress address;
    const target::SubsystemInfo* subsystem = nullptr;
  };
  std::optional<Outcome> parse_listener_request(const Json& params, ListenerRequest* out) {
    rpc::params_allow_only(params, {"nqn", "traddr", "trsvcid", "adrfam", "trtype"});
    out->nqn = rpc::param_string(params, "nqn");
    std::string message;
    auto address = target::parse_listener_config(without(params, {"nqn"}), "params", &message);
    if (!address) return error(error_code::invalid_params, message);
    out->address = *address;
    out->subsystem = find(out->nqn);
    if (out->subsystem == nullptr) return no_subsystem(out->nqn);
    return std::nullopt;
  }

  Outcome listener_add(const Json& params) {
    ListenerRequest request;
    if (auto refused = parse_listener_request(params, &request)) return *refused;
    const std::string& nqn = request.nqn;
    const target::ListenerAddress* address = &request.address;
    const target::SubsystemInfo* subsystem = request.subsystem;
    for (const target::ListenerAddress& existing : subsystem->listeners) {
      if (existing == *address) {
        return error(error_code::exists,
                     "subsystem " + nqn + " already listens on " + endpoint(*address));
      }
    }
    // The RDMA listener first: when it cannot open, the subsystem stays as it was.
    bool opened = false;
    std::string listen_error;
    if (ctx_.transport != nullptr) {
      on_acceptor([&] { listen_error = serve_on_acceptor(*address, &opened); });
    }
    if (!listen_error.empty()) {
      return error(error_code::failed,
                   "cannot listen on " + endpoint(*address) + ": " + listen_error);
    }
    if (auto added = ctx_.target.add_listener(nqn, *address); !added) {
      if (opened) {
        on_acceptor(
            [&] { (void)ctx_.transport->stop_listening(address->traddr, port_of(*address)); });
      }
      return error(error_code::failed, "subsystem " + nqn + ": cannot add listener " +
                                           endpoint(*address) + ": " + describe(added.error()));
    }
    return Json(nullptr);
  }

  Outcome listener_remove(const Json& params) {
    ListenerRequest request;
    if (auto refused = parse_listener_request(params, &request)) return *refused;
    const std::string& nqn = request.nqn;
    const target::ListenerAddress* address = &request.address;
    const target::SubsystemInfo* subsystem = request.subsystem;
    bool listed = false;
    for (const target::ListenerAddress& existing : subsystem->listeners) {
      listed |= existing == *address;
    }
    if (!listed) {
      return error(error_code::not_found,
                   "subsystem " + nqn + " does not listen on " + endpoint(*address));
    }
    if (auto removed = ctx_.target.remove_listener(nqn, *address); !removed) {
      return error(error_code::failed, "subsystem " + nqn + ": " + describe(removed.error()));
    }
    close_if_unused(*address);
    return Json(nullptr);
  }

  // -- hosts --

  Outcome host_add(const Json& params) {
    rpc::params_allow_only(params, {"nqn", "host"});
    const std::string nqn = rpc::param_string(params, "nqn");
    const std::string host = rpc::param_string(params, "host");
    if (!spec::nqn_valid(host)) {
      return error(error_code::invalid_params,
                   "params.host: " + in_quotes(host) + " is not a valid NQN");
    }
    const target::SubsystemInfo* found = nvm_subsystem(nqn);
    if (found == nullptr) return no_subsystem(nqn);
    for (const std::string& allowed : found->hosts) {
      if (allowed == host) {
        return error(error_code::exists, "subsystem " + nqn + " already allows host " + host);
      }
    }
    if (auto added = ctx_.target.add_host(nqn, host); !added) {
      return error(error_code::failed, "subsystem " + nqn + ": " + describe(added.error()));
    }
    return Json(nullptr);
  }

  Outcome host_remove(const Json& params) {
    rpc::params_allow_only(params, {"nqn", "host"});
    const std::string nqn = rpc::param_string(params, "nqn");
    const std::string host = rpc::param_string(params, "host");
    const target::SubsystemInfo* found = nvm_subsystem(nqn);
    if (found == nullptr) return no_subsystem(nqn);
    bool listed = false;
    for (const std::string& allowed : found->hosts) listed |= allowed == host;
    if (!listed) {
      return error(error_code::not_found, "subsystem " + nqn + " does not list host " + host);
    }
    if (auto removed = ctx_.target.remove_host(nqn, host); !removed) {
      return error(error_code::failed, "subsystem " + nqn + ": " + describe(removed.error()));
    }
    return Json(nullptr);
  }

  // -- statistics and logging --

  Outcome stats(const Json& params) {
    rpc::params_allow_only(params, {});
    Json reactors = Json::array();
    for (size_t i = 0; i < ctx_.reactors.size(); ++i) {
      const reactor::ReactorStats stats = ctx_.reactors[i]->stats();
      reactors.push_back({{"index", i},
                          {"name", ctx_.reactors[i]->name()},
                          {"iterations", stats.iterations},
                          {"busy_iterations", stats.busy_iterations},
                          {"idle_iterations", stats.idle_iterations},
                          {"messages", stats.messages},
                          {"timer_fires", stats.timer_fires},
                          {"sleeps", stats.sleeps}});
    }
    Json result = {{"reactors", std::move(reactors)}};
    const target::TargetStats core = ctx_.target.stats();
    result["target"] = {{"bdev_busy_waits", core.bdev_busy_waits},
                        {"abandoned_qpairs", core.abandoned_qpairs},
                        {"late_completions", core.late_completions}};
    if (ctx_.transport != nullptr) {
      transport_rdma::RdmaTargetTransport::Stats stats;
      size_t connections = 0;
      on_acceptor([&] {
        stats = ctx_.transport->stats();
        connections = ctx_.transport->connection_count();
      });
      // Every kind, zero or not, under rdma-core's name ("QP_FATAL", "PORT_ERR", ...).
      Json async_events = Json::object();
      for (size_t type = 0; type < verbs::kAsyncEventTypeCount; ++type) {
        async_events[verbs::async_event_type_name(static_cast<verbs::AsyncEventType>(type))] =
            stats.async_events[type];
      }
      result["transport"] = {{"trtype", "rdma"},
                             {"connections", connections},
                             {"connects_accepted", stats.connects_accepted},
                             {"connects_rejected", stats.connects_rejected},
                             {"disconnects", stats.disconnects},
                             {"cq_full_refusals", stats.cq_full_refusals},
                             {"buffer_waits", stats.buffer_waits},
                             {"send_queue_waits", stats.send_queue_waits},
                             {"async_events", std::move(async_events)},
                             {"established_notifications", stats.established_notifications}};
    }
    Json bdevs = Json::array();
    ctx_.registry.for_each([&](const bdev::Bdev& bdev) {
      const bdev::IoStats stats = bdev.stats();
      Json ops = Json::object();
      Json bytes = Json::object();
      for (unsigned type = 0; type < bdev::kIoTypeCount; ++type) {
        const char* name = bdev::io_type_name(static_cast<bdev::IoType>(type));
        ops[name] = stats.ops[type];
        bytes[name] = stats.bytes[type];
      }
      bdevs.push_back({{"name", bdev.name()},
                       {"ops", std::move(ops)},
                       {"bytes", std::move(bytes)},
                       {"errors", stats.errors},
                       {"completions", stats.completions()},
                       {"latency_ns_total", stats.latency_ns_total},
                       {"latency_ns_max", stats.latency_ns_max}});
    });
    result["bdevs"] = std::move(bdevs);
    return result;
  }

  Outcome log_set_level(const Json& params) {
    rpc::params_allow_only(params, {"level"});
    const std::string text = rpc::param_string(params, "level");
    LogLevel level;
    if (!log_level_parse(text.c_str(), &level)) {
      return error(
          error_code::invalid_params,
          "params.level: " + in_quotes(text) + " is not one of error, warn, notice, info, debug");
    }
    nvmf::log_set_level(level);  // every component
    return Json(nullptr);
  }

  Outcome log_get_level(const Json& params) {
    rpc::params_allow_only(params, {});
    // log_set_level sets every component alike, so this one's level is everybody's.
    return Json{{"level", log_level_name(nvmf::log_get_level(nvmf_log_component_nvmf_tgt_rpc))}};
  }

  // -- save_config --

  Outcome save_config(const Json& params) {
    rpc::params_allow_only(params, {"path"});
    const std::string path = rpc::param_string(params, "path", "");
    const std::string text = target::target_config_to_json(current_config());
    if (!path.empty()) {
      if (std::string problem = write_atomically(path, text); !problem.empty()) {
        return error(error_code::failed, "cannot write " + path + ": " + problem);
      }
      NVMF_NOTICELOG(nvmf_tgt_rpc, "configuration saved to %s", path.c_str());
    }
    return Json::parse(text);
  }

 private:
  // The NVM subsystem `nqn` (not the discovery one) in a fresh snapshot, or nullptr.
  const target::SubsystemInfo* nvm_subsystem(const std::string& nqn) {
    const target::SubsystemInfo* info = find(nqn);
    return info == nullptr || info->discovery ? nullptr : info;
  }

  const target::SubsystemInfo* find(const std::string& nqn) {
    snapshot_ = ctx_.target.subsystems_info();
    for (const target::SubsystemInfo& info : snapshot_) {
      if (info.nqn == nqn) return &info;
    }
    return nullptr;
  }

  const target::BdevConfig* config_of(const std::string& name) const {
    for (const target::BdevConfig& config : ctx_.bdevs) {
      if (config.name == name) return &config;
    }
    return nullptr;
  }

  // The bdev's configuration with the UUID it was given written down (generated at creation
  // when the configuration had none), so namespaces keep theirs after a restart, and an error
  // bdev's rule as last set (bdev_error_inject). An nvme bdev's UUID is the device's: not
  // configurable.
  static target::BdevConfig effective_config(target::BdevConfig config, const bdev::Bdev& live) {
    switch (config.kind) {
      case target::BdevKind::null:
        config.null_opts.uuid = live.uuid();
        break;
      case target::BdevKind::malloc:
        config.malloc_opts.uuid = live.uuid();
        break;
      case target::BdevKind::uring:
        config.uring_opts.uuid = live.uuid();
        break;
      case target::BdevKind::nvme:
        break;
      case target::BdevKind::delay:
        config.delay_opts.uuid = live.uuid();
        if (const bdev::DelayBdev* delay = bdev::as_delay_bdev(live)) {
          config.delay_opts.latency = delay->latency();
        }
        break;
      case target::BdevKind::error:
        config.error_opts.uuid = live.uuid();
        if (const bdev::ErrorBdev* error_bdev = bdev::as_error_bdev(live)) {
          config.error_opts.injection = error_bdev->injection();
        }
        break;
    }
    return config;
  }

  template <typename Fn>
  void on_acceptor(Fn&& fn) {
    reactor::run_and_wait(*ctx_.reactors.at(0), std::forward<Fn>(fn));
  }

  // Returns once every reactor has finished the iteration it was in.
  void barrier() {
    for (reactor::Reactor* reactor : ctx_.reactors) reactor::run_and_wait(*reactor, [] {});
  }

  // Acceptor thread: makes the transport accept connections to `address`. A listener on the
  // family's wildcard address and the same port already does (the CM would refuse a second
  // bind there). "" or the reason; *opened when a listener was opened for it.
  std::string serve_on_acceptor(const target::ListenerAddress& address, bool* opened) {
    const uint16_t port = port_of(address);
    if (ctx_.transport->listening(address.traddr, port) ||
        ctx_.transport->listening(wildcard_of(address), port)) {
      return "";
    }
    auto listened = ctx_.transport->listen(address.traddr, port);
    if (!listened) return describe(listened.error());
    if (opened != nullptr) *opened = true;
    return "";
  }

  // Closes the RDMA listener on the address's traddr and port unless a subsystem still lists
  // it (connections accepted through it stay). When that was a wildcard listener, the
  // addresses on its port that other subsystems list get listeners of their own.
  void close_if_unused(const target::ListenerAddress& address) {
    if (ctx_.transport == nullptr) return;
    const std::vector<target::SubsystemInfo> infos = ctx_.target.subsystems_info();
    std::vector<target::ListenerAddress> same_port;
    for (const target::SubsystemInfo& info : infos) {
      for (const target::ListenerAddress& other : info.listeners) {
        if (port_of(other) != port_of(address)) continue;
        if (other.traddr == address.traddr) return;
        same_port.push_back(other);
      }
    }
    on_acceptor([&] {
      if (!ctx_.transport->listening(address.traddr, port_of(address))) return;
      (void)ctx_.transport->stop_listening(address.traddr, port_of(address));
      if (address.traddr != wildcard_of(address)) return;
      for (const target::ListenerAddress& other : same_port) {
        if (other.adrfam != address.adrfam) continue;
        if (std::string problem = serve_on_acceptor(other, nullptr); !problem.empty()) {
          NVMF_ERRLOG(nvmf_tgt_rpc, "cannot listen on %s: %s", endpoint(other).c_str(),
                      problem.c_str());
        }
      }
    });
  }

  // The configuration -c would need to make this target again.
  target::TargetConfig current_config() const {
    target::TargetConfig config;
    config.opts = ctx_.target.opts();
    config.transport_configured = true;
    config.transport = ctx_.transport_config;
    for (const target::BdevConfig& bdev : ctx_.bdevs) {
      const bdev::Bdev* live = ctx_.registry.find(bdev.name);
      if (live != nullptr) config.bdevs.push_back(effective_config(bdev, *live));
    }
    for (const target::SubsystemInfo& info : ctx_.target.subsystems_info()) {
      if (info.discovery) continue;
      target::SubsystemConfig subsystem;
      subsystem.opts.nqn = info.nqn;
      subsystem.opts.serial_number = info.serial_number;
      subsystem.opts.model_number = info.model_number;
      subsystem.opts.allow_any_host = info.allow_any_host;
      subsystem.opts.hosts = info.hosts;
      subsystem.opts.max_namespaces = info.max_namespaces;
      for (const target::NamespaceInfo& ns : info.namespaces) {
        target::NamespaceConfig entry;
        entry.nsid = ns.nsid;
        entry.bdev = ns.bdev;
        const bdev::Bdev* live = ctx_.registry.find(ns.bdev);
        // Identifiers equal to the bdev's are its defaults: left out, they follow the bdev.
        // Except an nvme bdev's UUID: a device that reports none gets a random one at each
        // start, and hosts must see the namespace's UUID stay.
        const bool nvme = live != nullptr && std::string_view(live->backend_name()) == "nvme";
        entry.uuid_set = live == nullptr || nvme || ns.uuid != live->uuid();
        entry.uuid = ns.uuid;
        if (live == nullptr || ns.nguid != live->nguid()) entry.nguid = ns.nguid;
        if (live == nullptr || ns.eui64 != live->eui64()) entry.eui64 = ns.eui64;
        subsystem.namespaces.push_back(entry);
      }
      subsystem.listeners = info.listeners;
      config.subsystems.push_back(std::move(subsystem));
    }
    return config;
  }

  // Writes `text` to path.tmp, syncs it and renames it over `path`: a reader sees the old file
  // or the new one, never half of it. "" or the reason.
  static std::string write_atomically(const std::string& path, const std::string& text) {
    const std::string temporary = path + ".tmp";
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return std::strerror(errno);
    size_t written = 0;
    while (written < text.size()) {
      const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string problem = std::strerror(errno);
        ::close(fd);
        ::unlink(temporary.c_str());
        return problem;
      }
      written += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
      const std::string problem = std::strerror(errno);
      ::unlink(temporary.c_str());
      return problem;
    }
    if (::rename(temporary.c_str(), path.c_str()) != 0) {
      const std::string problem = std::strerror(errno);
      ::unlink(temporary.c_str());
      return problem;
    }
    return "";
  }

  RpcContext& ctx_;
  std::vector<target::SubsystemInfo> snapshot_;  // what find() points into
};

}  // namespace

void register_rpc_methods(rpc::Dispatcher& dispatcher, RpcContext& context) {
  // One Methods object for the dispatcher's lifetime; the methods share it (they run one at
  // a time on the server's thread).
  auto methods = std::make_shared<Methods>(context);
  const auto add = [&](const char* name, const char* summary,
                       Outcome (Methods::*method)(const Json&)) {
    dispatcher.add(name, summary,
                   [methods, method](const Json& params) { return ((*methods).*method)(params); });
  };
  add("bdev_create", "create a bdev: {type, name, ...the configuration's keys} -> {name}",
      &Methods::bdev_create);
  add("bdev_delete", "delete a bdev no namespace uses: {name}", &Methods::bdev_delete);
  add("bdev_list", "list the bdevs with their geometry and configuration", &Methods::bdev_list);
  add("bdev_error_inject",
      "set an error bdev's rule: {name, io_types?, action?, count?, every_nth?, sct?, sc?, dnr?} "
      "-> the rule; io_types [] clears it",
      &Methods::bdev_error_inject);
  add("bdev_error_release_dropped",
      "complete the I/O an error bdev dropped: {name, fate: submit|abort} -> {failed, dropped}",
      &Methods::bdev_error_release_dropped);
  add("bdev_delay_stall", "stall or release every I/O of a delay bdev: {name, stall}",
      &Methods::bdev_delay_stall);
  add("subsystem_create",
      "create a subsystem: {nqn, serial_number, model_number, allow_any_host, hosts, "
      "max_namespaces} -> {nqn}",
      &Methods::subsystem_create);
  add("subsystem_delete", "disconnect a subsystem's hosts and delete it: {nqn}",
      &Methods::subsystem_delete);
  add("subsystem_list", "list the subsystems with namespaces, listeners and connected controllers",
      &Methods::subsystem_list);
  add("subsystem_allow_any_host", "let any host connect, or only the listed ones: {nqn, allow}",
      &Methods::subsystem_allow_any_host);
  add("namespace_add", "add a namespace: {nqn, bdev, nsid?, uuid?, nguid?, eui64?} -> {nsid}",
      &Methods::namespace_add);
  add("namespace_remove", "remove a namespace: {nqn, nsid}", &Methods::namespace_remove);
  add("listener_add",
      "add a listener to a subsystem and listen there: {nqn, traddr, trsvcid?, adrfam?, trtype?}",
      &Methods::listener_add);
  add("listener_remove", "remove a subsystem's listener: {nqn, traddr, trsvcid?, adrfam?}",
      &Methods::listener_remove);
  add("host_add", "allow a host NQN to connect to a subsystem: {nqn, host}", &Methods::host_add);
  add("host_remove", "no longer allow a host NQN: {nqn, host}", &Methods::host_remove);
  add("stats", "reactor, transport and bdev counters", &Methods::stats);
  add("log_set_level", "set the log level: {level: error|warn|notice|info|debug}",
      &Methods::log_set_level);
  add("log_get_level", "the log level -> {level}", &Methods::log_get_level);
  add("save_config",
      "the configuration -c reads, as the target is now; with {path} also written there",
      &Methods::save_config);
}

}  // namespace nvmf::tgt
