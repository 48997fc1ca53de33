// The target side of the NVMe/RDMA binding: listens through RDMA CM, accepts connections
// after checking their private data (connect_params.h), and runs one request state machine per
// command between the host's RDMA queue pair and the target core (target/request.h).
//
// Threads (SPDK's layout): one acceptor reactor polls the CM channel; every connection is
// handed to a poll group (one per reactor; I/O queue QID q to group q - 1, admin queues
// round-robin: RdmaTargetTransport::pick_group) which creates the QP on its
// shared CQ (and SRQ), owns the connection's requests and buffers, and runs the data path.
// CM events for a connection arrive at the acceptor and are forwarded to the owning group by
// message. The data path takes no lock, allocates nothing, and rings one doorbell per QP per
// poll.
//
// Device async events (verbs::Device::poll_async_event): the acceptor reads every device a
// listener or a connection uses, from a poller per device on its reactor (the device's event
// fd wakes it in interrupt mode; otherwise it reads every acceptor_poll_period_us), counts each
// type and passes the ones that close something to the poll groups: QP fatal / request /
// access error closes that queue pair as a disconnect does; a CQ or SRQ error closes every
// queue pair on it (no completion will come: their WRs are forgotten) and the group makes a
// new CQ and SRQ for later connections; device fatal closes everything on the device, its
// listeners, and refuses new connections on it. Communication established (a capsule came in
// before the CM's ready-to-use) goes to the group too, which tells the CM on the connection's
// id (CmId::notify_established, as rdma_notify), so a lost RTU cannot time the connection
// out. Port events are logged and counted.
//
// Memory: each poll group registers, per device, one region of receive buffers (64-byte
// capsule + in-capsule data), one region of data buffers (io_unit_size each; a command takes
// up to kRequestIovMax of them) and, per connection, one region of 16-byte responses.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "env/memory.h"
#include "reactor/reactor.h"
#include "target/target.h"
#include "transport_rdma/connect_params.h"
#include "verbs/verbs.h"

namespace nvmf::transport_rdma {

enum class SendWithInvalidate : uint8_t {
  automatic,  // answer with SEND_WITH_INV when the host's SGL asks and the device can
  off,        // never: the host always invalidates locally (reproduces the 2017 race)
};
const char* send_with_invalidate_name(SendWithInvalidate mode) noexcept;
bool send_with_invalidate_parse(const char* text, SendWithInvalidate* mode) noexcept;

struct RdmaTargetOpts {
  // Queue sizes, QID limit and RDMA READ depth (SPDK defaults; see connect_params.h).
  ConnectLimits limits;
  // Bytes of in-capsule data a command may carry after its SQE (SPDK: 4096; up to 16 KiB).
  uint32_t in_capsule_data_size = 4096;
  // Largest data transfer of one command (MDTS): 1 MiB, as target::TargetOpts (the Linux
  // target's MDTS 8).
  uint32_t max_io_size = 1048576;
  // Data buffers are carved in units of this size; a command uses max_io_size / io_unit_size
  // of them at most, which must not exceed target::kRequestIovMax (16): 1 MiB / 16 = 64 KiB
  // (SPDK raises its io_unit_size the same way when max_io_size needs it).
  uint32_t io_unit_size = 65536;
  // Data buffers per poll group and device: 256 x 64 KiB = 16 MiB, enough for 16 commands of
  // 1 MiB, or 256 of up to 64 KiB, in flight at once; commands beyond wait for a buffer (never
  // fail).
  uint32_t data_buffers_per_group = 256;
  // One shared receive queue per poll group (SPDK's default), or receives per connection.
  bool use_srq = true;
  uint32_t srq_depth = 4096;  // SPDK's max_srq_depth
  // Completion queue entries per poll group and device, capped by the device's max_cqe. The
  // SRQ's receives and each queue pair's send queue (2 x depth + 33 WRs) reserve their worst
  // case; a connection that would not fit is refused with a CM reject (no resources) and
  // counted (Stats::cq_full_refusals). 32768: the SRQ plus about 100 queues of depth 128.
  uint32_t cq_depth = 32768;
  SendWithInvalidate send_with_invalidate = SendWithInvalidate::automatic;
  // Where data buffers and receive buffers (in-capsule data) come from; must outlive the
  // transport. nullptr: posix memory, no DPDK. nvmf_tgt passes DPDK memory when a namespace
  // is an nvme bdev, so the SSD DMAs straight into the buffers RDMA reads into and writes
  // from (zero copy; docs/architecture.md).
  env::MemoryBackend* buffer_memory = nullptr;
  // How often the acceptor reads the RDMA CM channel and each device's async events, in
  // microseconds (SPDK's acceptor_poll_rate, with its default): with rdma-core each read is a
  // system call, which a polling reactor would otherwise make on every iteration for events
  // that come a few times per connection. An interrupt-mode reactor woken by either fd reads
  // it at once. 0: on every iteration (fixtures whose fake clock stands still).
  uint32_t acceptor_poll_period_us = 10000;
};

class RdmaPollGroup;
struct Connection;
struct WatchedDevice;

class RdmaTargetTransport {
 public:
  // `reactors`: where connections may live; reactors[0] also polls the CM channel. Call on
  // reactors[0]'s thread before it runs, or from a message on it. Errors: invalid_argument
  // (opts), and whatever the provider says about its CM channel (no device, no rdma_cm).
  static Result<std::unique_ptr<RdmaTargetTransport>> create(
      verbs::Provider& provider, target::Target& target,
      const std::vector<reactor::Reactor*>& reactors, const RdmaTargetOpts& opts);
  ~RdmaTargetTransport();
  RdmaTargetTransport(const RdmaTargetTransport&) = delete;
  RdmaTargetTransport& operator=(const RdmaTargetTransport&) = delete;

  // Acceptor thread. Errors from the CM (address in use, no device on the address).
  Result<void> listen(const std::string& address, uint16_t port);
  // Acceptor thread: closes the listener on exactly this address and port (as given to
  // listen()), so new connection requests there are refused by the CM. Connections accepted
  // through it stay. Errors: not_found (not listening there).
  Result<void> stop_listening(const std::string& address, uint16_t port);
  // Acceptor thread: whether listen(address, port) succeeded and no stop_listening followed.
  bool listening(const std::string& address, uint16_t port) const noexcept;

  // Acceptor thread: disconnects every connection; drained() turns true once all are gone.
  void begin_shutdown() noexcept;
  bool drained() const noexcept;

  const RdmaTargetOpts& opts() const noexcept { return opts_; }
  target::Target& target() const noexcept { return target_; }
  size_t connection_count() const noexcept;
  // Acceptor thread: the live I/O queues placed on poll group `index` (reactor `index`; the
  // placement rule is pick_group's), 0 for an index past the last group.
  size_t io_queue_count(size_t index) const noexcept;

  struct Stats {
    uint64_t connects_accepted = 0;
    uint64_t connects_rejected = 0;
    uint64_t disconnects = 0;
    uint64_t cq_full_refusals = 0;  // connections refused: their poll group's CQ was full
    // Commands that found no free data buffer and waited for one (they never fail for it).
    uint64_t buffer_waits = 0;
    // Commands that found their send queue full (RDMA READs or the response) and waited.
    uint64_t send_queue_waits = 0;
    // Device async events read, indexed by verbs::AsyncEventType (async_event_count()).
    std::array<uint64_t, verbs::kAsyncEventTypeCount> async_events{};
    // COMM_EST events passed on to the CM of a live queue pair (CmId::notify_established).
    uint64_t established_notifications = 0;
    uint64_t async_event_count(verbs::AsyncEventType type) const noexcept {
      return async_events[static_cast<size_t>(type)];
    }
  };
  // Acceptor thread (the async event counts are its own).
  Stats stats() const noexcept;

 private:
  friend class RdmaPollGroup;
  friend struct Connection;
  friend struct WatchedDevice;
  RdmaTargetTransport(verbs::Provider& provider, target::Target& target,
                      const std::vector<reactor::Reactor*>& reactors, const RdmaTargetOpts& opts);

  uint64_t acceptor_poll_period_ns() const noexcept {
    return uint64_t{opts_.acceptor_poll_period_us} * 1000;
  }
  static int acceptor_poll(void* ctx, unsigned budget) noexcept;
  int poll_cm_events(unsigned budget) noexcept;
  // Every iteration of the acceptor's reactor, cheap when idle: frees the connections the
  // groups let go of and retries async-event wake-ups a full message ring refused.
  static int housekeeping_poll(void* ctx, unsigned budget) noexcept;
  int free_released_connections() noexcept;
  // Acceptor thread: the group (or a refused connect) let go of the connection.
  void mark_released(Connection& connection) noexcept;
  void on_connect_request(const verbs::CmEvent& event) noexcept;
  // The poll group a new queue pair goes to, and how many live I/O queues a group serves.
  RdmaPollGroup* pick_group(uint16_t qid) noexcept;
  size_t io_queues_on(const RdmaPollGroup& group) const noexcept;
  void forward_event(Connection& connection, verbs::CmEventType type) noexcept;
  // Message from a poll group: its side of the connection is gone; free the CM id.
  static void release_connection(void* ctx) noexcept;

  // Async events (acceptor thread). watch_device: setup path, idempotent.
  Result<void> watch_device(verbs::Device& device) noexcept;
  bool device_failed(const verbs::Device* device) const noexcept;
  static int async_event_poll(void* ctx, unsigned budget) noexcept;
  int poll_async_events(WatchedDevice& watched, unsigned budget) noexcept;
  void handle_async_event(WatchedDevice& watched, const verbs::AsyncEvent& event) noexcept;
  void fail_device(WatchedDevice& watched) noexcept;
  // Hands an event to every poll group (the one on this reactor at once).
  void broadcast_async_event(verbs::Device& device, const verbs::AsyncEvent& event) noexcept;
  void wake_groups_for_async_events() noexcept;

  verbs::Provider& provider_;
  target::Target& target_;
  const RdmaTargetOpts opts_;
  std::vector<reactor::Reactor*> reactors_;
  std::vector<std::unique_ptr<RdmaPollGroup>> groups_;
  size_t next_admin_group_ = 0;  // admin queues go round-robin (pick_group)
  std::unique_ptr<verbs::CmChannel> channel_;
  struct Listener {
    std::string address;
    uint16_t port = 0;
    std::unique_ptr<verbs::CmId> id;
  };
  std::vector<Listener> listeners_;                       // acceptor thread only
  std::vector<std::unique_ptr<Connection>> connections_;  // acceptor thread only
  std::vector<std::unique_ptr<WatchedDevice>> watched_;   // acceptor thread only
  std::vector<bool> async_wakeup_due_;  // per group: its events wait, the message did not go
  bool any_async_wakeup_due_ = false;
  reactor::Poller acceptor_poller_;     // timed: the CM channel (acceptor_poll_period_us)
  reactor::Poller housekeeping_poller_;  // every iteration
  size_t released_not_freed_ = 0;        // connections marked released, still in connections_
  bool shutting_down_ = false;
  // Set by begin_shutdown (read by the poll groups): a queue pair's teardown stops waiting for
  // commands stuck inside a bdev (target::StuckCommands::abandon).
  std::atomic<bool> abandon_stuck_commands_{false};
  Stats stats_;
};

}  // namespace nvmf::transport_rdma
