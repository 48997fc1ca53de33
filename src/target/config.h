// The target's JSON configuration as plain structs, its parser, and build_target() that makes
// the bdevs and subsystems it describes. Setup path only (any thread; not reactor code).
//
// Shape (every key optional unless marked; unknown keys are errors, so typos cannot pass):
//   {
//     "target":     { "max_namespaces_default": 32, "keep_alive_granularity_ms": 1000,
//                     "discovery_keep_alive_timeout_ms": 120000 },
//     "transports": [ { "type": "rdma" (required), "max_queue_depth": 128,
//                       "max_admin_queue_depth": 128, "max_qpairs_per_ctrlr": 128,
//                       "in_capsule_data_size": 4096, "max_io_size": 1048576,
//                       "max_sgl_descriptors": 16, "send_with_invalidate": "auto" | "off",
//                       "acceptor_poll_rate": 10000 } ],
//     "bdevs": [ { "type": "null" | "malloc" | "uring" | "nvme" (required), "name" (required),
//                  "block_size": 512, "num_blocks": N, "uuid": "8-4-4-4-12", "queue_depth": 128,
//                  null:  "completion_delay_ns", "zero_read_buffers"
//                  uring: "path" (required), "create_file", "size_bytes", "direct_io":
//                         "prefer" | "required" | "off", "fallocate"
//                  nvme:  "pci" (required, "0000:00:04.0"), "nsid": 1; no block_size,
//                         num_blocks or uuid: those come from the device
//                  delay: "base_bdev" (required: a bdev earlier in the list), "read_latency_us",
//                         "write_latency_us", "flush_latency_us", "jitter_us"; no
//                         block_size, num_blocks or queue_depth: those are the base's
//                  error: "base_bdev" (required, as delay), "inject": { "io_types": ["all"],
//                         "action": "fail" | "drop", "count": 0, "every_nth": 1,
//                         "sct": 0, "sc": 6, "dnr": false } } ],
//     A bdev that is the base of a delay or error bdev cannot also be a namespace, nor the
//     base of a second one.
//     "subsystems": [ { "nqn" (required), "serial_number", "model_number", "allow_any_host",
//                       "hosts": [NQN...], "max_namespaces",
//                       "namespaces": [ { "nsid", "bdev" (required), "uuid", "nguid" (32 hex),
//                                         "eui64" (16 hex) } ],
//                       "listeners": [ { "trtype": "rdma", "adrfam": "ipv4" | "ipv6",
//                                        "traddr" (required), "trsvcid": "4420" } ] } ]
//   }
// Errors are one line naming the field path and the problem, e.g.
//   subsystems[1].namespaces[0].bdev: no bdev named "Malloc9"
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bdev/delay_bdev.h"
#include "bdev/error_bdev.h"
#include "bdev/malloc_bdev.h"
#include "bdev/null_bdev.h"
#include "bdev/nvme_bdev.h"
#include "bdev/registry.h"
#include "bdev/uring_bdev.h"
#include "common/result.h"
#include "target/opts.h"
#include "target/subsystem.h"

namespace nvmf::target {

class Target;

enum class SendWithInvalidate : uint8_t { automatic, off };
const char* send_with_invalidate_name(SendWithInvalidate mode) noexcept;

// Options only the transport reads (the core's share lives in TargetOpts).
struct TransportConfig {
  std::string type = "rdma";
  // auto: answer with SEND_WITH_INVALIDATE when the host asked for it and the device can;
  // off: never (needed to reproduce the 2017 memory-window race).
  SendWithInvalidate send_with_invalidate = SendWithInvalidate::automatic;
  // Microseconds between the acceptor's reads of the RDMA CM channel and device async events
  // (SPDK's acceptor_poll_rate, its default); 0 = every reactor iteration.
  uint32_t acceptor_poll_rate_us = 10000;
  // SPDK's no_srq and max_srq_depth: one shared receive queue per poll group and device (when
  // the device has them) of this many receives, or receives per connection.
  bool no_srq = false;
  uint32_t max_srq_depth = 4096;
};

enum class BdevKind : uint8_t { null, malloc, uring, nvme, delay, error };

struct BdevConfig {
  BdevKind kind = BdevKind::null;
  std::string name{};
  bdev::NullBdevOpts null_opts{};      // kind == null
  bdev::MallocBdevOpts malloc_opts{};  // kind == malloc
  bdev::UringBdevOpts uring_opts{};    // kind == uring
  bdev::NvmeBdevOpts nvme_opts{};      // kind == nvme
  bdev::DelayBdevOpts delay_opts{};    // kind == delay
  bdev::ErrorBdevOpts error_opts{};    // kind == error

  // The bdev this one is built on (delay, error), or nullptr.
  const std::string* base_bdev() const noexcept;
};

struct NamespaceConfig {
  uint32_t nsid = 0;   // 0: the lowest free
  std::string bdev{};  // a name from "bdevs"
  bool uuid_set = false;
  bdev::Uuid uuid{};
  std::array<uint8_t, 16> nguid{};
  std::array<uint8_t, 8> eui64{};
};

struct SubsystemConfig {
  SubsystemOpts opts{};
  std::vector<NamespaceConfig> namespaces{};
  std::vector<ListenerAddress> listeners{};
};

struct TargetConfig {
  TargetOpts opts{};
  bool transport_configured = false;  // a "transports" entry was given
  TransportConfig transport{};
  std::vector<BdevConfig> bdevs{};
  std::vector<SubsystemConfig> subsystems{};
};

// Parses `json`. On failure returns invalid_argument and puts the one-line message (field path:
// problem) in *error_message. Never throws.
Result<TargetConfig> parse_target_config(std::string_view json,
                                         std::string* error_message) noexcept;

// One piece of the configuration, as a JSON object of its own with the keys it has in the file
// (nvmf_tgt's JSON-RPC methods take the same keys). `path` names the object in messages:
// "params" gives "params.num_blocks: 0 is outside [1, ...]". Failures as parse_target_config's.
const char* bdev_kind_name(BdevKind kind) noexcept;  // "null", "malloc", "uring", "nvme", ...
Result<BdevConfig> parse_bdev_config(std::string_view json, const std::string& path,
                                     std::string* error_message) noexcept;
// A subsystem with its namespaces and listeners. Namespaces are not checked against bdevs
// here (there is no "bdevs" section to look in); build_namespace does. max_namespaces
// defaults to opts.max_namespaces_default.
Result<SubsystemConfig> parse_subsystem_config(std::string_view json, const std::string& path,
                                               const TargetOpts& opts,
                                               std::string* error_message) noexcept;
// A namespace of a subsystem that holds max_namespaces (the NSID must fit).
Result<NamespaceConfig> parse_namespace_config(std::string_view json, const std::string& path,
                                               uint32_t max_namespaces,
                                               std::string* error_message) noexcept;
// An error bdev's rule: the keys of its "inject" object (nvmf_tgt's bdev_error_inject takes
// them too). An absent io_types means every type; [] means none (no injection).
Result<bdev::ErrorInjection> parse_error_injection(std::string_view json, const std::string& path,
                                                   std::string* error_message) noexcept;
Result<ListenerAddress> parse_listener_config(std::string_view json, const std::string& path,
                                              std::string* error_message) noexcept;

// The inverse of parse_target_config: the JSON text (two-space indent) it reads back into the
// same configuration. Every option is written, defaults included, so the file says what the
// target ran with; a bdev UUID of all zeroes (generated at creation) and namespace identifiers
// left unset are omitted.
std::string target_config_to_json(const TargetConfig& config);
// One "bdevs" entry, in the file's keys.
std::string bdev_config_to_json(const BdevConfig& config);
// An error bdev's rule as its "inject" object.
std::string error_injection_to_json(const bdev::ErrorInjection& injection);

// Creates every bdev (registered in `registry`) and subsystem with its hosts, namespaces and
// listeners in `target` (made with config.opts). On failure the message names the config
// field; what was created before stays (the caller tears the target down). nvme bdevs open
// their controllers through `nvme_pool`; without one they are refused with a message.
Result<void> build_target(const TargetConfig& config, bdev::BdevRegistry& registry, Target& target,
                          std::string* error_message,
                          bdev::NvmeControllerPool* nvme_pool = nullptr);

// build_target's two steps for one object. build_bdev creates the bdev, hooks an nvme bdev's
// hot removal to target.remove_namespaces_of and registers it; a delay or error bdev's base
// must be registered, not claimed by another bdev yet, and back no namespace of `target`.
// build_namespace adds a namespace over a registered bdev to subsystem `nqn`; identifiers the
// config leaves out are the bdev's or derived from (nqn, NSID, bdev name), the same at every
// start (NamespaceOpts::derive_ids_subnqn, namespace_ids); the base of a delay or error bdev
// is refused. Messages
// start with `path` (when not empty) as build_target's do:
//   bdevs[0]: cannot create bdev "Nvme0n1": ...      bdevs[0].name: "M0" is already registered
//   subsystems[0].namespaces[1].bdev: no bdev named "M9"
//   bdevs[2].base_bdev: "M0" is used by namespace 1 of nqn.x:y (a base cannot be a namespace)
// Errors: the failing call's (the registry's, the backend's, Target::add_namespace's).
Result<bdev::Bdev*> build_bdev(const BdevConfig& config, bdev::BdevRegistry& registry,
                               Target& target, const std::string& path, std::string* error_message,
                               bdev::NvmeControllerPool* nvme_pool = nullptr);
Result<uint32_t> build_namespace(const NamespaceConfig& config, std::string_view nqn,
                                 const bdev::BdevRegistry& registry, Target& target,
                                 const std::string& path, std::string* error_message);

}  // namespace nvmf::target
