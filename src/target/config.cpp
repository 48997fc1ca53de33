// JSON configuration parser. Exceptions (nlohmann's and our ConfigError) live only inside
// parse_target_config(); its boundary turns them into Result + a one-line message (STYLE 7).
#include "target/config.h"

#include <arpa/inet.h>

#include <cctype>
#include <charconv>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "common/util.h"
#include "spec/string_field.h"
#include "target/target.h"

namespace nvmf::target {

using json = nlohmann::json;

const char* send_with_invalidate_name(SendWithInvalidate mode) noexcept {
  return mode == SendWithInvalidate::off ? "off" : "auto";
}

namespace {

struct ConfigError {
  std::string message;  // "path: problem"
};

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw ConfigError{path + ": " + problem};
}

const char* type_name(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
      return "a negative integer";
    case json::value_t::number_unsigned:
      return "an unsigned integer";
    case json::value_t::number_float:
      return "a number with a fraction";
    default:
      return "something else";
  }
}

// One JSON object with its path: typed getters that name the field in every error, and a check
// that no key outside the allowed set is present.
class Node {
 public:
  Node(const json& value, std::string path) : value_(value), path_(std::move(path)) {
    if (!value_.is_object())
      fail(path_, std::string("expected an object, got ") + type_name(value_));
  }

  const std::string& path() const { return path_; }
  std::string child(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

  void allow_only(std::initializer_list<const char*> keys) const {
    for (const auto& [key, unused] : value_.items()) {
      bool known = false;
      for (const char* allowed : keys) known = known || key == allowed;
      if (!known) fail(child(key.c_str()), "unknown key");
    }
  }

  bool has(const char* key) const { return value_.contains(key); }
  const json& at(const char* key) const { return value_.at(key); }

  uint64_t get_uint(const char* key, uint64_t min, uint64_t max, uint64_t fallback) const {
    if (!has(key)) return fallback;
    const json& value = at(key);
    if (!value.is_number_unsigned()) {
      fail(child(key), std::string("expected an unsigned integer, got ") + type_name(value));
    }
    const uint64_t number = value.get<uint64_t>();
    if (number < min || number > max) {
      fail(child(key), std::to_string(number) + " is outside [" + std::to_string(min) + ", " +
                           std::to_string(max) + "]");
    }
    return number;
  }

  bool get_bool(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& value = at(key);
    if (!value.is_boolean())
      fail(child(key), std::string("expected a boolean, got ") + type_name(value));
    return value.get<bool>();
  }

  std::string get_string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const json& value = at(key);
    if (!value.is_string())
      fail(child(key), std::string("expected a string, got ") + type_name(value));
    return value.get<std::string>();
  }

  std::string require_string(const char* key) const {
    if (!has(key)) fail(child(key), "required");
    return get_string(key, "");
  }

  // An optional array; each element is visited with its path.
  template <typename Fn>
  void each(const char* key, Fn&& fn) const {
    if (!has(key)) return;
    const json& value = at(key);
    if (!value.is_array())
      fail(child(key), std::string("expected an array, got ") + type_name(value));
    for (size_t i = 0; i < value.size(); ++i) {
      fn(value[i], child(key) + "[" + std::to_string(i) + "]", i);
    }
  }

 private:
  const json& value_;
  std::string path_;
};

std::string in_quotes(const std::string& text) { return "\"" + text + "\""; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Hex digits (dashes skipped) into `out`; false unless exactly out_size bytes' worth.
bool parse_hex(std::string_view text, uint8_t* out, size_t out_size) {
  size_t nibbles = 0;
  for (const char c : text) {
    if (c == '-') continue;
    const int value = hex_value(c);
    if (value < 0 || nibbles >= out_size * 2) return false;
    if (nibbles % 2 == 0) {
      out[nibbles / 2] = static_cast<uint8_t>(value << 4);
    } else {
      out[nibbles / 2] = static_cast<uint8_t>(out[nibbles / 2] | value);
    }
    ++nibbles;
  }
  return nibbles == out_size * 2;
}

bdev::Uuid parse_uuid(const Node& node, const char* key) {
  const std::string text = node.get_string(key, "");
  bdev::Uuid uuid{};
  if (!spec::uuid_text_valid(text) || !parse_hex(text, uuid.data(), uuid.size())) {
    fail(node.child(key),
         in_quotes(text) + " is not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)");
  }
  return uuid;
}

template <size_t N>
std::array<uint8_t, N> parse_hex_id(const Node& node, const char* key) {
  const std::string text = node.get_string(key, "");
  std::array<uint8_t, N> id{};
  if (text.find('-') != std::string::npos || !parse_hex(text, id.data(), N)) {
    fail(node.child(key), in_quotes(text) + " is not " + std::to_string(N * 2) + " hex digits");
  }
  return id;
}

void parse_target_section(const Node& node, TargetOpts& opts) {
  node.allow_only({"max_namespaces_default", "keep_alive_granularity_ms",
                   "discovery_keep_alive_timeout_ms", "teardown_timeout_ms"});
  opts.max_namespaces_default = static_cast<uint32_t>(
      node.get_uint("max_namespaces_default", 1, 1024, opts.max_namespaces_default));
  const uint64_t granularity =
      node.get_uint("keep_alive_granularity_ms", 100, 6553500, opts.keep_alive_granularity_ms);
  if (granularity % 100 != 0) {
    fail(node.child("keep_alive_granularity_ms"),
         std::to_string(granularity) + " is not a multiple of 100");
  }
  opts.keep_alive_granularity_ms = static_cast<uint32_t>(granularity);
  opts.discovery_keep_alive_timeout_ms = static_cast<uint32_t>(node.get_uint(
      "discovery_keep_alive_timeout_ms", 1, UINT32_MAX, opts.discovery_keep_alive_timeout_ms));
  opts.teardown_timeout_ms = static_cast<uint32_t>(
      node.get_uint("teardown_timeout_ms", 0, 3600000, opts.teardown_timeout_ms));
}

void parse_transport(const Node& node, TargetConfig& config) {
  node.allow_only({"type", "max_queue_depth", "max_admin_queue_depth", "max_qpairs_per_ctrlr",
                   "in_capsule_data_size", "max_io_size", "max_sgl_descriptors",
                   "send_with_invalidate", "acceptor_poll_rate", "no_srq", "max_srq_depth"});
  const std::string type = node.require_string("type");
  if (type != "rdma")
    fail(node.child("type"), in_quotes(type) + " is not a supported transport (rdma)");
  config.transport.type = type;
  TargetOpts& opts = config.opts;
  opts.max_queue_depth =
      static_cast<uint32_t>(node.get_uint("max_queue_depth", 2, 65535, opts.max_queue_depth));
  opts.max_admin_queue_depth = static_cast<uint32_t>(
      node.get_uint("max_admin_queue_depth", 2, 65535, opts.max_admin_queue_depth));
  opts.max_qpairs_per_ctrlr = static_cast<uint32_t>(
      node.get_uint("max_qpairs_per_ctrlr", 2, 65535, opts.max_qpairs_per_ctrlr));
  const uint64_t icd = node.get_uint("in_capsule_data_size", 0, 16384, opts.in_capsule_data_size);
  if (icd % 16 != 0)
    fail(node.child("in_capsule_data_size"), std::to_string(icd) + " is not a multiple of 16");
  opts.in_capsule_data_size = static_cast<uint32_t>(icd);
  const uint64_t io_size = node.get_uint("max_io_size", 4096, 1u << 30, opts.max_io_size);
  if (io_size % 4096 != 0 || !is_power_of_two(io_size / 4096)) {
    fail(node.child("max_io_size"), std::to_string(io_size) + " is not 4096 times a power of two");
  }
  opts.max_io_size = static_cast<uint32_t>(io_size);
  opts.max_sgl_descriptors = static_cast<uint32_t>(
      node.get_uint("max_sgl_descriptors", 1, kSglDescriptorsMax, opts.max_sgl_descriptors));
  const std::string invalidate = node.get_string("send_with_invalidate", "auto");
  if (invalidate == "auto") {
    config.transport.send_with_invalidate = SendWithInvalidate::automatic;
  } else if (invalidate == "off") {
    config.transport.send_with_invalidate = SendWithInvalidate::off;
  } else {
    fail(node.child("send_with_invalidate"), in_quotes(invalidate) + " is not auto or off");
  }
  config.transport.acceptor_poll_rate_us = static_cast<uint32_t>(node.get_uint(
      "acceptor_poll_rate", 0, 1000000, config.transport.acceptor_poll_rate_us));
  config.transport.no_srq = node.get_bool("no_srq", config.transport.no_srq);
  // At most half of the transport's CQ per reactor and device (RdmaTargetOpts::cq_depth,
  // 32768), which also holds every queue pair's sends: a deeper SRQ would fail connections.
  config.transport.max_srq_depth = static_cast<uint32_t>(
      node.get_uint("max_srq_depth", 2, 16384, config.transport.max_srq_depth));
}

template <size_t N>
bool is_all_zero(const std::array<uint8_t, N>& bytes) {
  for (uint8_t byte : bytes) {
    if (byte != 0) return false;
  }
  return true;
}

// DDDD:BB:DD.F in hex (function 0..7), as sysfs names PCI functions.
bool is_pci_address(const std::string& text) {
  if (text.size() != 12 || text[4] != ':' || text[7] != ':' || text[10] != '.') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (!std::isxdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  return text[11] >= '0' && text[11] <= '7';
}

std::string parse_base_bdev(const Node& node, const std::string& name) {
  std::string base = node.require_string("base_bdev");
  if (base.empty()) fail(node.child("base_bdev"), "must not be empty");
  if (base == name) fail(node.child("base_bdev"), "a bdev cannot be its own base");
  return base;
}

constexpr const char* kIoTypeNames = "read, write, flush, write_zeroes, unmap or all";

bdev::ErrorInjection parse_injection(const Node& node) {
  node.allow_only({"io_types", "action", "count", "every_nth", "sct", "sc", "dnr"});
  bdev::ErrorInjection injection;
  injection.io_types = bdev::kAllIoTypes;  // no io_types: every type
  if (node.has("io_types")) {
    injection.io_types = 0;
    node.each("io_types", [&](const json& value, const std::string& path, size_t) {
      if (!value.is_string()) {
        fail(path, std::string("expected an I/O type name, got ") + type_name(value));
      }
      const std::string name = value.get<std::string>();
      if (name == "all") {
        injection.io_types |= bdev::kAllIoTypes;
        return;
      }
      for (unsigned type = 0; type < bdev::kIoTypeCount; ++type) {
        if (name == bdev::io_type_name(static_cast<bdev::IoType>(type))) {
          injection.io_types |= bdev::io_type_bit(static_cast<bdev::IoType>(type));
          return;
        }
      }
      fail(path, in_quotes(name) + " is not " + kIoTypeNames);
    });
  }
  const std::string action = node.get_string("action", "fail");
  if (action == "fail") {
    injection.action = bdev::ErrorAction::fail;
  } else if (action == "drop") {
    injection.action = bdev::ErrorAction::drop;
  } else {
    fail(node.child("action"), in_quotes(action) + " is not fail or drop");
  }
  injection.count = node.get_uint("count", 0, UINT64_MAX, 0);
  injection.every_nth = node.get_uint("every_nth", 1, UINT64_MAX, 1);
  // SCT is three bits of the Status Field, SC eight.
  injection.sct = static_cast<uint8_t>(node.get_uint("sct", 0, 7, injection.sct));
  injection.sc = static_cast<uint8_t>(node.get_uint("sc", 0, 255, injection.sc));
  if (injection.sct == 0 && injection.sc == 0) {
    fail(node.child("sc"), "0 with sct 0 is Successful Completion, not a failure");
  }
  injection.dnr = node.get_bool("dnr", false);
  return injection;
}

BdevConfig parse_bdev(const Node& node) {
  BdevConfig bdev;
  const std::string type = node.require_string("type");
  bdev.name = node.require_string("name");
  if (bdev.name.empty()) fail(node.child("name"), "must not be empty");
  const uint64_t block_size = node.get_uint("block_size", 512, 65536, 512);
  if (!is_power_of_two(block_size)) {
    fail(node.child("block_size"),
         std::to_string(block_size) + " is not a power of two in [512, 65536]");
  }
  const uint32_t queue_depth = static_cast<uint32_t>(node.get_uint("queue_depth", 1, 4096, 128));
  bdev::Uuid uuid{};
  if (node.has("uuid")) uuid = parse_uuid(node, "uuid");
  const uint64_t blocks_max = UINT64_MAX / block_size;
  if (type == "null") {
    node.allow_only({"type", "name", "block_size", "num_blocks", "uuid", "queue_depth",
                     "completion_delay_ns", "zero_read_buffers"});
    bdev.kind = BdevKind::null;
    auto& opts = bdev.null_opts;
    opts.name = bdev.name;
    opts.block_size_bytes = static_cast<uint32_t>(block_size);
    opts.block_count = node.get_uint("num_blocks", 1, blocks_max, opts.block_count);
    opts.uuid = uuid;
    opts.queue_depth_max = queue_depth;
    // 60 s: the bdev's own limit (hosts time out after 30 s).
    opts.completion_delay_ns =
        node.get_uint("completion_delay_ns", 0, 60ull * 1000 * 1000 * 1000, 0);
    opts.zero_read_buffers = node.get_bool("zero_read_buffers", false);
  } else if (type == "malloc") {
    node.allow_only({"type", "name", "block_size", "num_blocks", "uuid", "queue_depth"});
    bdev.kind = BdevKind::malloc;
    auto& opts = bdev.malloc_opts;
    opts.name = bdev.name;
    opts.block_size_bytes = static_cast<uint32_t>(block_size);
    opts.block_count = node.get_uint("num_blocks", 1, blocks_max, opts.block_count);
    opts.uuid = uuid;
    opts.queue_depth_max = queue_depth;
  } else if (type == "uring") {
    node.allow_only({"type", "name", "block_size", "uuid", "queue_depth", "path", "create_file",
                     "size_bytes", "direct_io", "fallocate"});
    bdev.kind = BdevKind::uring;
    auto& opts = bdev.uring_opts;
    opts.name = bdev.name;
    opts.path = node.require_string("path");
    if (opts.path.empty()) fail(node.child("path"), "must not be empty");
    opts.block_size_bytes = node.has("block_size") ? static_cast<uint32_t>(block_size) : 0;
    opts.create_file = node.get_bool("create_file", false);
    opts.size_bytes = node.get_uint("size_bytes", 0, UINT64_MAX, 0);
    const std::string direct = node.get_string("direct_io", "prefer");
    if (direct == "prefer") {
      opts.direct_io = bdev::DirectIo::prefer;
    } else if (direct == "required") {
      opts.direct_io = bdev::DirectIo::required;
    } else if (direct == "off") {
      opts.direct_io = bdev::DirectIo::off;
    } else {
      fail(node.child("direct_io"), in_quotes(direct) + " is not prefer, required or off");
    }
    opts.fallocate_enabled = node.get_bool("fallocate", true);
    opts.uuid = uuid;
    opts.queue_depth_max = queue_depth;
  } else if (type == "nvme") {
    // Geometry and identifiers come from the device's Identify data.
    node.allow_only({"type", "name", "pci", "nsid", "queue_depth"});
    bdev.kind = BdevKind::nvme;
    auto& opts = bdev.nvme_opts;
    opts.name = bdev.name;
    opts.pci = node.require_string("pci");
    if (!is_pci_address(opts.pci)) {
      fail(node.child("pci"),
           in_quotes(opts.pci) +
               " is not a PCI address like \"0000:00:04.0\" (domain:bus:device.function)");
    }
    opts.nsid = static_cast<uint32_t>(node.get_uint("nsid", 1, 0xFFFFFFFE, 1));
    opts.queue_depth_max = queue_depth;
  } else if (type == "delay") {
    // Geometry, depth and supported types are the base's.
    node.allow_only({"type", "name", "base_bdev", "uuid", "read_latency_us", "write_latency_us",
                     "flush_latency_us", "jitter_us"});
    bdev.kind = BdevKind::delay;
    auto& opts = bdev.delay_opts;
    opts.name = bdev.name;
    opts.base_bdev = parse_base_bdev(node, bdev.name);
    opts.uuid = uuid;
    opts.latency.read_latency_us = node.get_uint("read_latency_us", 0, bdev::kDelayLatencyMaxUs, 0);
    opts.latency.write_latency_us =
        node.get_uint("write_latency_us", 0, bdev::kDelayLatencyMaxUs, 0);
    opts.latency.flush_latency_us =
        node.get_uint("flush_latency_us", 0, bdev::kDelayLatencyMaxUs, 0);
    opts.latency.jitter_us = node.get_uint("jitter_us", 0, bdev::kDelayLatencyMaxUs, 0);
  } else if (type == "error") {
    node.allow_only({"type", "name", "base_bdev", "uuid", "inject"});
    bdev.kind = BdevKind::error;
    auto& opts = bdev.error_opts;
    opts.name = bdev.name;
    opts.base_bdev = parse_base_bdev(node, bdev.name);
    opts.uuid = uuid;
    if (node.has("inject")) {
      opts.injection = parse_injection(Node(node.at("inject"), node.child("inject")));
    }
  } else {
    fail(node.child("type"),
         in_quotes(type) + " is not a bdev type (null, malloc, uring, nvme, delay, error)");
  }
  return bdev;
}

ListenerAddress parse_listener(const Node& node) {
  node.allow_only({"trtype", "adrfam", "traddr", "trsvcid"});
  ListenerAddress address;
  const std::string trtype = node.get_string("trtype", "rdma");
  if (trtype != "rdma") fail(node.child("trtype"), in_quotes(trtype) + " is not supported (rdma)");
  address.trtype = spec::trtype::rdma;
  const std::string adrfam = node.get_string("adrfam", "ipv4");
  int family = AF_INET;
  if (adrfam == "ipv4") {
    address.adrfam = spec::adrfam::ipv4;
  } else if (adrfam == "ipv6") {
    address.adrfam = spec::adrfam::ipv6;
    family = AF_INET6;
  } else {
    fail(node.child("adrfam"), in_quotes(adrfam) + " is not ipv4 or ipv6");
  }
  address.traddr = node.require_string("traddr");
  unsigned char parsed[sizeof(in6_addr)];
  if (inet_pton(family, address.traddr.c_str(), parsed) != 1) {
    fail(node.child("traddr"), in_quotes(address.traddr) + " is not an " + adrfam + " address");
  }
  if (node.has("trsvcid") && node.at("trsvcid").is_number_unsigned()) {
    address.trsvcid = std::to_string(node.get_uint("trsvcid", 1, 65535, 4420));
  } else {
    address.trsvcid = node.get_string("trsvcid", "4420");
    unsigned port = 0;
    const char* begin = address.trsvcid.data();
    const char* end = begin + address.trsvcid.size();
    const auto [at, error] = std::from_chars(begin, end, port);
    if (error != std::errc{} || at != end || port == 0 || port > 65535) {
      fail(node.child("trsvcid"),
           in_quotes(address.trsvcid) + " is not a port number in [1, 65535]");
    }
  }
  return address;
}

bool printable(const std::string& text) {
  for (const char c : text) {
    if (c < 0x20 || c > 0x7E) return false;
  }
  return true;
}

NamespaceConfig parse_namespace(const Node& ns_node, uint32_t max_namespaces) {
  ns_node.allow_only({"nsid", "bdev", "uuid", "nguid", "eui64"});
  NamespaceConfig ns;
  ns.nsid = static_cast<uint32_t>(ns_node.get_uint("nsid", 1, max_namespaces, 0));
  ns.bdev = ns_node.require_string("bdev");
  if (ns_node.has("uuid")) {
    ns.uuid_set = true;
    ns.uuid = parse_uuid(ns_node, "uuid");
  }
  if (ns_node.has("nguid")) ns.nguid = parse_hex_id<16>(ns_node, "nguid");
  if (ns_node.has("eui64")) ns.eui64 = parse_hex_id<8>(ns_node, "eui64");
  return ns;
}

// `bdevs`: the configuration's bdevs namespaces must name, or nullptr to skip that check.
SubsystemConfig parse_subsystem(const Node& node, const TargetOpts& target_opts,
                                const std::vector<BdevConfig>* bdevs) {
  node.allow_only({"nqn", "serial_number", "model_number", "allow_any_host", "hosts",
                   "max_namespaces", "namespaces", "listeners"});
  SubsystemConfig subsystem;
  SubsystemOpts& opts = subsystem.opts;
  opts.nqn = node.require_string("nqn");
  // Names without the nqn. form pass with a warning (Target::add_subsystem), as on nvmet.
  if (!spec::subsystem_name_acceptable(opts.nqn))
    fail(node.child("nqn"), in_quotes(opts.nqn) + " is not a valid NQN");
  if (opts.nqn == spec::discovery_nqn) {
    fail(node.child("nqn"), "the discovery subsystem is built in and cannot be configured");
  }
  opts.serial_number = node.get_string("serial_number", opts.serial_number);
  if (opts.serial_number.size() > 20 || !printable(opts.serial_number)) {
    fail(node.child("serial_number"), "must be at most 20 printable ASCII characters");
  }
  opts.model_number = node.get_string("model_number", opts.model_number);
  if (opts.model_number.size() > 40 || !printable(opts.model_number)) {
    fail(node.child("model_number"), "must be at most 40 printable ASCII characters");
  }
  opts.allow_any_host = node.get_bool("allow_any_host", false);
  node.each("hosts", [&](const json& value, const std::string& path, size_t) {
    if (!value.is_string())
      fail(path, std::string("expected a host NQN string, got ") + type_name(value));
    const std::string host = value.get<std::string>();
    if (!spec::nqn_valid(host)) fail(path, in_quotes(host) + " is not a valid NQN");
    for (const std::string& seen : opts.hosts) {
      if (seen == host) fail(path, "duplicate host " + in_quotes(host));
    }
    opts.hosts.push_back(host);
  });
  opts.max_namespaces = static_cast<uint32_t>(
      node.get_uint("max_namespaces", 1, 1024, target_opts.max_namespaces_default));
  std::set<uint32_t> nsids;
  node.each("namespaces", [&](const json& value, const std::string& path, size_t) {
    const Node ns_node(value, path);
    NamespaceConfig ns = parse_namespace(ns_node, opts.max_namespaces);
    if (ns.nsid != 0 && !nsids.insert(ns.nsid).second) {
      fail(ns_node.child("nsid"), "duplicate NSID " + std::to_string(ns.nsid));
    }
    if (bdevs != nullptr) {
      bool known = false;
      for (const BdevConfig& bdev : *bdevs) {
        known = known || bdev.name == ns.bdev;
        const std::string* base = bdev.base_bdev();
        if (base != nullptr && *base == ns.bdev) {
          fail(ns_node.child("bdev"), in_quotes(ns.bdev) + " is the base of " +
                                          bdev_kind_name(bdev.kind) + " bdev " +
                                          in_quotes(bdev.name) + "; name that one instead");
        }
      }
      if (!known) fail(ns_node.child("bdev"), "no bdev named " + in_quotes(ns.bdev));
    }
    subsystem.namespaces.push_back(ns);
  });
  if (subsystem.namespaces.size() > opts.max_namespaces) {
    fail(node.child("namespaces"), std::to_string(subsystem.namespaces.size()) +
                                       " namespaces exceed max_namespaces " +
                                       std::to_string(opts.max_namespaces));
  }
  node.each("listeners", [&](const json& value, const std::string& path, size_t) {
    ListenerAddress address = parse_listener(Node(value, path));
    for (const ListenerAddress& seen : subsystem.listeners) {
      if (seen == address)
        fail(path, "duplicate listener " + address.traddr + ":" + address.trsvcid);
    }
    subsystem.listeners.push_back(address);
  });
  return subsystem;
}

json parse_json(std::string_view text, const std::string& path) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& error) {
    // nlohmann says "[json.exception.parse_error.101] parse error at line 3, column 5: ...",
    // or out_of_range.406 "number overflow parsing '1e999'" for a number a double cannot hold.
    std::string what = error.what();
    const size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    fail(path, "invalid JSON: " + what);
  }
}

TargetConfig parse(std::string_view text) {
  const json root = parse_json(text, "config");
  const Node top(root, "");
  top.allow_only({"target", "transports", "bdevs", "subsystems"});
  TargetConfig config;
  if (top.has("target")) parse_target_section(Node(top.at("target"), "target"), config.opts);
  top.each("transports", [&](const json& value, const std::string& path, size_t index) {
    if (index > 0) fail(path, "only one rdma transport is supported");
    parse_transport(Node(value, path), config);
    config.transport_configured = true;
  });
  top.each("bdevs", [&](const json& value, const std::string& path, size_t) {
    BdevConfig bdev = parse_bdev(Node(value, path));
    for (const BdevConfig& seen : config.bdevs) {
      if (seen.name == bdev.name)
        fail(path + ".name", "duplicate bdev name " + in_quotes(bdev.name));
    }
    if (const std::string* base = bdev.base_bdev()) {
      bool defined = false;
      for (const BdevConfig& seen : config.bdevs) {
        defined = defined || seen.name == *base;
        const std::string* other = seen.base_bdev();
        if (other != nullptr && *other == *base) {
          fail(path + ".base_bdev",
               in_quotes(*base) + " is already the base of " + in_quotes(seen.name));
        }
      }
      if (!defined) {
        fail(path + ".base_bdev", "no bdev named " + in_quotes(*base) + " earlier in bdevs");
      }
    }
    config.bdevs.push_back(std::move(bdev));
  });
  top.each("subsystems", [&](const json& value, const std::string& path, size_t) {
    SubsystemConfig subsystem = parse_subsystem(Node(value, path), config.opts, &config.bdevs);
    for (const SubsystemConfig& seen : config.subsystems) {
      if (seen.opts.nqn == subsystem.opts.nqn) {
        fail(path + ".nqn", "duplicate subsystem " + in_quotes(subsystem.opts.nqn));
      }
    }
    config.subsystems.push_back(std::move(subsystem));
  });
  if (auto valid = config.opts.validate(); !valid) fail("config", valid.error().detail);
  return config;
}

std::string describe(const Error& error) {
  char buffer[160];
  return error_describe(error, buffer, sizeof(buffer));
}

}  // namespace

namespace {

// The exception boundary of every parse_*_config(): fn() or invalid_argument + the message.
template <typename Fn>
auto guarded(const std::string& path, std::string* error_message, Fn&& fn) noexcept
    -> Result<decltype(fn())> {
  try {
    return fn();
  } catch (const ConfigError& error) {
    if (error_message != nullptr) *error_message = error.message;
  } catch (const std::exception& error) {
    if (error_message != nullptr) *error_message = path + ": " + error.what();
  } catch (...) {
    if (error_message != nullptr) *error_message = path + ": unexpected error";
  }
  return Unexpected(Errc::invalid_argument, "configuration");
}

std::string hex_text(const uint8_t* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < size; ++i) {
    text += kDigits[bytes[i] >> 4];
    text += kDigits[bytes[i] & 0xF];
  }
  return text;
}

std::string uuid_text(const bdev::Uuid& uuid) {
  char text[bdev::kUuidStringSize];
  bdev::uuid_format(uuid, text);
  return text;
}

json injection_json(const bdev::ErrorInjection& injection) {
  json types = json::array();
  if (injection.io_types == bdev::kAllIoTypes) {
    types.push_back("all");
  } else {
    for (unsigned type = 0; type < bdev::kIoTypeCount; ++type) {
      const auto io_type = static_cast<bdev::IoType>(type);
      if ((injection.io_types & bdev::io_type_bit(io_type)) != 0) {
        types.push_back(bdev::io_type_name(io_type));
      }
    }
  }
  json out = json::object();
  out["io_types"] = std::move(types);
  out["action"] = bdev::error_action_name(injection.action);
  out["count"] = injection.count;
  out["every_nth"] = injection.every_nth;
  out["sct"] = injection.sct;
  out["sc"] = injection.sc;
  out["dnr"] = injection.dnr;
  return out;
}

json bdev_json(const BdevConfig& config) {
  json out = json::object();
  out["type"] = bdev_kind_name(config.kind);
  out["name"] = config.name;
  switch (config.kind) {
    case BdevKind::null: {
      const auto& opts = config.null_opts;
      out["block_size"] = opts.block_size_bytes;
      out["num_blocks"] = opts.block_count;
      if (!bdev::uuid_is_null(opts.uuid)) out["uuid"] = uuid_text(opts.uuid);
      out["queue_depth"] = opts.queue_depth_max;
      out["completion_delay_ns"] = opts.completion_delay_ns;
      out["zero_read_buffers"] = opts.zero_read_buffers;
      break;
    }
    case BdevKind::malloc: {
      const auto& opts = config.malloc_opts;
      out["block_size"] = opts.block_size_bytes;
      out["num_blocks"] = opts.block_count;
      if (!bdev::uuid_is_null(opts.uuid)) out["uuid"] = uuid_text(opts.uuid);
      out["queue_depth"] = opts.queue_depth_max;
      break;
    }
    case BdevKind::uring: {
      const auto& opts = config.uring_opts;
      out["path"] = opts.path;
      // 0: the device's logical block size (512 for a file), found at creation.
      if (opts.block_size_bytes != 0) out["block_size"] = opts.block_size_bytes;
      out["create_file"] = opts.create_file;
      out["size_bytes"] = opts.size_bytes;
      out["direct_io"] = opts.direct_io == bdev::DirectIo::required ? "required"
                         : opts.direct_io == bdev::DirectIo::off    ? "off"
                                                                    : "prefer";
      out["fallocate"] = opts.fallocate_enabled;
      if (!bdev::uuid_is_null(opts.uuid)) out["uuid"] = uuid_text(opts.uuid);
      out["queue_depth"] = opts.queue_depth_max;
      break;
    }
    case BdevKind::nvme: {
      const auto& opts = config.nvme_opts;
      out["pci"] = opts.pci;
      out["nsid"] = opts.nsid;
      out["queue_depth"] = opts.queue_depth_max;
      break;
    }
    case BdevKind::delay: {
      const auto& opts = config.delay_opts;
      out["base_bdev"] = opts.base_bdev;
      if (!bdev::uuid_is_null(opts.uuid)) out["uuid"] = uuid_text(opts.uuid);
      out["read_latency_us"] = opts.latency.read_latency_us;
      out["write_latency_us"] = opts.latency.write_latency_us;
      out["flush_latency_us"] = opts.latency.flush_latency_us;
      out["jitter_us"] = opts.latency.jitter_us;
      break;
    }
    case BdevKind::error: {
      const auto& opts = config.error_opts;
      out["base_bdev"] = opts.base_bdev;
      if (!bdev::uuid_is_null(opts.uuid)) out["uuid"] = uuid_text(opts.uuid);
      out["inject"] = injection_json(opts.injection);
      break;
    }
  }
  return out;
}

}  // namespace

const char* bdev_kind_name(BdevKind kind) noexcept {
  switch (kind) {
    case BdevKind::null:
      return "null";
    case BdevKind::malloc:
      return "malloc";
    case BdevKind::uring:
      return "uring";
    case BdevKind::nvme:
      return "nvme";
    case BdevKind::delay:
      return "delay";
    case BdevKind::error:
      return "error";
  }
  return "unknown";
}

const std::string* BdevConfig::base_bdev() const noexcept {
  switch (kind) {
    case BdevKind::delay:
      return &delay_opts.base_bdev;
    case BdevKind::error:
      return &error_opts.base_bdev;
    default:
      return nullptr;
  }
}

Result<TargetConfig> parse_target_config(std::string_view text,
                                         std::string* error_message) noexcept {
  return guarded("config", error_message, [&] { return parse(text); });
}

Result<BdevConfig> parse_bdev_config(std::string_view text, const std::string& path,
                                     std::string* error_message) noexcept {
  return guarded(path, error_message,
                 [&] { return parse_bdev(Node(parse_json(text, path), path)); });
}

Result<SubsystemConfig> parse_subsystem_config(std::string_view text, const std::string& path,
                                               const TargetOpts& opts,
                                               std::string* error_message) noexcept {
  return guarded(path, error_message, [&] {
    return parse_subsystem(Node(parse_json(text, path), path), opts, nullptr);
  });
}

Result<NamespaceConfig> parse_namespace_config(std::string_view text, const std::string& path,
                                               uint32_t max_namespaces,
                                               std::string* error_message) noexcept {
  return guarded(path, error_message, [&] {
    return parse_namespace(Node(parse_json(text, path), path), max_namespaces);
  });
}

Result<bdev::ErrorInjection> parse_error_injection(std::string_view text, const std::string& path,
                                                   std::string* error_message) noexcept {
  return guarded(path, error_message,
                 [&] { return parse_injection(Node(parse_json(text, path), path)); });
}

Result<ListenerAddress> parse_listener_config(std::string_view text, const std::string& path,
                                              std::string* error_message) noexcept {
  return guarded(path, error_message,
                 [&] { return parse_listener(Node(parse_json(text, path), path)); });
}

std::string bdev_config_to_json(const BdevConfig& config) { return bdev_json(config).dump(); }

std::string error_injection_to_json(const bdev::ErrorInjection& injection) {
  return injection_json(injection).dump();
}

std::string target_config_to_json(const TargetConfig& config) {
  json root = json::object();
  const TargetOpts& opts = config.opts;
  root["target"] = {{"max_namespaces_default", opts.max_namespaces_default},
                    {"keep_alive_granularity_ms", opts.keep_alive_granularity_ms},
                    {"discovery_keep_alive_timeout_ms", opts.discovery_keep_alive_timeout_ms},
                    {"teardown_timeout_ms", opts.teardown_timeout_ms}};
  root["transports"] = json::array();
  root["transports"].push_back(
      {{"type", config.transport.type},
       {"max_queue_depth", opts.max_queue_depth},
       {"max_admin_queue_depth", opts.max_admin_queue_depth},
       {"max_qpairs_per_ctrlr", opts.max_qpairs_per_ctrlr},
       {"in_capsule_data_size", opts.in_capsule_data_size},
       {"max_io_size", opts.max_io_size},
       {"max_sgl_descriptors", opts.max_sgl_descriptors},
       {"send_with_invalidate", send_with_invalidate_name(config.transport.send_with_invalidate)},
       {"acceptor_poll_rate", config.transport.acceptor_poll_rate_us},
       {"no_srq", config.transport.no_srq},
       {"max_srq_depth", config.transport.max_srq_depth}});
  root["bdevs"] = json::array();
  for (const BdevConfig& bdev : config.bdevs) root["bdevs"].push_back(bdev_json(bdev));
  root["subsystems"] = json::array();
  for (const SubsystemConfig& subsystem : config.subsystems) {
    const SubsystemOpts& sub = subsystem.opts;
    json entry = {{"nqn", sub.nqn},
                  {"serial_number", sub.serial_number},
                  {"model_number", sub.model_number},
                  {"allow_any_host", sub.allow_any_host},
                  {"hosts", sub.hosts},
                  {"max_namespaces",
                   sub.max_namespaces == 0 ? opts.max_namespaces_default : sub.max_namespaces}};
    entry["namespaces"] = json::array();
    for (const NamespaceConfig& ns : subsystem.namespaces) {
      json ns_entry = json::object();
      if (ns.nsid != 0) ns_entry["nsid"] = ns.nsid;
      ns_entry["bdev"] = ns.bdev;
      if (ns.uuid_set) ns_entry["uuid"] = uuid_text(ns.uuid);
      if (!is_all_zero(ns.nguid)) ns_entry["nguid"] = hex_text(ns.nguid.data(), ns.nguid.size());
      if (!is_all_zero(ns.eui64)) ns_entry["eui64"] = hex_text(ns.eui64.data(), ns.eui64.size());
      entry["namespaces"].push_back(std::move(ns_entry));
    }
    entry["listeners"] = json::array();
    for (const ListenerAddress& listener : subsystem.listeners) {
      entry["listeners"].push_back(
          {{"trtype", "rdma"},
           {"adrfam", listener.adrfam == spec::adrfam::ipv6 ? "ipv6" : "ipv4"},
           {"traddr", listener.traddr},
           {"trsvcid", listener.trsvcid}});
    }
    root["subsystems"].push_back(std::move(entry));
  }
  return root.dump(2) + "\n";
}

namespace {
// "path: rest", or just "rest" without a path.
std::string at_path(const std::string& path, const std::string& rest) {
  return path.empty() ? rest : path + ": " + rest;
}
}  // namespace

Result<bdev::Bdev*> build_bdev(const BdevConfig& config, bdev::BdevRegistry& registry,
                               Target& target, const std::string& path, std::string* error_message,
                               bdev::NvmeControllerPool* nvme_pool) {
  const auto failed = [&](const std::string& message, const Error& error) -> Result<bdev::Bdev*> {
    if (error_message != nullptr) *error_message = message;
    return Unexpected(error);
  };
  Result<std::unique_ptr<bdev::Bdev>> made = Unexpected(Errc::invalid_argument);
  switch (config.kind) {
    case BdevKind::null:
      made = bdev::create_null_bdev(config.null_opts);
      break;
    case BdevKind::malloc:
      made = bdev::create_malloc_bdev(config.malloc_opts);
      break;
    case BdevKind::uring:
      made = bdev::create_uring_bdev(config.uring_opts);
      break;
    case BdevKind::nvme:
      if (nvme_pool == nullptr) {
        return failed(
            at_path(path, "nvme bdevs need the PCIe driver, which this program does not start"),
            Error(Errc::not_supported, "nvme"));
      }
      made = bdev::create_nvme_bdev(config.nvme_opts, *nvme_pool);
      break;
    case BdevKind::delay:
    case BdevKind::error: {
      const std::string& base_name = *config.base_bdev();
      const std::string field = path.empty() ? "base_bdev: " : path + ".base_bdev: ";
      bdev::Bdev* base = registry.find(base_name);
      if (base == nullptr) {
        return failed(field + "no bdev named " + in_quotes(base_name),
                      Error(Errc::not_found, "base_bdev"));
      }
      if (const bdev::Bdev* user = base->claimed_by(); user != nullptr) {
        return failed(
            field + in_quotes(base_name) + " is already the base of " + in_quotes(user->name()),
            Error(Errc::busy, "base_bdev"));
      }
      for (const SubsystemInfo& subsystem : target.subsystems_info()) {
        for (const NamespaceInfo& ns : subsystem.namespaces) {
          if (ns.bdev != base_name) continue;
          return failed(field + in_quotes(base_name) + " is used by namespace " +
                            std::to_string(ns.nsid) + " of " + subsystem.nqn +
                            " (a base cannot be a namespace)",
                        Error(Errc::busy, "base_bdev"));
        }
      }
      made = config.kind == BdevKind::delay ? bdev::create_delay_bdev(config.delay_opts, *base)
                                            : bdev::create_error_bdev(config.error_opts, *base);
      break;
    }
  }
  if (!made) {
    return failed(at_path(path, "cannot create bdev " + in_quotes(config.name) + ": " +
                                    describe(made.error())),
                  made.error());
  }
  if (config.kind == BdevKind::nvme) {
    // Hot removal of the device takes its namespaces away from hosts (with an event), and
    // those of the delay or error bdevs stacked on it (a base backs no namespace itself).
    // This runs on the device's recovery thread. The chain is read before any namespace goes:
    // once the top bdev's namespace is gone its owner may destroy it (ThreadSanitizer caught
    // the walk reading claimed_by() of an error bdev the main thread was deleting).
    (*made)->set_removed_callback(
        [](void* ctx, bdev::Bdev& gone) {
          std::vector<const bdev::Bdev*> chain;  // setup-path: a hot removal, not I/O
          for (const bdev::Bdev* bdev = &gone; bdev != nullptr; bdev = bdev->claimed_by()) {
            chain.push_back(bdev);
          }
          for (const bdev::Bdev* bdev : chain) {
            static_cast<Target*>(ctx)->remove_namespaces_of(*bdev);
          }
        },
        &target);
  }
  bdev::Bdev* raw = made->get();
  if (auto added = registry.add(std::move(*made)); !added) {
    return failed((path.empty() ? "name: " : path + ".name: ") + in_quotes(config.name) +
                      " is already registered",
                  added.error());
  }
  return raw;
}

Result<uint32_t> build_namespace(const NamespaceConfig& config, std::string_view nqn,
                                 const bdev::BdevRegistry& registry, Target& target,
                                 const std::string& path, std::string* error_message) {
  NamespaceOpts opts;
  opts.nsid = config.nsid;
  opts.bdev = registry.find(config.bdev);
  if (opts.bdev == nullptr) {
    if (error_message != nullptr) {
      *error_message = (path.empty() ? "bdev: " : path + ".bdev: ") +
                       std::string("no bdev named ") + in_quotes(config.bdev);
    }
    return Unexpected(Errc::not_found, "bdev");
  }
  if (const bdev::Bdev* user = opts.bdev->claimed_by(); user != nullptr) {
    if (error_message != nullptr) {
      *error_message = (path.empty() ? "bdev: " : path + ".bdev: ") + in_quotes(config.bdev) +
                       " is the base of " + user->backend_name() + " bdev " +
                       in_quotes(user->name()) + "; name that one instead";
    }
    return Unexpected(Errc::busy, "bdev is the base of another bdev");
  }
  opts.uuid_set = config.uuid_set;
  opts.uuid = config.uuid;
  opts.nguid = config.nguid;
  opts.eui64 = config.eui64;
  // The configuration's identifiers win; else what the bdev reports; else ones derived from
  // the configuration, the same at every start (namespace_ids has the rule).
  opts.derive_ids_subnqn = std::string(nqn);
  auto added = target.add_namespace(nqn, opts);
  if (!added && error_message != nullptr) {
    *error_message = at_path(path, describe(added.error()));
  }
  return added;
}

Result<void> build_target(const TargetConfig& config, bdev::BdevRegistry& registry, Target& target,
                          std::string* error_message, bdev::NvmeControllerPool* nvme_pool) {
  const auto failed = [&](const std::string& message, const Error& error) -> Result<void> {
    if (error_message != nullptr) *error_message = message;
    return Unexpected(error);
  };
  for (size_t i = 0; i < config.bdevs.size(); ++i) {
    const std::string path = "bdevs[" + std::to_string(i) + "]";
    auto built = build_bdev(config.bdevs[i], registry, target, path, error_message, nvme_pool);
    if (!built) return Unexpected(built.error());
  }
  for (size_t i = 0; i < config.subsystems.size(); ++i) {
    const SubsystemConfig& subsystem = config.subsystems[i];
    const std::string path = "subsystems[" + std::to_string(i) + "]";
    if (auto added = target.add_subsystem(subsystem.opts); !added) {
      return failed(path + ".nqn: cannot add " + in_quotes(subsystem.opts.nqn) + ": " +
                        describe(added.error()),
                    added.error());
    }
    for (size_t j = 0; j < subsystem.namespaces.size(); ++j) {
      const std::string ns_path = path + ".namespaces[" + std::to_string(j) + "]";
      auto added = build_namespace(subsystem.namespaces[j], subsystem.opts.nqn, registry, target,
                                   ns_path, error_message);
      if (!added) return Unexpected(added.error());
    }
    for (size_t j = 0; j < subsystem.listeners.size(); ++j) {
      if (auto added = target.add_listener(subsystem.opts.nqn, subsystem.listeners[j]); !added) {
        return failed(path + ".listeners[" + std::to_string(j) + "]: " + describe(added.error()),
                      added.error());
      }
    }
  }
  return {};
}

}  // namespace nvmf::target
