// PollGroup: the target core's per-reactor object (SPDK's poll group). It owns one bdev
// IoChannel per namespace used on its reactor (each in a BdevLane with the commands waiting
// for it), registers one reactor Poller that polls them, retries commands the bdev answered
// busy, and runs the I/O commands of its queue pairs. It is also the mailbox through which
// other threads reach queue pairs of this reactor: they set a flag under the target mutex and
// raise_attention(); the group acts on it on its own thread.
//
// Threads: everything but raise_attention() runs on the owning reactor. The I/O path
// (execute_io, the bdev callbacks, retries) takes no lock and allocates nothing; refreshing the
// namespace table (a namespace was added or removed) is control path: it takes the target
// mutex and may create channels.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "bdev/bdev.h"
#include "common/intrusive_list.h"
#include "reactor/reactor.h"
#include "target/request.h"

namespace nvmf::target {

class Namespace;
class Subsystem;

// One namespace's bdev channel on one reactor and the commands that found it full (busy),
// oldest first, from every queue pair of the reactor. Waiting is per lane so that a slow or
// stalled bdev holds up only its own namespace's commands: a command for another namespace on
// the same queue pair goes straight to its own channel. Owner thread only.
struct BdevLane {
  std::unique_ptr<bdev::IoChannel> channel;
  IntrusiveList<Request, &Request::link> waiting;
};

// Counters of one poll group (any thread reads them; the owner writes with relaxed stores).
struct PollGroupCounters {
  // Commands that found their bdev channel full and waited for room (never failed for it).
  std::atomic<uint64_t> bdev_busy_waits{0};
  // Queue pairs destroy_qpair stopped waiting for, commands still inside a bdev.
  std::atomic<uint64_t> abandoned_qpairs{0};
  // Completions of those commands, dropped when their bdev let go of them.
  std::atomic<uint64_t> late_completions{0};

  // One writer: a relaxed load and store, no locked instruction on the data path.
  static void bump(std::atomic<uint64_t>& counter) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
};

class PollGroup {
 public:
  // Setup path on the reactor's thread: registers the poller.
  PollGroup(Target& target, reactor::Reactor& reactor);
  // After shutdown() any thread; otherwise the owner thread (shutdown() runs then).
  ~PollGroup();
  PollGroup(const PollGroup&) = delete;
  PollGroup& operator=(const PollGroup&) = delete;

  reactor::Reactor& reactor() const noexcept { return reactor_; }
  // Any thread: makes the group look at its queue pairs' mailboxes on its next poll, and sends
  // a message so a sleeping reactor wakes.
  void raise_attention() noexcept;

  // ---- owner thread ----
  // Closes the channels and removes the poller; every queue pair must be gone. The object
  // stays (a message may still name it) but ignores attention from then on.
  void shutdown() noexcept;
  bool released() const noexcept { return released_.load(std::memory_order_acquire); }
  void add_qpair(Qpair& qpair) noexcept;
  void remove_qpair(Qpair& qpair) noexcept;
  // Makes room for the subsystem's namespace table (setup path: an I/O Connect).
  void prepare_subsystem(Subsystem& subsystem);
  // Runs an I/O command of a connected I/O queue pair.
  void execute_io(Request& req) noexcept;
  // Completes the queue pair's requests waiting for a bdev (never submitted) with `status`.
  void fail_pending(Qpair& qpair, const spec::Status& status) noexcept;
  // Locked (the target mutex): `abort` (an Abort of this group's admin queue, rsp.cdw0 set)
  // is answered at the group's next attention.
  void answer_abort_locked(Request& abort) noexcept;
  // Takes a destroying queue pair off the group: its requests still inside a bdev are dropped
  // as they come back (drop_late_completion), and the last one frees it.
  void abandon(Qpair& qpair) noexcept;
  // Live channels, for tests and statistics.
  size_t channel_count() const noexcept { return lanes_.size(); }
  const PollGroupCounters& counters() const noexcept { return counters_; }

 private:
  friend class Target;
  friend class Controller;

  // This reactor's view of one namespace.
  struct NsSlot {
    Namespace* ns = nullptr;         // identity: a re-added namespace is a new object
    std::unique_ptr<BdevLane> lane;  // never moved while commands wait on it
    uint32_t block_size = 0;
    uint32_t block_shift = 0;  // log2(block_size)
    uint64_t block_count = 0;
    bdev::IoTypeMask io_types = 0;
  };
  struct SubsystemSlot {
    Subsystem* subsystem = nullptr;
    uint64_t generation = 0;  // Subsystem::ns_generation() this table reflects
    std::vector<NsSlot> ns;   // index nsid - 1
  };

  static int poll_fn(void* ctx, unsigned budget) noexcept;
  static void attention_message(void* ctx) noexcept;
  int poll(unsigned budget) noexcept;
  void process_attention() noexcept;
  NsSlot* lookup_namespace(Subsystem& subsystem, uint32_t nsid) noexcept;
  void refresh_namespaces(SubsystemSlot& slot) noexcept;
  void rebuild_channel_list() noexcept;
  void destroy_drained_lanes() noexcept;
  // Attention step: Aborts that reached our queue pairs' inboxes.
  void process_aborts() noexcept;
  // Looks for `cid` of `qpair` waiting on a lane (then completes it Abort Requested), else asks
  // the transport. Owner thread, no lock held.
  TransportAbort abort_on_qpair(Qpair& qpair, uint16_t cid) noexcept;

  // io.cpp: the I/O request state machine (RequestState need_bdev .. complete).
  void advance(Request& req) noexcept;
  bool submit(Request& req) noexcept;
  bool prepare_dsm_range(Request& req) noexcept;
  static void bdev_done(bdev::BdevIo& io, void* ctx) noexcept;
  void drop_late_completion(Request& req) noexcept;
  void wait_on_lane(Request& req) noexcept;
  void leave_lane(Request& req) noexcept;
  int retry_pending(unsigned budget) noexcept;

  Target& target_;
  reactor::Reactor& reactor_;
  ThreadOwner owner_;
  reactor::Poller poller_;
  std::atomic<bool> attention_{false};
  std::atomic<bool> released_{false};
  IntrusiveList<Qpair, &Qpair::group_link_> qpairs_;
  // Torn down with requests still inside a bdev; freed by the last one's completion.
  IntrusiveList<Qpair, &Qpair::group_link_> abandoned_;
  std::vector<SubsystemSlot> subsystems_;  // index Subsystem::id()
  std::vector<BdevLane*> lanes_;           // every live lane, polled each iteration
  // Lanes of removed namespaces with I/O still inside or waiting; destroyed once drained.
  std::vector<std::unique_ptr<BdevLane>> retired_lanes_;
  std::vector<Namespace*> snapshot_;  // scratch for refresh_namespaces()
  uint32_t pending_requests_ = 0;     // requests waiting on lanes of this group
  uint32_t in_bdev_ = 0;              // requests of this group inside a bdev
  PollGroupCounters counters_;
  bool polling_channels_ = false;    // poll() or retry_pending() is walking lanes_
  bool channel_list_stale_ = false;  // lanes_ must be rebuilt after that walk

  // ---- locked: guarded by the target mutex ----
  // Aborts that went to another reactor's queue pair and came back with their answer.
  IntrusiveList<Request, &Request::link> abort_returns_;
};

}  // namespace nvmf::target
