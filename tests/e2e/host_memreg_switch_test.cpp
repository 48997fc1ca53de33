// Switching a live I/O qpair's memory-registration key policy (IoQpair::set_memreg_policy,
// Controller::set_memreg_policy): under verified I/O at queue depth 32 the qpair drains,
// switches and resumes through every ordered pair of policies, many times, with no I/O failed,
// no reconnect, every callback exactly once and every read checked. The pre-2017 ConnectX
// profile without remote invalidation makes a wrong drain visible: a window deallocated while
// its LOCAL_INV is still on the send queue, or a LOCAL_INV completion booked to the next
// policy, fails a work request (QP error, reconnect) or hands out a window still in use (a
// failed bind, a verify failure). Then the edge cases host.h defines: the policy in use, a
// switch called off, a policy the device cannot do, a QP error during the drain, a switch
// asked for while reconnecting, disconnect during a switch, a new policy that cannot be built,
// and the controller-wide request.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "host_fixture.h"
#include "log_capture.h"

namespace nvmf::e2e {
namespace {

using host::MemregPolicy;

constexpr uint32_t kBlock = 512;
constexpr uint32_t kBlocksPerIo = 9;  // 4.5 KiB: above the in-capsule size, so keyed both ways
constexpr size_t kIoBytes = size_t{kBlocksPerIo} * kBlock;
constexpr uint32_t kQueueDepth = 32;
constexpr uint32_t kUnits = 96;  // I/O units of the namespace the load uses (3 x the depth)
constexpr uint16_t kQueueEntries = 64;
constexpr uint32_t kIosBetweenSwitches = 40;
constexpr uint32_t kScheduleRepeats = 3;

constexpr MemregPolicy kSafePolicies[] = {MemregPolicy::global, MemregPolicy::sagi,
                                          MemregPolicy::max, MemregPolicy::deferred};
constexpr MemregPolicy kAllPolicies[] = {MemregPolicy::global, MemregPolicy::unsafe,
                                         MemregPolicy::sagi, MemregPolicy::max,
                                         MemregPolicy::deferred};

// The seed of unit u's pattern at write generation g (generation 0: never written).
uint32_t unit_seed(uint32_t unit, uint32_t generation) { return unit * 65536u + generation; }

// kQueueDepth verified I/Os kept in flight on one qpair: each task owns a buffer; a unit has at
// most one I/O at a time, its first I/O is a write, later ones alternate; each read is checked
// against the unit's last completed write. Submits answered busy (a switch draining) are
// retried at the next step.
class VerifiedLoad {
 public:
  VerifiedLoad(host::Host& host, host::Namespace& ns, host::IoQpair& qpair)
      : ns_(ns),
        qpair_(qpair),
        buffers_(host, kIoBytes * kQueueDepth),
        tasks_(kQueueDepth),
        generations_(kUnits, 0),
        unit_busy_(kUnits, false) {
    for (uint32_t i = 0; i < kQueueDepth; ++i) {
      tasks_[i].load = this;
      tasks_[i].buffer = buffers_.data() + i * kIoBytes;
    }
  }
  bool ok() const { return static_cast<bool>(buffers_); }

  // Starts every idle task (unless stopping).
  void step() {
    if (stopping_) return;
    for (Task& task : tasks_) {
      if (!task.in_flight) start(task);
    }
  }
  void stop() { stopping_ = true; }
  uint32_t in_flight() const { return in_flight_; }

  uint64_t submitted = 0;
  uint64_t completed = 0;
  uint64_t errors = 0;  // completions with an error status
  uint64_t verify_failures = 0;
  uint64_t extra_callbacks = 0;  // a callback for a task not in flight
  uint64_t refused = 0;          // submits failing with anything but busy
  uint64_t busy = 0;

 private:
  struct Task {
    VerifiedLoad* load = nullptr;
    uint8_t* buffer = nullptr;
    uint32_t unit = 0;
    uint32_t generation = 0;
    bool is_write = false;
    bool in_flight = false;
  };

  void start(Task& task) {
    uint32_t unit = next_unit_;
    for (uint32_t tries = 0; unit_busy_[unit] && tries < kUnits; ++tries)
      unit = (unit + 1) % kUnits;
    if (unit_busy_[unit]) return;
    task.unit = unit;
    task.is_write = generations_[unit] == 0 || (writes_next_ = !writes_next_);
    if (task.is_write) {
      task.generation = generations_[unit] + 1;
      fill_pattern(task.buffer, kIoBytes, unit_seed(unit, task.generation));
    } else {
      std::memset(task.buffer, 0xFF, kIoBytes);  // a read that moves nothing must not pass
    }
    const uint64_t lba = uint64_t{unit} * kBlocksPerIo;
    auto result = task.is_write ? ns_.write(qpair_, task.buffer, lba, kBlocksPerIo, &done, &task)
                                : ns_.read(qpair_, task.buffer, lba, kBlocksPerIo, &done, &task);
    if (!result) {
      if (result.error().code == Errc::busy) {
        ++busy;
      } else {
        ++refused;
      }
      return;
    }
    next_unit_ = (unit + 1) % kUnits;
    unit_busy_[unit] = true;
    task.in_flight = true;
    ++in_flight_;
    ++submitted;
  }

  static void done(void* ctx, const spec::Status& status) {
    auto& task = *static_cast<Task*>(ctx);
    VerifiedLoad& load = *task.load;
    if (!task.in_flight) {
      ++load.extra_callbacks;
      return;
    }
    task.in_flight = false;
    --load.in_flight_;
    ++load.completed;
    load.unit_busy_[task.unit] = false;
    if (!status.is_success()) {
      ++load.errors;
      ADD_FAILURE() << (task.is_write ? "write" : "read") << " of unit " << task.unit << ": "
                    << describe(status);
      return;
    }
    if (task.is_write) {
      load.generations_[task.unit] = task.generation;
    } else if (!has_pattern(task.buffer, kIoBytes,
                            unit_seed(task.unit, load.generations_[task.unit]))) {
      ++load.verify_failures;
    }
  }

  host::Namespace& ns_;
  host::IoQpair& qpair_;
  DmaBuffer buffers_;
  std::vector<Task> tasks_;
  std::vector<uint32_t> generations_;  // last completed write per unit
  std::vector<bool> unit_busy_;
  uint32_t next_unit_ = 0;
  uint32_t in_flight_ = 0;
  bool writes_next_ = false;
  bool stopping_ = false;
};

// Every ordered pair (a, b) of `policies`, a != b, as a walk a, b, a', b', ... without
// repeating a policy twice in a row: each pair appears as a step of the walk.
std::vector<MemregPolicy> every_pair_walk(const std::vector<MemregPolicy>& policies) {
  std::vector<MemregPolicy> walk;
  auto visit = [&](MemregPolicy policy) {
    if (walk.empty() || walk.back() != policy) walk.push_back(policy);
  };
  for (MemregPolicy from : policies) {
    for (MemregPolicy to : policies) {
      if (from == to) continue;
      visit(from);
      visit(to);
    }
  }
  return walk;
}

class MemregSwitchFixture : public HostFixture {
 protected:
  // Rounds (qpairs, then the target, then `step_ms` of fake time) until done().
  template <typename Done>
  bool run_rounds(const std::vector<host::IoQpair*>& qpairs, Done done, uint64_t step_ms = 0,
                  int max_rounds = kMaxRounds) {
    for (int i = 0; i < max_rounds && !done(); ++i) {
      round(qpairs);
      if (step_ms != 0) harness_.clock().advance_ms(step_ms);
    }
    return done();
  }
  // Rounds of a load: start idle tasks, poll.
  template <typename Done>
  bool run_load(VerifiedLoad& load, host::IoQpair& qpair, Done done, uint64_t step_ms = 0) {
    return run_rounds(
        {&qpair},
        [&] {
          load.step();
          return done();
        },
        step_ms);
  }
  static host::ControllerOpts switch_opts(MemregPolicy first) {
    host::ControllerOpts opts = controller_opts(3);
    opts.memreg = first;
    opts.reconnect_delay_ms = 50;
    return opts;
  }
  static host::IoQpairOpts queue_opts(uint16_t entries = kQueueEntries) {
    host::IoQpairOpts opts;
    opts.queue_size = entries;
    return opts;
  }

  // The set-up of the tests: a controller whose queues start with policy `first`
  // (controller_), one I/O qpair of `queue_entries` entries (qpair_), namespace 1 (ns_) and
  // `data_bytes` of DMA memory (data_; none for 0). Call it under ASSERT_NO_FATAL_FAILURE.
  void open_queue(MemregPolicy first, size_t data_bytes, uint16_t queue_entries = kQueueEntries) {
    controller_ = connect(kNqn512, switch_opts(first));
    ASSERT_NE(controller_, nullptr);
    qpair_ = alloc_qpair(*controller_, queue_opts(queue_entries));
    ASSERT_NE(qpair_, nullptr);
    ns_ = controller_->ns(1);
    ASSERT_NE(ns_, nullptr);
    if (data_bytes == 0) return;
    data_ = std::make_unique<DmaBuffer>(*host_, data_bytes);
    ASSERT_TRUE(*data_);
  }

  // What open_queue() made goes before the Host (HostFixture::TearDown), newest first.
  void TearDown() override {
    data_.reset();
    qpair_.reset();
    controller_.reset();
    HostFixture::TearDown();
  }

  std::unique_ptr<host::Controller> controller_;
  std::unique_ptr<host::IoQpair> qpair_;
  host::Namespace* ns_ = nullptr;
  std::unique_ptr<DmaBuffer> data_;
};

// ---------------------------------------------------------------------------------------
// Every pair, many times, under verified load

struct SwitchCase {
  verbs::sim::SimProfile profile;
  bool remote_invalidate;
  std::vector<MemregPolicy> policies;
};

std::string switch_case_name(const ::testing::TestParamInfo<SwitchCase>& info) {
  std::string name = verbs::sim::sim_profile_name(info.param.profile);
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  name += info.param.remote_invalidate ? "_rinv" : "_local";
  return name + "_" + std::to_string(info.param.policies.size()) + "_policies";
}

class HostMemregSwitchTest : public MemregSwitchFixture,
                             public ::testing::WithParamInterface<SwitchCase> {
 protected:
  verbs::sim::SimOpts fabric_opts() const override {
    verbs::sim::SimOpts opts;
    opts.profile = GetParam().profile;
    opts.seed = 11;
    return opts;
  }
  transport_rdma::RdmaTargetOpts transport_opts() const override {
    transport_rdma::RdmaTargetOpts opts;
    opts.send_with_invalidate = GetParam().remote_invalidate
                                    ? transport_rdma::SendWithInvalidate::automatic
                                    : transport_rdma::SendWithInvalidate::off;
    return opts;
  }
};

TEST_P(HostMemregSwitchTest, EveryPolicyPairSwitchesUnderVerifiedLoadWithNothingLost) {
  const std::vector<MemregPolicy>& policies = GetParam().policies;
  const std::vector<MemregPolicy> walk = every_pair_walk(policies);
  ASSERT_NO_FATAL_FAILURE(open_queue(walk.front(), 0));
  ASSERT_GE(qpair_->depth(), kQueueDepth);
  VerifiedLoad load(*host_, *ns_, *qpair_);
  ASSERT_TRUE(load.ok());

  uint64_t switches = 0;
  for (uint32_t repeat = 0; repeat < kScheduleRepeats; ++repeat) {
    for (size_t i = 0; i < walk.size(); ++i) {
      if (repeat == 0 && i == 0) continue;  // the policy the qpair started with
      const MemregPolicy to = walk[i];
      const MemregPolicy from = qpair_->memreg_policy();
      SCOPED_TRACE(std::string(host::memreg_policy_name(from)) + " -> " +
                   host::memreg_policy_name(to));
      const uint64_t target = load.completed + kIosBetweenSwitches;
      ASSERT_TRUE(run_load(load, *qpair_, [&] { return load.completed >= target; }));
      ASSERT_GT(load.in_flight(), kQueueDepth / 2) << "the switch must find I/O in flight";
      ASSERT_TRUE(qpair_->set_memreg_policy(to));
      EXPECT_TRUE(qpair_->switching());
      ASSERT_TRUE(run_load(load, *qpair_, [&] { return !qpair_->switching(); }))
          << "the drain did not end: outstanding " << qpair_->outstanding();
      EXPECT_EQ(qpair_->memreg_policy(), to);
      ++switches;
    }
  }
  const uint64_t last = load.completed + kIosBetweenSwitches;
  ASSERT_TRUE(run_load(load, *qpair_, [&] { return load.completed >= last; }));
  load.stop();
  ASSERT_TRUE(run_rounds({qpair_.get()}, [&] { return load.in_flight() == 0; }));
  for (int i = 0; i < 16; ++i) round({qpair_.get()});

  EXPECT_EQ(load.errors, 0u);
  EXPECT_EQ(load.verify_failures, 0u);
  EXPECT_EQ(load.extra_callbacks, 0u);
  EXPECT_EQ(load.refused, 0u);
  EXPECT_EQ(load.completed, load.submitted);
  EXPECT_GT(load.busy, 0u) << "a drain refuses new submits";
  const host::IoQpairStats stats = qpair_->stats();
  EXPECT_EQ(stats.memreg_switches, switches);
  EXPECT_EQ(stats.memreg_switch_failures, 0u);
  EXPECT_EQ(stats.reconnects, 0u);
  EXPECT_EQ(stats.qp_errors, 0u);
  EXPECT_EQ(stats.bind_errors, 0u);
  EXPECT_EQ(stats.errors, 0u);
  EXPECT_EQ(controller_->stats().reconnects, 0u);
  EXPECT_TRUE(qpair_->connected());
}

INSTANTIATE_TEST_SUITE_P(
    Profiles, HostMemregSwitchTest,
    ::testing::Values(
        // The host invalidates every window itself, on the profile where a key change lags.
        SwitchCase{verbs::sim::SimProfile::mlx5_2017,
                   false,
                   {std::begin(kSafePolicies), std::end(kSafePolicies)}},
        // The target invalidates: unsafe posts no LOCAL_INV and is safe too.
        SwitchCase{verbs::sim::SimProfile::mlx5_2017,
                   true,
                   {std::begin(kAllPolicies), std::end(kAllPolicies)}},
        // Random lags and completion delays within the fence rules.
        SwitchCase{verbs::sim::SimProfile::adversarial,
                   false,
                   {std::begin(kSafePolicies), std::end(kSafePolicies)}}),
    switch_case_name);

// ---------------------------------------------------------------------------------------
// Edge cases

class HostMemregSwitchEdgeTest : public MemregSwitchFixture {
 protected:
  // Writes `count` I/Os of pattern `seed` (one per unit), all submitted before the next poll.
  void submit_writes(host::IoQpair& qpair, host::Namespace& ns, DmaBuffer& data, uint32_t count,
                     std::vector<Completion>* completions) {
    completions->assign(count, Completion{});
    for (uint32_t i = 0; i < count; ++i) {
      ASSERT_TRUE(ns.write(qpair, data.data() + i * kIoBytes, uint64_t{i} * kBlocksPerIo,
                           kBlocksPerIo, &on_complete, &(*completions)[i]));
    }
  }
  // Reads the `count` units back and checks them against `seed`.
  void expect_data(host::IoQpair& qpair, host::Namespace& ns, uint32_t count, uint32_t seed) {
    DmaBuffer back(*host_, kIoBytes * count);
    ASSERT_TRUE(back);
    ASSERT_TRUE(run_io(qpair, [&](host::IoCallback cb, void* ctx) {
      return ns.read(qpair, back.data(), 0, kBlocksPerIo * count, cb, ctx);
    }));
    EXPECT_TRUE(has_pattern(back.data(), kIoBytes * count, seed));
  }
  static void expect_each_once(const std::vector<Completion>& completions, bool success) {
    for (size_t i = 0; i < completions.size(); ++i) {
      EXPECT_EQ(completions[i].calls, 1) << "I/O " << i;
      if (success) {
        EXPECT_TRUE(completions[i].status.is_success())
            << "I/O " << i << ": " << describe(completions[i].status);
      }
    }
  }
};

TEST_F(HostMemregSwitchEdgeTest, ThePolicyInUseIsANoOpAndASwitchCanBeCalledOff) {
  ASSERT_NO_FATAL_FAILURE(open_queue(MemregPolicy::max, kIoBytes));

  ASSERT_TRUE(qpair_->set_memreg_policy(MemregPolicy::max));
  EXPECT_FALSE(qpair_->switching());
  ASSERT_TRUE(run_io(*qpair_, [&](host::IoCallback cb, void* ctx) {
    return ns_->read(*qpair_, data_->data(), 0, kBlocksPerIo, cb, ctx);
  }));

  // Asked for and called off before the qpair polled: nothing switches, I/O goes on.
  ASSERT_TRUE(qpair_->set_memreg_policy(MemregPolicy::sagi));
  EXPECT_TRUE(qpair_->switching());
  Completion refused_read;
  auto busy = ns_->read(*qpair_, data_->data(), 0, kBlocksPerIo, &on_complete, &refused_read);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, Errc::busy);
  ASSERT_TRUE(qpair_->set_memreg_policy(MemregPolicy::max));
  EXPECT_FALSE(qpair_->switching());
  ASSERT_TRUE(run_io(*qpair_, [&](host::IoCallback cb, void* ctx) {
    return ns_->read(*qpair_, data_->data(), 0, kBlocksPerIo, cb, ctx);
  }));
  // The last request wins: sagi, then deferred.
  ASSERT_TRUE(qpair_->set_memreg_policy(MemregPolicy::sagi));
  ASSERT_TRUE(qpair_->set_memreg_policy(MemregPolicy::deferred));
  ASSERT_TRUE(run_rounds({qpair_.get()}, [&] { return !qpair_->switching(); }));
  EXPECT_EQ(qpair_->memreg_policy(), MemregPolicy::deferred);
  EXPECT_EQ(qpair_->stats().memreg_switches, 1u);
  ASSERT_TRUE(run_io(*qpair_, [&](host::IoCallback cb, void* ctx) {
    return ns_->read(*qpair_, data_->data(), 0, kBlocksPerIo, cb, ctx);
  }));

  // Not a policy: refused, nothing changes.
  auto bogus = qpair_->set_memreg_policy(static_cast<MemregPolicy>(9));
  ASSERT_FALSE(bogus);
  EXPECT_EQ(bogus.error().code, Errc::invalid_argument);
  EXPECT_FALSE(qpair_->switching());
  auto bogus_all = controller_->set_memreg_policy(static_cast<MemregPolicy>(9));
  ASSERT_FALSE(bogus_all);
  EXPECT_EQ(bogus_all.error().code, Errc::invalid_argument);
}

// Random completion delays (adversarial profile) without remote invalidation: now and then a
// deferred I/O is called back while its window's signaled LOCAL_INV is still on its way.
class HostMemregSwitchLocalInvTest : public HostMemregSwitchEdgeTest {
 protected:
  verbs::sim::SimOpts fabric_opts() const override {
    verbs::sim::SimOpts opts;
    opts.profile = verbs::sim::SimProfile::adversarial;
    opts.seed = 5;
    opts.adversarial_completion_delay_steps = 2000;
    return opts;
  }
  transport_rdma::RdmaTargetOpts transport_opts() const override {
    transport_rdma::RdmaTargetOpts opts;
    opts.send_with_invalidate = transport_rdma::SendWithInvalidate::off;
    return opts;
  }
};

TEST_F(HostMemregSwitchLocalInvTest, TheDrainWaitsForDeferredLocalInvalidatesAfterTheirIo) {
  ASSERT_NO_FATAL_FAILURE(open_queue(MemregPolicy::deferred, kIoBytes));
  // Reads until one is called back before its LOCAL_INV's completion: 2 of its 3 CQEs in
  // (the response's receive and the SEND's).
  bool local_inv_pending = false;
  uint64_t cqes_before = 0;
  for (int attempt = 0; attempt < 64 && !local_inv_pending; ++attempt) {
    ASSERT_TRUE(run_rounds({qpair_.get()},
                           [&] {
                             return qpair_->stats().cqes_reaped ==
                                    qpair_->stats().local_invalidates_posted +
                                        qpair_->stats().sends_posted + qpair_->stats().completed +
                                        1;  // + the Connect's
                           }))
        << "attempt " << attempt;
    cqes_before = qpair_->stats().cqes_reaped;
    Completion read;
    ASSERT_TRUE(ns_->read(*qpair_, data_->data(), 0, kBlocksPerIo, &on_complete, &read));
    ASSERT_TRUE(run_rounds({qpair_.get()}, [&] { return read.calls == 1; }));
    local_inv_pending = qpair_->stats().cqes_reaped == cqes_before + 2;
  }
  ASSERT_TRUE(local_inv_pending) << "no read was called back before its LOCAL_INV completed";
  ASSERT_EQ(qpair_->outstanding(), 0u);

  ASSERT_TRUE(qpair_->set_memreg_policy(MemregPolicy::global));
  bool switched_early = false;
  ASSERT_TRUE(run_rounds({qpair_.get()}, [&] {
    if (!qpair_->switching() && qpair_->stats().cqes_reaped != cqes_before + 3) {
      switched_early = true;
    }
    return !qpair_->switching();
  }));
  EXPECT_FALSE(switched_early) << "switched while a window's LOCAL_INV was outstanding";
  EXPECT_EQ(qpair_->memreg_policy(), MemregPolicy::global);
  EXPECT_EQ(qpair_->stats().cqes_reaped, cqes_before + 3);
  EXPECT_EQ(qpair_->stats().memreg_switches, 1u);
  ASSERT_TRUE(run_io(*qpair_, [&](host::IoCallback cb, void* ctx) {
    return ns_->read(*qpair_, data_->data(), 0, kBlocksPerIo, cb, ctx);
  }));
  EXPECT_EQ(qpair_->stats().reconnects, 0u);
}

// A device without type-2 memory windows can do global only.
class HostMemregSwitchNoWindowsTest : public HostMemregSwitchEdgeTest {
 protected:
  verbs::sim::SimOpts fabric_opts() const override {
    verbs::sim::SimOpts opts;
    opts.caps.memory_window_type2 = false;
    return opts;
  }
};

TEST_F(HostMemregSwitchNoWindowsTest, APolicyTheDeviceCannotDoIsNotSupportedAndChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(open_queue(MemregPolicy::global, kIoBytes));
  test::LogCapture log;
  for (MemregPolicy policy :
       {MemregPolicy::unsafe, MemregPolicy::sagi, MemregPolicy::max, MemregPolicy::deferred}) {
    SCOPED_TRACE(host::memreg_policy_name(policy));
    auto asked = qpair_->set_memreg_policy(policy);
    ASSERT_FALSE(asked);
    EXPECT_EQ(asked.error().code, Errc::not_supported);
    EXPECT_FALSE(qpair_->switching());
    EXPECT_EQ(qpair_->memreg_policy(), MemregPolicy::global);
    auto asked_all = controller_->set_memreg_policy(policy);
    ASSERT_FALSE(asked_all);
    EXPECT_EQ(asked_all.error().code, Errc::not_supported);
  }
  EXPECT_TRUE(log.contains("type-2 memory windows"));
  ASSERT_TRUE(qpair_->set_memreg_policy(MemregPolicy::global));
  ASSERT_TRUE(run_io(*qpair_, [&](host::IoCallback cb, void* ctx) {
    return ns_->read(*qpair_, data_->data(), 0, kBlocksPerIo, cb, ctx);
  }));
  EXPECT_EQ(qpair_->stats().memreg_switches, 0u);
}

TEST_F(HostMemregSwitchEdgeTest,
       AQpErrorDuringTheDrainReconnectsAndTheNewQueuePairHasTheNewPolicy) {
  ASSERT_NO_FATAL_FAILURE(open_queue(MemregPolicy::sagi, kIoBytes * kQueueDepth));
  fill_pattern(data_->data(), data_->size(), 21);
  std::vector<Completion> completions;
  ASSERT_NO_FATAL_FAILURE(submit_writes(*qpair_, *ns_, *data_, kQueueDepth, &completions));
  ASSERT_TRUE(qpair_->set_memreg_policy(MemregPolicy::deferred));
  host_provider_->fail_next_wrs(1, verbs::WcStatus::general_error);  // the first WR to run

  ASSERT_TRUE(run_rounds(
      {qpair_.get()}, [&] { return all_called(completions); }, 20))
      << "outstanding " << qpair_->outstanding();
  for (int i = 0; i < 16; ++i) round({qpair_.get()});
  expect_each_once(completions, true);
  EXPECT_FALSE(qpair_->switching());
  EXPECT_EQ(qpair_->memreg_policy(), MemregPolicy::deferred);
  const host::IoQpairStats stats = qpair_->stats();
  EXPECT_EQ(stats.qp_errors, 1u);
  EXPECT_EQ(stats.reconnects, 1u);
  EXPECT_EQ(stats.memreg_switches, 1u);
  EXPECT_GT(stats.resubmitted, 0u);
  ASSERT_NO_FATAL_FAILURE(expect_data(*qpair_, *ns_, kQueueDepth, 21));
}

TEST_F(HostMemregSwitchEdgeTest, ASwitchAskedForWhileReconnectingTakesEffectWithTheNewQueuePair) {
  ASSERT_NO_FATAL_FAILURE(open_queue(MemregPolicy::global, kIoBytes));
  Completion read;
  ASSERT_TRUE(ns_->read(*qpair_, data_->data(), 0, kBlocksPerIo, &on_complete, &read));
  host_provider_->fail_next_wrs(1, verbs::WcStatus::general_error);
  ASSERT_TRUE(run_rounds({qpair_.get()}, [&] { return qpair_->reconnecting(); }));
  EXPECT_EQ(qpair_->stats().binds_posted, 0u);  // global binds nothing

  ASSERT_TRUE(qpair_->set_memreg_policy(MemregPolicy::sagi));
  EXPECT_TRUE(qpair_->switching());
  ASSERT_TRUE(run_rounds(
      {qpair_.get()}, [&] { return read.calls == 1 && qpair_->connected(); }, 20));
  EXPECT_TRUE(read.status.is_success()) << describe(read.status);
  EXPECT_FALSE(qpair_->switching());
  EXPECT_EQ(qpair_->memreg_policy(), MemregPolicy::sagi);
  const host::IoQpairStats stats = qpair_->stats();
  EXPECT_EQ(stats.reconnects, 1u);
  EXPECT_EQ(stats.memreg_switches, 1u);
  EXPECT_EQ(stats.binds_posted, 1u) << "the resent read goes with a window of the new policy";
}

TEST_F(HostMemregSwitchEdgeTest, DisconnectDuringASwitchCallsEveryIoBackOnceAndDropsTheSwitch) {
  ASSERT_NO_FATAL_FAILURE(open_queue(MemregPolicy::deferred, kIoBytes * kQueueDepth));
  std::vector<Completion> completions;
  ASSERT_NO_FATAL_FAILURE(submit_writes(*qpair_, *ns_, *data_, kQueueDepth, &completions));
  round({qpair_.get()});  // the writes reach the target
  ASSERT_TRUE(qpair_->set_memreg_policy(MemregPolicy::global));
  ASSERT_TRUE(qpair_->switching());
  qpair_->disconnect();
  for (int i = 0; i < 16; ++i) round({qpair_.get()});
  expect_each_once(completions, false);
  for (const Completion& completion : completions) {
    EXPECT_TRUE(completion.status.is_success() || is_sq_deletion_abort(completion.status))
        << describe(completion.status);
  }
  EXPECT_FALSE(qpair_->switching());
  EXPECT_EQ(qpair_->memreg_policy(), MemregPolicy::deferred);
  EXPECT_EQ(qpair_->stats().memreg_switches, 0u);
  auto after = qpair_->set_memreg_policy(MemregPolicy::global);
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error().code, Errc::bad_state);
}

// The host's device holds few keys: a sagi pool (16 windows) and the memory map's MRs fit,
// deferred's 32 windows beside them do not. The sim numbers a peer device's keys from 0x1001
// (sim.cpp, create_peer) and takes fresh indices up to caps.max_mw.
class HostMemregSwitchFewKeysTest : public HostMemregSwitchEdgeTest {
 protected:
  static constexpr uint32_t kHostKeys = 40;
  verbs::sim::SimOpts fabric_opts() const override {
    verbs::sim::SimOpts opts;
    opts.caps.max_mw = 0x1001 + kHostKeys - 1;
    return opts;
  }
};

TEST_F(HostMemregSwitchFewKeysTest, ANewPolicyThatCannotBeBuiltKeepsTheOldOne) {
  ASSERT_NO_FATAL_FAILURE(open_queue(MemregPolicy::sagi, kIoBytes * 8, 16));
  fill_pattern(data_->data(), data_->size(), 33);
  std::vector<Completion> completions;
  ASSERT_NO_FATAL_FAILURE(submit_writes(*qpair_, *ns_, *data_, 8, &completions));

  test::LogCapture log;
  ASSERT_TRUE(qpair_->set_memreg_policy(MemregPolicy::deferred));
  ASSERT_TRUE(run_rounds({qpair_.get()}, [&] { return !qpair_->switching(); }));
  expect_each_once(completions, true);
  EXPECT_EQ(qpair_->memreg_policy(), MemregPolicy::sagi);
  EXPECT_TRUE(log.contains("memreg policy switch sagi -> deferred failed"));
  const host::IoQpairStats stats = qpair_->stats();
  EXPECT_EQ(stats.memreg_switches, 0u);
  EXPECT_EQ(stats.memreg_switch_failures, 1u);
  EXPECT_EQ(stats.reconnects, 0u);
  ASSERT_NO_FATAL_FAILURE(expect_data(*qpair_, *ns_, 8, 33));  // sagi still serves I/O
  // max needs no more windows than sagi: that switch goes through.
  ASSERT_TRUE(qpair_->set_memreg_policy(MemregPolicy::max));
  ASSERT_TRUE(run_rounds({qpair_.get()}, [&] { return !qpair_->switching(); }));
  EXPECT_EQ(qpair_->memreg_policy(), MemregPolicy::max);
  ASSERT_NO_FATAL_FAILURE(expect_data(*qpair_, *ns_, 8, 33));
}

TEST_F(HostMemregSwitchEdgeTest, TheControllerAsksEveryQpairAndThoseAllocatedLater) {
  auto controller = connect(kNqn512, switch_opts(MemregPolicy::global));
  ASSERT_NE(controller, nullptr);
  auto first = alloc_qpair(*controller, queue_opts());
  auto second = alloc_qpair(*controller, queue_opts());
  ASSERT_TRUE(first && second);
  host::Namespace* ns = controller->ns(1);
  ASSERT_NE(ns, nullptr);

  test::LogCapture log;
  ASSERT_TRUE(controller->set_memreg_policy(MemregPolicy::unsafe));
  // Taken by each owner at its next poll, not before.
  EXPECT_FALSE(first->switching());
  EXPECT_EQ(first->memreg_policy(), MemregPolicy::global);
  ASSERT_TRUE(run_rounds({first.get(), second.get()}, [&] {
    return first->memreg_policy() == MemregPolicy::unsafe &&
           second->memreg_policy() == MemregPolicy::unsafe;
  }));
  EXPECT_TRUE(log.contains("switching to memreg policy 'unsafe'"));
  ASSERT_TRUE(controller->set_memreg_policy(MemregPolicy::sagi));
  auto third = alloc_qpair(*controller, queue_opts());
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->memreg_policy(), MemregPolicy::sagi) << "a later qpair starts with it";
  ASSERT_TRUE(run_rounds({first.get(), second.get(), third.get()}, [&] {
    return first->memreg_policy() == MemregPolicy::sagi &&
           second->memreg_policy() == MemregPolicy::sagi;
  }));
  for (host::IoQpair* qpair : {first.get(), second.get(), third.get()}) {
    EXPECT_FALSE(qpair->switching()) << "qpair " << qpair->qid();
    DmaBuffer data(*host_, kIoBytes);
    ASSERT_TRUE(data);
    ASSERT_TRUE(run_io(*qpair, [&](host::IoCallback cb, void* ctx) {
      return ns->read(*qpair, data.data(), 0, kBlocksPerIo, cb, ctx);
    }));
  }
  EXPECT_EQ(first->stats().memreg_switches, 2u);
  EXPECT_EQ(second->stats().memreg_switches, 2u);
  EXPECT_EQ(third->stats().memreg_switches, 0u);
}

}  // namespace
}  // namespace nvmf::e2e
