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
  bool uuid_set = false;       // false: the bdev's UUID
  bdev::Uuid uuid{};
  std::array<uint8_t, 16> nguid{};  // all zero: not reported
  std::array<uint8_t, 8> eui64{};   // all zero: not reported
};

class Namespace {
 public:
  explicit Namespace(const NamespaceOpts& opts) noexcept;
  uint32_t nsid() const noexcept { return nsid_; }
  bdev::Bdev& bdev() const noexcept { return *bdev_; }
  const bdev::Uuid& uuid() const noexcept { return uuid_; }
  const std::array<uint8_t, 16>& nguid() const noexcept { return nguid_; }
  const std::array<uint8_t, 8>& eui64() const noexcept { return eui64_; }

 private:
  uint32_t nsid_;
  bdev::Bdev* bdev_;
  bdev::Uuid uuid_;
  std::array<uint8_t, 16> nguid_;
  std::array<uint8_t, 8> eui64_;
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
