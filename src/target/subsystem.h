// Subsystems and what hangs off them: namespaces (an NSID over a Bdev, with UUID / NGUID /
// EUI64), the hosts allowed to connect, the listeners advertised in the discovery log, and the
// controllers hosts created. The discovery subsystem is a Subsystem too (is_discovery()).
//
// Threads: a Subsystem is shared by every reactor. All of its mutable state is guarded by the
// owning Target's mutex (control path: configuration, Connect, admin commands); methods marked
// "locked" must be called with that mutex held. The I/O path never reads it: each poll group
// keeps its own copy of the namespace table, refreshed when ns_generation() changes.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bdev/bdev.h"
#include "spec/discovery.h"

namespace nvmf::target {

class Controller;

struct NamespaceOpts {
  uint32_t nsid = 0;           // 1..max_namespaces; 0 = the lowest free NSID
  bdev::Bdev* bdev = nullptr;  // required; must outlive the namespace's use (see Target)
  // Identifiers left unset take defaults: namespace_ids() below says which.
  bool uuid_set = false;  // false: the bdev's UUID, or a derived one
  bdev::Uuid uuid{};
  std::array<uint8_t, 16> nguid{};  // all zero: the bdev's, or derived, or none
  std::array<uint8_t, 8> eui64{};   // all zero: the bdev's, or none
  // Not empty: the NQN of the subsystem the namespace is added to (the `nqn` given to
  // Target::add_namespace), and a UUID neither set here nor configured for the bdev
  // (Bdev::uuid_generated) is derived from (this NQN, NSID, bdev name), so the same
  // configuration gives the same identity at every start. build_namespace (the config file and
  // the namespace_add RPC) sets it. Empty: the bdev's UUID, even a random one.
  std::string derive_ids_subnqn{};
};

// What a namespace reports in Identify Namespace and its descriptor list; all zero: none.
struct NamespaceIds {
  bdev::Uuid uuid{};
  std::array<uint8_t, 16> nguid{};
  std::array<uint8_t, 8> eui64{};
};

// The one rule for a namespace's identifiers, whichever way the namespace is added (the
// Namespace constructor applies it). `opts.nsid` is the NSID the namespace gets, not 0.
//   UUID:   opts.uuid when uuid_set; else the bdev's when it was configured (not generated);
//           else, with derive_ids_subnqn, derived_namespace_uuid(); else the bdev's random one.
//   NGUID:  opts.nguid when not all zero; else the bdev's (an nvme device's) when it has one;
//           else, when the UUID was derived, the same 16 bytes (as SPDK copies its UUID);
//           else none.
//   EUI-64: opts.eui64 when not all zero; else the bdev's; else none.
// Why derive: Linux hosts compare a namespace's identifiers when they reconnect and drop a
// namespace whose identifiers changed ("identifiers changed"), so a restarted target must
// report the same ones.
NamespaceIds namespace_ids(const NamespaceOpts& opts) noexcept;

// RFC 4122 version 5 UUID under a fixed project name space ID (kDerivedUuidNameSpace in
// subsystem.cpp) of the name "<subnqn>/<nsid>/<bdev name>", the NSID in decimal without
// leading zeroes: e.g. "nqn.2026-01.io.example:disk1/1/Malloc0". A change to any of the three
// gives another UUID.
bdev::Uuid derived_namespace_uuid(std::string_view subnqn, uint32_t nsid,
                                  std::string_view bdev_name) noexcept;

class Namespace {
 public:
  // Identifiers by namespace_ids(opts).
  explicit Namespace(const NamespaceOpts& opts) noexcept;
  uint32_t nsid() const noexcept { return nsid_; }
  bdev::Bdev& bdev() const noexcept { return *bdev_; }
  const bdev::Uuid& uuid() const noexcept { return ids_.uuid; }
  const std::array<uint8_t, 16>& nguid() const noexcept { return ids_.nguid; }
  const std::array<uint8_t, 8>& eui64() const noexcept { return ids_.eui64; }

 private:
  uint32_t nsid_;
  bdev::Bdev* bdev_;
  NamespaceIds ids_;
};

// One transport address a subsystem is reachable at, as the discovery log reports it.
struct ListenerAddress {
  uint8_t trtype = spec::trtype::rdma;
  uint8_t adrfam = spec::adrfam::ipv4;
  std::string traddr{};          // e.g. "192.168.1.10"; at most 255 bytes
  std::string trsvcid = "4420";  // the NVMe-oF port; at most 31 bytes
  friend bool operator==(const ListenerAddress&, const ListenerAddress&) = default;
};

struct SubsystemOpts {
  std::string nqn{};  // required, a valid NQN, unique in the target
  // Identify SN (20 bytes) and MN (40 bytes): printable ASCII; longer text is an error.
  std::string serial_number = "00000000000000000000";
  std::string model_number = "nvmf-rdma Controller";
  bool allow_any_host = false;
  std::vector<std::string> hosts{};  // host NQNs allowed when allow_any_host is false
  uint32_t max_namespaces = 0;       // Identify NN; 0 = TargetOpts::max_namespaces_default
};

class Subsystem {
 public:
  Subsystem(uint32_t id, const SubsystemOpts& opts, bool discovery, uint32_t max_namespaces);
  ~Subsystem();

  // Fixed at creation (any thread).
  uint32_t id() const noexcept { return id_; }  // index in the target, for poll-group tables
  const std::string& nqn() const noexcept { return nqn_; }
  const std::string& serial_number() const noexcept { return serial_number_; }
  const std::string& model_number() const noexcept { return model_number_; }
  bool is_discovery() const noexcept { return discovery_; }
  uint32_t max_namespaces() const noexcept { return max_namespaces_; }
  // Bumped (release) after every namespace change; poll groups compare it per I/O (acquire).
  uint64_t ns_generation() const noexcept { return ns_generation_.load(std::memory_order_acquire); }

  // ---- locked: the target mutex is held ----
  bool removed() const noexcept { return removed_; }
  bool host_allowed(std::string_view hostnqn) const noexcept;
  bool allow_any_host() const noexcept { return allow_any_host_; }
  const std::vector<std::string>& hosts() const noexcept { return hosts_; }
  // nullptr for an NSID outside 1..max_namespaces or an inactive one.
  Namespace* find_namespace(uint32_t nsid) const noexcept;
  // Active namespaces in NSID order are namespace(1..max) that are not null.
  const std::vector<std::unique_ptr<Namespace>>& namespaces() const noexcept { return namespaces_; }
  const std::vector<ListenerAddress>& listeners() const noexcept { return listeners_; }
  const std::vector<Controller*>& controllers() const noexcept { return controllers_; }
  Controller* find_controller(uint16_t cntlid) const noexcept;
  // The next free CNTLID in 1..FFEFh (round robin, like SPDK), 0 when all are taken.
  uint16_t allocate_cntlid() noexcept;

 private:
  friend class Target;

  const uint32_t id_;
  const std::string nqn_;
  const std::string serial_number_;
  const std::string model_number_;
  const bool discovery_;
  const uint32_t max_namespaces_;
  std::atomic<uint64_t> ns_generation_{1};

  bool removed_ = false;
  bool allow_any_host_;
  std::vector<std::string> hosts_;
  std::vector<std::unique_ptr<Namespace>> namespaces_;  // index nsid - 1
  // Namespaces removed at run time stay alive until the target goes: a poll group may still
  // hold a channel to their bdev until it notices the new generation.
  std::vector<std::unique_ptr<Namespace>> retired_namespaces_;
  std::vector<ListenerAddress> listeners_;
  std::vector<Controller*> controllers_;  // owned by the target
  uint16_t next_cntlid_ = 1;
};

}  // namespace nvmf::target
