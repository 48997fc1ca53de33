// Target: the root of the core's object model. Subsystems (the discovery subsystem always
// present) -> namespaces, hosts, listeners, controllers; one PollGroup per reactor that has
// queue pairs; the discovery log generation counter. Transports create a Qpair per connection
// and feed it Requests (request.h).
//
// Threads and locking: configuration methods may be called from any thread; they and every
// control-path operation (Connect, admin commands that read subsystem state, queue attach and
// detach, controller lookup, the discovery log) take one mutex. The I/O path takes none.
// create_qpair / destroy_qpair / execute run on the queue pair's reactor thread.
//
// Lifetime: bdevs given to namespaces must outlive the target. Destroy the target after every
// queue pair is destroyed, either on the thread that owns the reactors (tests) or after
// release_reactor() ran on each reactor and the reactors stopped (the daemon).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "reactor/reactor.h"
#include "spec/fabrics.h"
#include "target/controller.h"
#include "target/opts.h"
#include "target/poll_group.h"
#include "target/request.h"
#include "target/subsystem.h"

namespace nvmf::target {

// Connect Invalid Parameters (SCT 1h, SC 82h) report the bad field in CQE DW0 through
// spec::connect_invalid_parameter_dw0() (IPO in bits 15:0, IATTR in bit 16, as Linux and SPDK).

// What remove_subsystem does with controllers hosts have connected.
enum class ConnectedControllers : uint8_t {
  refuse,      // answer busy while any exists (the subsystem stays as it was)
  disconnect,  // remove anyway; every queue pair of its controllers is asked to disconnect
};

// What destroy_qpair does with requests still inside a bdev.
enum class StuckCommands : uint8_t {
  wait,     // answer busy until they complete, for at most TargetOpts::teardown_timeout_ms
            // after the first call; then abandon them
  abandon,  // stop waiting now (the target is shutting down)
};

// Counters of the core, summed over reactors (Target::stats).
struct TargetStats {
  uint64_t bdev_busy_waits = 0;   // commands that waited for room in their bdev (never failed)
  uint64_t abandoned_qpairs = 0;  // queue pairs torn down with commands still inside a bdev
  uint64_t late_completions = 0;  // completions of those commands, dropped
};

// A consistent copy of one subsystem's state, taken under the target mutex (subsystems_info).
struct QpairInfo {
  uint16_t qid = 0;
  uint32_t depth = 0;  // SQ entries (Connect SQSIZE + 1)
};
struct ControllerInfo {
  uint16_t cntlid = 0;
  std::string hostnqn{};
  std::array<uint8_t, 16> hostid{};
  std::vector<QpairInfo> qpairs{};  // connected queues in QID order, the admin queue first
};
struct NamespaceInfo {
  uint32_t nsid = 0;
  std::string bdev{};  // the bdev's name
  bdev::Uuid uuid{};
  std::array<uint8_t, 16> nguid{};
  std::array<uint8_t, 8> eui64{};
};
struct SubsystemInfo {
  std::string nqn{};
  bool discovery = false;
  std::string serial_number{};
  std::string model_number{};
  bool allow_any_host = false;
  std::vector<std::string> hosts{};
  uint32_t max_namespaces = 0;
  std::vector<NamespaceInfo> namespaces{};  // active ones, in NSID order
  std::vector<ListenerAddress> listeners{};
  std::vector<ControllerInfo> controllers{};
};

class Target {
 public:
  // Errors: invalid_argument (detail names the option).
  static Result<std::unique_ptr<Target>> create(const TargetOpts& opts) noexcept;
  ~Target();
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;

  const TargetOpts& opts() const noexcept { return opts_; }

  // ---- configuration: any thread ----
  // Errors: invalid_argument (bad NQN, SN/MN too long or not printable, max_namespaces out of
  // 1..1024, a host NQN invalid), already_exists (NQN taken, incl. the discovery NQN).
  Result<void> add_subsystem(const SubsystemOpts& opts);
  // Errors: not_found, permission_denied (the discovery subsystem), busy (controllers exist
  // and `connected` is refuse).
  //
  // With ConnectedControllers::disconnect the subsystem goes at once even with hosts
  // connected: its NQN is unknown from then on (Connects are refused as for any unknown
  // subsystem, discovery logs drop it, add_subsystem may reuse the NQN), its namespaces are
  // retired (I/O to them fails), and every queue pair of its controllers is asked to
  // disconnect (TransportOps::qpair_disconnect on the queue's reactor), so hosts see the
  // connection drop and start reconnecting. The controllers go as their transport destroys
  // the queue pairs: removed_controller_count() tells when they are gone.
  Result<void> remove_subsystem(std::string_view nqn,
                                ConnectedControllers connected = ConnectedControllers::refuse);
  // Controllers of removed subsystems named `nqn` that still wait for their queue pairs to be
  // destroyed (after remove_subsystem(..., disconnect)). Any thread.
  size_t removed_controller_count(std::string_view nqn) const;
  Result<void> add_host(std::string_view nqn, std::string_view hostnqn);
  Result<void> remove_host(std::string_view nqn, std::string_view hostnqn);
  Result<void> set_allow_any_host(std::string_view nqn, bool allow);
  // Adds a namespace; connected controllers of the subsystem get a Namespace Attribute
  // Changed event. Returns the NSID. Errors: not_found (subsystem), invalid_argument (no bdev,
  // NSID out of range), already_exists (NSID taken), out_of_range (no free NSID), busy (the
  // bdev is the base of a delay or error bdev: Bdev::claimed_by).
  Result<uint32_t> add_namespace(std::string_view nqn, const NamespaceOpts& opts);
  // Errors: not_found. Connected controllers get the event; I/O to the NSID then fails with
  // Invalid Namespace or Format.
  Result<void> remove_namespace(std::string_view nqn, uint32_t nsid);
  // Removes every namespace backed by `bdev` (hot removal of its device), with the same event.
  // Any thread. Returns how many were removed.
  size_t remove_namespaces_of(const bdev::Bdev& bdev);
  // Listeners feed the discovery log. Errors: not_found, invalid_argument (address too long or
  // empty), already_exists.
  Result<void> add_listener(std::string_view nqn, const ListenerAddress& address);
  Result<void> remove_listener(std::string_view nqn, const ListenerAddress& address);
  // Discovery log GENCTR: bumped by every change that alters some host's discovery log.
  uint64_t discovery_generation() const noexcept {
    return discovery_generation_.load(std::memory_order_acquire);
  }
  // Controllers currently alive in a subsystem (tests, statistics).
  size_t controller_count(std::string_view nqn) const;
  // Every live subsystem, the discovery subsystem first, then in creation order: options,
  // namespaces, listeners and the controllers with their connected queues. Any thread (takes
  // the mutex once, so the copy is consistent).
  std::vector<SubsystemInfo> subsystems_info() const;

  // ---- transport: the queue pair's reactor thread ----
  // Makes the core's state for one connection accepted on `reactor`, whose submission queue
  // has `queue_depth` entries (the transport's negotiated depth). Setup path: may create the
  // reactor's poll group. Errors: invalid_argument (queue_depth 0, ops incomplete), no_memory.
  Result<Qpair*> create_qpair(reactor::Reactor& reactor, const TransportOps& ops,
                              uint32_t queue_depth);
  // Detaches the queue pair from its controller and completes every request the core still
  // holds without the bdev (held AERs, commands waiting for a busy bdev, aborts in flight)
  // with "Command Aborted due to SQ Deletion" through request_complete. Errors: busy while
  // requests are inside a bdev: they complete (request_complete) at later polls of the
  // reactor; call again then; or while Aborts this (admin) queue sent are being looked up on
  // another reactor (they come back within a poll). A bdev that does not give its requests
  // back does not hold the teardown up for ever: teardown_timeout_ms after the first call (at
  // once with StuckCommands::abandon) destroy_qpair succeeds anyway, logs how many it left,
  // and lends those requests to the core (request.h: TransportOps::request_released gives
  // each back when its bdev lets go; the core's Qpair lives until the last one). On success the
  // Qpair is the transport's no more. Must not be called from inside request_complete.
  Result<void> destroy_qpair(Qpair& qpair, StuckCommands stuck = StuckCommands::wait);
  void execute(Request& req) noexcept;
  // Reactor thread, at shutdown: closes this reactor's bdev channels and removes the core's
  // poller (its poll group). Closing a channel completes what it holds as aborted, so the
  // requests of abandoned queue pairs are released (TransportOps::request_released) here at
  // the latest: release reactors before the transport goes. Errors: busy while queue pairs of
  // the reactor exist; not_found when the core never used the reactor. Afterwards the target
  // may be destroyed on any thread once the reactors have stopped.
  Result<void> release_reactor(reactor::Reactor& reactor);
  // Any thread: the core's counters.
  TargetStats stats() const;

 private:
  friend class Controller;
  friend class PollGroup;
  friend void refuse_aborted(Request& req) noexcept;

  explicit Target(const TargetOpts& opts);
  Subsystem* find_subsystem_locked(std::string_view nqn) const noexcept;
  void remove_namespace_locked(Subsystem& subsystem, uint32_t nsid);
  PollGroup& group_for(reactor::Reactor& reactor);
  // destroy_qpair's first call: detach, answer what the core holds, start the teardown clock.
  void detach_qpair(Qpair& qpair);
  void bump_discovery_generation_locked() noexcept;

  // connect.cpp
  void execute_fabrics(Request& req) noexcept;
  void connect(Request& req) noexcept;
  spec::Status connect_admin(Request& req, Subsystem& subsystem, const spec::ConnectData& data);
  spec::Status connect_io(Request& req, Subsystem& subsystem, const spec::ConnectData& data);
  void disconnect_command(Request& req) noexcept;

  // discovery.cpp: writes [offset, offset + length) of `hostnqn`'s discovery log into the
  // request's buffer. Locked.
  uint64_t discovery_log_size_locked(std::string_view hostnqn) const noexcept;
  void discovery_log_read_locked(std::string_view hostnqn, Request& req, uint64_t offset,
                                 uint64_t length) const noexcept;

  const TargetOpts opts_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Subsystem>> subsystems_;  // index = id; removed ones stay
  std::vector<std::unique_ptr<Controller>> controllers_;
  std::vector<std::unique_ptr<PollGroup>> groups_;
  std::vector<ListenerAddress> ports_;  // PORTID = index + 1 of an address's first use
  std::atomic<uint64_t> discovery_generation_{1};
};

// ---- helpers shared by the core's translation units ----
namespace detail {
// Statuses the core answers with. DNR is set where retrying the same command cannot help
// (as the Linux target does).
constexpr spec::Status status_error(uint8_t sct, uint8_t sc) noexcept {
  return spec::make_status(sct, sc, true);
}
constexpr spec::Status generic_error(uint8_t sc) noexcept {
  return spec::make_status(spec::sct::generic, sc, true);
}
// Bounded copies between a request's iovecs and flat memory, starting `offset` bytes into the
// request buffer. Never go past the iovecs; return the bytes copied.
size_t copy_to_request(Request& req, uint64_t offset, const void* data, size_t size) noexcept;
size_t copy_from_request(const Request& req, uint64_t offset, void* data, size_t size) noexcept;
void zero_request(Request& req) noexcept;
// Fills CID/SQID/SQHD, hands the request back to the transport.
void finish(Request& req) noexcept;
void complete_status(Request& req, const spec::Status& status) noexcept;
// Completes an Abort that was in flight (counted against the Abort Command Limit).
void complete_abort(Request& abort, const spec::Status& status) noexcept;
}  // namespace detail

}  // namespace nvmf::target
