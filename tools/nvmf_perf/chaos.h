// nvmf_perf --sim --chaos: faults injected into the in-process target's fabric and bdevs while
// the workers run, so that --verify and the run's account (report.h, IoAccount) show what the
// host library does with them: every I/O completed or failed with a status, nothing
// acknowledged lost. One fault every --chaos-every-ms, the kind and its parameters drawn from
// --chaos by --seed in rounds: each round injects every fault of the list once, in an order
// drawn anew (the sequence is reproducible; where each fault lands depends on timing):
//
//   qp-error     the next work request anywhere on the fabric fails (general error): its QP
//                goes to error and flushes, the host reconnects that queue
//   drop         the next work request fails with a remote status, which takes both QPs of
//                its connection to error, as a connection the network dropped (the sim's
//                drop_connection() needs the CM id, which only the libraries hold)
//   delay        the next few CQEs of a host or target I/O queue's send CQ are held back for
//                some polls and time, then released (a CQ is a FIFO: what is behind waits too)
//   refuse       the target's listener refuses connections, and a host I/O queue's QP goes
//                fatal so that a reconnect happens; accepted again once a connect was
//                refused and 2.5 reconnect delays passed (two refused attempts or more), or
//                after 10 delays regardless
//   bdev-error   a namespace's error bdev fails the next few reads and writes (every Nth) with
//                an NVMe status (Internal Error or Data Transfer Error, DNR or not)
//   async-event  QP fatal on a host or target I/O queue's QP (to error, flushed)
//
// The admin queue is spared where the fault can choose its QP (the oldest QP of each side):
// losing it ends the controller, not one of its I/O queues.
//
// Threads: the main thread only (from the control poll); the sim's fault calls are
// thread-safe, the error bdev's inject() too.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "options.h"
#include "sim_target.h"
#include "unit_picker.h"

namespace nvmf::perf {

class ChaosInjector {
 public:
  // `settings.chaos_faults` not empty; `sim` made with error_bdevs when bdev-error is named.
  ChaosInjector(const Settings& settings, SimTarget& sim);

  // Injects the next fault when it is due (the first one interval after the first tick, none
  // after -t seconds from it); lifts a refusal whose time is up.
  void tick(uint64_t now_ns) noexcept;
  // The I/O phase is over: no more faults, and a refusal is lifted so that the drain's and the
  // disconnect's connections go through. Idempotent.
  void finish() noexcept;

  // Faults injected, by name, in the order of --chaos.
  std::vector<std::pair<std::string, uint64_t>> injected() const;
  // What the fabric and the bdevs saw of them (the sim's and the error bdevs' own counters):
  // proof that the faults landed.
  std::vector<std::pair<std::string, uint64_t>> effects() const;

 private:
  enum class Fault : uint8_t { qp_error, drop, delay, refuse, bdev_error, async_event };
  static bool fault_parse(const std::string& name, Fault* fault) noexcept;
  void inject(Fault fault, uint64_t now_ns) noexcept;
  void delay_completions() noexcept;
  void fail_bdev_io() noexcept;
  void raise_qp_fatal(verbs::sim::SimProvider& side) noexcept;
  void start_refusing(uint64_t now_ns) noexcept;
  void stop_refusing_if_due(uint64_t now_ns) noexcept;
  void stop_refusing() noexcept;
  void shuffle_round() noexcept;
  // A random I/O queue's QP number of the host's or the target's HCA; 0 when there is none.
  uint32_t pick_io_qp(verbs::sim::SimProvider& side) noexcept;
  verbs::sim::SimProvider& pick_side() noexcept;

  SimTarget& sim_;
  std::vector<Fault> faults_;           // from --chaos, in its order
  std::vector<uint64_t> injected_;      // parallel to faults_
  std::vector<std::string> names_;      // likewise
  std::vector<size_t> round_;           // indexes into faults_: this round's order
  size_t round_next_ = 0;               // the next of round_ to inject
  Xorshift64 rng_;
  uint64_t every_ns_;
  uint64_t run_ns_;                     // -t
  uint64_t refuse_ns_;                  // how long a refusal lasts at least
  uint64_t refuse_max_ns_;              // and at most
  uint64_t next_ns_ = 0;                // 0: not started (the first tick starts)
  uint64_t end_ns_ = 0;
  bool refusing_ = false;
  uint64_t refuse_from_ns_ = 0;
  uint64_t rejects_before_ = 0;         // the host HCA's rejects when the refusal began
  bool finished_ = false;
};

}  // namespace nvmf::perf
