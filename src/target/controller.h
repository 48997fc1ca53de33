// A controller of the dynamic model: made by an admin Connect, joined by I/O Connects, ended
// when its admin queue goes (or by a keep-alive timeout). It holds the Fabrics properties
// (CAP, VS, CC, CSTS), the features, the held Asynchronous Event Requests, the Changed
// Namespace List and the keep-alive timer, and serves every admin command.
//
// Threads: the controller belongs to the reactor of its admin queue ("admin reactor"); admin
// commands, properties and the keep-alive timer run there. Other reactors only read
// io_ready() (an atomic) and, under the target mutex, the queue table (I/O Connect, teardown).
// Fields marked "locked" are guarded by the target mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reactor/reactor.h"
#include "spec/fabrics.h"
#include "target/request.h"

namespace nvmf::target {

class Subsystem;

// Lifecycle of a controller; every change is checked against the allowed (old -> new) pairs.
enum class ControllerState : uint8_t {
  disabled = 0,  // after Connect or a reset (CC.EN = 0): only Fabrics commands are served
  ready,         // CC.EN = 1 accepted, CSTS.RDY = 1: everything is served
  shutdown,      // CC.SHN written: CSTS.SHST = complete, I/O queues torn down
  failed,        // CSTS.CFS: an enable with bad CC fields, or the keep-alive timer expired
  destroying,    // the admin queue is gone; waits for the last I/O queue to detach
};
const char* controller_state_name(ControllerState state) noexcept;

// Asynchronous events the target raises (bits of pending/masked event sets).
namespace event_bit {
inline constexpr uint32_t namespace_attribute_changed = 1u << 0;
inline constexpr uint32_t discovery_log_changed = 1u << 1;
}  // namespace event_bit

// AERL + 1: Asynchronous Event Requests a controller holds at once. 4 = SPDK's
// NVMF_MAX_ASYNC_EVENTS (the Linux host sends one).
inline constexpr unsigned kAsyncEventRequestsMax = 4;

// ACL + 1: Aborts a controller has in flight at once (looking on another queue, or waiting for
// a command's transfer); one more is answered Abort Command Limit Exceeded. 4 = what SPDK and
// Linux advertise.
inline constexpr unsigned kAbortsInFlightMax = 4;

class Controller {
 public:
  // Made by the target on the admin reactor, under the target mutex (setup path).
  Controller(Target& target, Subsystem& subsystem, uint16_t cntlid, Qpair& admin_qpair,
             const spec::ConnectData& data, uint32_t kato_ms);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Any thread.
  uint16_t cntlid() const noexcept { return cntlid_; }
  Subsystem& subsystem() const noexcept { return subsystem_; }
  std::string_view hostnqn() const noexcept { return hostnqn_; }
  const uint8_t* hostid() const noexcept { return hostid_; }
  // CC.EN = 1 and CSTS.RDY = 1 and neither shutdown nor failure: I/O may run.
  bool io_ready() const noexcept { return io_ready_.load(std::memory_order_acquire); }
  uint32_t cc() const noexcept { return cc_.load(std::memory_order_acquire); }
  uint32_t csts() const noexcept { return csts_.load(std::memory_order_acquire); }

  // ---- admin reactor ----
  ControllerState state() const noexcept { return state_; }
  uint64_t cap() const noexcept { return cap_; }
  uint32_t vs() const noexcept { return vs_; }
  uint32_t keep_alive_timeout_ms() const noexcept { return kato_ms_; }
  void property_get(Request& req) noexcept;
  void property_set(Request& req) noexcept;
  void execute_admin(Request& req) noexcept;
  // Delivers pending asynchronous events to held requests (attention processing).
  void process_events() noexcept;

  // ---- locked ----
  // The I/O queues a host may connect: QID 1..io_queues_granted().
  uint32_t io_queues_granted() const noexcept { return io_queues_granted_; }
  Qpair* qpair(uint16_t qid) const noexcept {
    return qid < qpairs_.size() ? qpairs_[qid] : nullptr;
  }
  Qpair* admin_qpair() const noexcept { return admin_qpair_; }
  size_t attached_qpairs() const noexcept { return attached_; }
  // Adds `nsid` to the Changed Namespace List and raises a namespace-attribute event.
  void namespace_changed_locked(uint32_t nsid) noexcept;
  // Marks `event` (event_bit) pending and wakes the admin reactor to deliver it.
  void raise_event_locked(uint32_t event) noexcept;

 private:
  friend class Target;

  void set_state(ControllerState next) noexcept;
  void cc_write(uint32_t value) noexcept;
  // Asks every queue (or only the I/O queues) to disconnect; locked.
  void request_disconnect_locked(bool include_admin) noexcept;
  uint32_t enabled_events_locked() const noexcept;
  void arm_keep_alive() noexcept;
  static void keep_alive_expired(void* ctx) noexcept;
  void abort_held_events(const spec::Status& status) noexcept;

  // admin.cpp
  void identify(Request& req) noexcept;
  void identify_controller(Request& req) noexcept;
  void identify_namespace(Request& req) noexcept;
  void identify_active_namespaces(Request& req) noexcept;
  void identify_namespace_descriptors(Request& req) noexcept;
  void get_log_page(Request& req) noexcept;
  void get_features(Request& req) noexcept;
  void set_features(Request& req) noexcept;
  void async_event_request(Request& req) noexcept;
  void keep_alive(Request& req) noexcept;
  void abort(Request& req) noexcept;
  void abort_on_admin_queue(Request& req, uint16_t cid) noexcept;

  Target& target_;
  Subsystem& subsystem_;
  const uint16_t cntlid_;
  std::string hostnqn_;
  uint8_t hostid_[16];
  reactor::Reactor& admin_reactor_;
  PollGroup& admin_group_;
  ThreadOwner owner_;

  // ---- admin reactor ----
  ControllerState state_ = ControllerState::disabled;
  uint64_t cap_;
  uint32_t vs_;
  std::atomic<uint32_t> cc_{0};
  std::atomic<uint32_t> csts_{0};
  std::atomic<bool> io_ready_{false};
  uint32_t kato_ms_;                          // 0: keep-alive disabled
  bool volatile_write_cache_enabled_ = true;  // Set Features 06h (WCE)
  Request* held_events_[kAsyncEventRequestsMax] = {};
  unsigned held_event_count_ = 0;
  reactor::Timer keep_alive_timer_;

  // ---- locked ----
  uint32_t io_queues_granted_;
  uint32_t num_queues_dw0_;      // Number of Queues as granted (NSQA 15:0, NCQA 31:16)
  uint32_t async_event_config_;  // Set Features 0Bh
  std::vector<Qpair*> qpairs_;   // index = QID; sized max_qpairs_per_ctrlr
  Qpair* admin_qpair_;
  size_t attached_ = 0;
  uint32_t pending_events_ = 0;  // raised, not yet delivered
  uint32_t masked_events_ = 0;   // delivered; masked until the host reads the log page
  uint32_t changed_namespaces_[1024] = {};
  uint32_t changed_namespace_count_ = 0;  // > 1024: the list overflowed (FFFFFFFFh)
};

}  // namespace nvmf::target
