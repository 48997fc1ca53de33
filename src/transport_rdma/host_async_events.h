// Device async events on the host side (verbs::Device::poll_async_event): a QP that failed
// outside a work request, a CQ that overran, a port that went down, a device that died.
//
// A device's events are the device's, not a queue's, and each is read once, so one router
// per host reads them for every queue (HostDomains owns it): whichever queue's poll() gets
// there first (every kCmPollInterval polls, a try_lock that never waits) reads every watched
// device and marks the queues an event fails. Each queue notices its mark at its next poll()
// on its own thread (one relaxed load) and fails as a QP error does, so the recovery that
// follows a failed completion follows an async event too: an I/O queue reconnects and resends,
// a lost admin queue is what the controller already handles.
//
//   QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR  -> that queue fails (its WRs still flush)
//   CQ_ERR                               -> the queue of that CQ fails; no completion will come,
//                                           so it settles without waiting for its WRs
//   DEVICE_FATAL                         -> every queue on the device fails (likewise), one line
//   PORT_ERR / PORT_ACTIVE               -> one line (the QPs fail by themselves)
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/intrusive_list.h"
#include "verbs/verbs.h"

namespace nvmf::transport_rdma {

// One queue's registration with the router. Owned by the queue; the router writes `pending_`
// from any thread, everything else is written under the router's mutex.
class HostAsyncWatch {
 public:
  HostAsyncWatch() = default;
  HostAsyncWatch(const HostAsyncWatch&) = delete;
  HostAsyncWatch& operator=(const HostAsyncWatch&) = delete;

  // Owner thread, every poll: whether an event failed the queue since the last take().
  bool pending() const noexcept { return pending_.load(std::memory_order_relaxed) != 0; }

  struct Failure {
    verbs::AsyncEventType type = verbs::AsyncEventType::qp_fatal;  // the worst one
    bool completions_lost = false;  // CQ_ERR or DEVICE_FATAL: do not wait for the WRs
    const char* reason = "";        // "QP_FATAL async event on device mlx5_0" (the watch's)
  };
  // Owner thread: takes the events marked so far. Valid only when pending().
  Failure take() noexcept;

 private:
  friend class HostAsyncEvents;
  verbs::Device* device_ = nullptr;
  uint32_t qp_num_ = 0;
  const verbs::CompletionQueue* cq_ = nullptr;
  std::atomic<uint32_t> pending_{0};  // a bit per verbs::AsyncEventType
  char reason_[96] = {};              // take()'s text: error_reason() points at it
  ListNode link_;
};

class HostAsyncEvents {
 public:
  HostAsyncEvents() = default;
  HostAsyncEvents(const HostAsyncEvents&) = delete;
  HostAsyncEvents& operator=(const HostAsyncEvents&) = delete;
  ~HostAsyncEvents();

  // Setup path, any thread: `watch` stands for QP `qp_num` and CQ `cq` of `device` until
  // remove(). A watch already added is moved to the new QP (a reconnect).
  void add(HostAsyncWatch& watch, verbs::Device& device, uint32_t qp_num,
           const verbs::CompletionQueue& cq) noexcept;
  // Any thread; idempotent. Marks not yet taken are dropped (they were the old QP's).
  void remove(HostAsyncWatch& watch) noexcept;
  // Any thread, never waits: reads the events of every device watched so far, unless another
  // thread is at it, and marks the queues they fail. Returns the events read.
  int poll() noexcept;
  // Events read, by type (any thread).
  uint64_t count(verbs::AsyncEventType type) const noexcept {
    return counts_[static_cast<size_t>(type)].load(std::memory_order_relaxed);
  }

 private:
  void dispatch(verbs::Device& device, const verbs::AsyncEvent& event) noexcept;  // mutex held

  std::mutex mutex_;
  IntrusiveList<HostAsyncWatch, &HostAsyncWatch::link_> watches_;  // under mutex_
  std::vector<verbs::Device*> devices_;  // under mutex_; devices outlive the host's objects
  std::array<std::atomic<uint64_t>, verbs::kAsyncEventTypeCount> counts_{};
};

}  // namespace nvmf::transport_rdma
