// The transport-neutral worker (worker_core.h) against a fake Path: every task state and
// transition (idle -> pending -> in_flight -> idle; busy / down / refused submits; the pending
// list's order; the drain and its timeout; a stop request; -d's count), and the --verify
// bookkeeping over a fake namespace that stores what was written (round trip, corruption,
// failed writes).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "common/clock.h"
#include "log_capture.h"
#include "worker_core.h"

namespace nvmf::perf {
namespace {

using Task = WorkerCore::Task;
using TaskState = WorkerCore::TaskState;

constexpr uint32_t kBlockSize = 512;
constexpr uint32_t kIoSize = 4096;

// A queue and a namespace in RAM. Writes land at submit, reads copy out at submit; every
// poll completes all that is in flight (unless told to hold them) and moves the clock.
struct FakePath {
  WorkerCore* core = nullptr;
  FakeClock* clock = nullptr;
  std::vector<uint8_t> media;
  std::deque<SubmitOutcome> answers;  // the next submits' answers; empty: submitted
  std::vector<Task*> in_flight;
  std::vector<uint64_t> submitted_lbas;  // in submission order
  uint64_t poll_step_ns = 1000;
  bool hold_completions = false;
  unsigned corrupt_reads_from_poll = ~0u;  // flip a byte of every read from this poll on
  bool fail_writes = false;  // writes complete with an error, after landing as below
  // What a failed write leaves: its data on the first half of its blocks (torn; the rest
  // keeps the old data), or garbage everywhere (what no failed write may do).
  bool failed_writes_land_garbage = false;
  // Writes submitted in polls [from, until) fail too (as fail_writes).
  unsigned fail_writes_from_poll = ~0u;
  unsigned fail_writes_until_poll = ~0u;
  std::vector<const Task*> failing;  // writes submitted to fail, until their completion
  unsigned polls = 0;
  bool abandoned = false;

  SubmitOutcome submit(Task& task, Error* error) noexcept {
    EXPECT_EQ(task.state, TaskState::pending);
    if (!answers.empty()) {
      const SubmitOutcome answer = answers.front();
      answers.pop_front();
      if (answer == SubmitOutcome::refused) *error = Error(Errc::invalid_argument, "fake refusal");
      if (answer != SubmitOutcome::submitted) return answer;
    }
    uint8_t* at = media.data() + task.lba * kBlockSize;
    if (task.is_read) {
      std::memcpy(task.buffer, at, kIoSize);
      if (polls >= corrupt_reads_from_poll) task.buffer[100] ^= 0x01;
    } else if (write_fails() && failed_writes_land_garbage) {
      std::memset(at, 0x5A, kIoSize);
      failing.push_back(&task);
    } else if (write_fails()) {
      std::memcpy(at, task.buffer, kIoSize / 2);
      failing.push_back(&task);
    } else {
      std::memcpy(at, task.buffer, kIoSize);
    }
    in_flight.push_back(&task);
    submitted_lbas.push_back(task.lba);
    return SubmitOutcome::submitted;
  }

  void poll() noexcept {
    ++polls;
    clock->advance_ns(poll_step_ns);
    if (hold_completions) return;
    std::vector<Task*> batch;
    batch.swap(in_flight);
    for (Task* task : batch) {
      EXPECT_EQ(task->state, TaskState::in_flight);
      const auto failed_at = std::find(failing.begin(), failing.end(), task);
      const bool failed = failed_at != failing.end();
      if (failed) failing.erase(failed_at);
      core->complete(
          *this, *task,
          failed ? spec::generic_status(spec::sc_generic::internal_error) : spec::status_success);
    }
  }

  void abandon() noexcept { abandoned = true; }

  bool write_fails() const noexcept {
    return fail_writes || (polls >= fail_writes_from_poll && polls < fail_writes_until_poll);
  }
};

struct Fixture {
  explicit Fixture(Settings settings_in, uint64_t ns_bytes = 1 << 20) : settings(settings_in) {
    core = std::make_unique<WorkerCore>(WorkerCoreParams{0, 1, &settings, &clock, &stop});
    path.core = core.get();
    path.clock = &clock;
    path.media.assign(ns_bytes, 0);
    shape = NamespaceShape{1, kBlockSize, ns_bytes / kBlockSize};
  }

  // One namespace, -q tasks with buffers of their own. "" or add_namespace's reason.
  std::string set_up() {
    core->reserve_namespaces(1);
    bool usage_error = false;
    std::string reason = core->add_namespace(shape, &usage_error);
    if (!reason.empty()) return reason;
    buffers.assign(core->tasks_needed(), std::vector<uint8_t>(kIoSize));
    for (auto& buffer : buffers) core->add_task(core->namespaces()[0], buffer.data(), &path);
    return "";
  }

  void run_for(uint64_t duration_ns) { core->run(path, clock.now_ns() + duration_ns, Ticker{}); }

  ResultRow row() const { return core->rows().at(0); }

  test::LogCapture logs;  // errors are expected in some tests: keep them off the output
  Settings settings;
  FakeClock clock{1000};
  std::atomic<bool> stop{false};
  std::unique_ptr<WorkerCore> core;
  FakePath path;
  NamespaceShape shape;
  std::vector<std::vector<uint8_t>> buffers;
};

Settings base_settings(Workload workload, uint32_t read_percent, uint32_t queue_depth,
                       bool verify) {
  Settings s;
  s.workload = workload;
  s.read_percent = read_percent;
  s.queue_depth = queue_depth;
  s.io_size_bytes = kIoSize;
  s.verify = verify;
  return s;
}

// The --verify runs' fixture: randrw 50 % at -q 4 over 16 units, so that reads hit units
// written earlier in the run often.
struct VerifyFixture : Fixture {
  VerifyFixture() : Fixture(base_settings(Workload::randrw, 50, 4, true), 16 * kIoSize) {}
};

void expect_all_idle(WorkerCore& core) {
  for (const Task& task : core.tasks()) EXPECT_EQ(task.state, TaskState::idle);
  EXPECT_EQ(core.in_flight(), 0u);
  EXPECT_EQ(core.namespaces()[0].picker.busy_count(), 0u);
}

TEST(PerfWorkerCore, RunsUntilTheDeadlineThenDrains) {
  Fixture f(base_settings(Workload::randread, 100, 4, false));
  ASSERT_EQ(f.set_up(), "");
  f.run_for(1000 * 1000);  // 1 ms of 1 us polls: about 1000 polls x 4 I/Os
  const ResultRow row = f.row();
  EXPECT_GE(row.ios, 3900u);
  EXPECT_EQ(row.ios, f.path.submitted_lbas.size());
  EXPECT_EQ(row.bytes, row.ios * kIoSize);
  EXPECT_EQ(row.errors, 0u);
  EXPECT_NEAR(f.core->elapsed_s(), 0.001, 0.00001);
  EXPECT_EQ(f.core->live().ios.load(), row.ios);
  EXPECT_FALSE(f.path.abandoned);
  expect_all_idle(*f.core);
}

TEST(PerfWorkerCore, SequentialUnitsFollowEachOther) {
  Fixture f(base_settings(Workload::write, 0, 2, false));
  ASSERT_EQ(f.set_up(), "");
  f.run_for(3000);
  ASSERT_GE(f.path.submitted_lbas.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(f.path.submitted_lbas[i], i * (kIoSize / kBlockSize));
}

TEST(PerfWorkerCore, BusyKeepsTasksPendingInOrderAndCountsRetries) {
  Fixture f(base_settings(Workload::write, 0, 4, false));
  ASSERT_EQ(f.set_up(), "");
  // Tasks 0 and 1 (units 0, 1) find the queue full; 2 and 3 go; after the first poll task 2's
  // next unit (4) finds it full too, task 3's (5) goes.
  f.path.answers = {SubmitOutcome::busy, SubmitOutcome::busy, SubmitOutcome::submitted,
                    SubmitOutcome::submitted, SubmitOutcome::busy};
  f.run_for(10 * 1000);
  const std::vector<uint64_t>& lbas = f.path.submitted_lbas;
  ASSERT_GE(lbas.size(), 6u);
  // Then the pending list, in the order the tasks joined it: units 0, 1, 4.
  const uint64_t blocks = kIoSize / kBlockSize;
  const std::vector<uint64_t> first = {2 * blocks, 3 * blocks, 5 * blocks,
                                       0 * blocks, 1 * blocks, 4 * blocks};
  EXPECT_EQ(std::vector<uint64_t>(lbas.begin(), lbas.begin() + 6), first);
  EXPECT_EQ(f.core->busy_retries(), 3u);
  EXPECT_EQ(f.row().errors, 0u);
  expect_all_idle(*f.core);
}

TEST(PerfWorkerCore, DownIsRetriedWithoutCountingBusy) {
  Fixture f(base_settings(Workload::randwrite, 0, 2, false));
  ASSERT_EQ(f.set_up(), "");
  f.path.answers = {SubmitOutcome::down, SubmitOutcome::down, SubmitOutcome::down};
  f.run_for(10 * 1000);
  EXPECT_EQ(f.core->busy_retries(), 0u);
  EXPECT_GT(f.row().ios, 2u);
  EXPECT_EQ(f.row().errors, 0u);
  expect_all_idle(*f.core);
}

TEST(PerfWorkerCore, RefusedSubmitIsAnErrorAndTheTaskRetires) {
  Fixture f(base_settings(Workload::randread, 100, 3, false));
  ASSERT_EQ(f.set_up(), "");
  f.path.answers = {SubmitOutcome::refused};
  f.run_for(100 * 1000);
  const ResultRow row = f.row();
  EXPECT_EQ(row.errors, 1u);
  EXPECT_EQ(f.core->live().errors.load(), 1u);
  EXPECT_EQ(row.ios, f.path.submitted_lbas.size()) << "the refused one is no completed I/O";
  // Two tasks kept going at about one I/O each per poll; the refused one never came back.
  EXPECT_NEAR(static_cast<double>(row.ios), 2.0 * f.path.polls, 4.0);
  expect_all_idle(*f.core);
}

TEST(PerfWorkerCore, StopDropsPendingTasksAndReleasesTheirUnits) {
  Fixture f(base_settings(Workload::randwrite, 0, 4, true));
  ASSERT_EQ(f.set_up(), "");
  f.path.answers.assign(1000000, SubmitOutcome::busy);  // never takes anything
  f.run_for(5 * 1000);
  EXPECT_EQ(f.row().ios, 0u);
  EXPECT_GT(f.core->busy_retries(), 4u);
  expect_all_idle(*f.core);
}

TEST(PerfWorkerCore, DrainTimeoutAbandonsTheOutstandingIos) {
  Fixture f(base_settings(Workload::randread, 100, 4, false));
  ASSERT_EQ(f.set_up(), "");
  f.path.hold_completions = true;
  f.path.poll_step_ns = uint64_t{1000} * 1000 * 1000;  // a second per poll
  f.run_for(uint64_t{1000} * 1000 * 1000);
  EXPECT_TRUE(f.path.abandoned);
  EXPECT_TRUE(f.core->stopping());
  EXPECT_EQ(f.core->in_flight(), 4u);
  // 1 s to the deadline, then kDrainTimeoutNs of one-second polls.
  EXPECT_EQ(f.path.polls, 1 + kDrainTimeoutNs / f.path.poll_step_ns);
  // The abandoned I/Os complete as aborted later: booked, and no new I/O starts.
  const std::vector<Task*> held = f.path.in_flight;
  f.path.in_flight.clear();
  for (Task* task : held) {
    f.core->complete(f.path, *task, spec::generic_status(spec::sc_generic::abort_requested));
  }
  EXPECT_EQ(f.row().errors, 4u);
  EXPECT_TRUE(f.path.in_flight.empty());
  expect_all_idle(*f.core);
}

// A failed completion is an error, not an I/O: it adds nothing to IOPS, bytes or latency.
TEST(PerfWorkerCore, FailedCompletionsCountAsErrorsOnly) {
  VerifyFixture f;
  ASSERT_EQ(f.set_up(), "");
  f.path.fail_writes = true;
  f.run_for(100 * 1000);
  const ResultRow row = f.row();
  ASSERT_GT(row.errors, 0u);
  const uint64_t completions = f.path.submitted_lbas.size();
  EXPECT_EQ(row.ios + row.errors, completions);
  EXPECT_EQ(row.bytes, row.ios * kIoSize);
  EXPECT_EQ(f.core->live().ios.load(), row.ios);
  LatencyHistogram latency;
  f.core->merge_latency_into(&latency);
  EXPECT_EQ(latency.count(), row.ios);
  expect_all_idle(*f.core);
}

TEST(PerfWorkerCore, StopRequestEndsTheRunEarly) {
  Fixture f(base_settings(Workload::randread, 100, 2, false));
  ASSERT_EQ(f.set_up(), "");
  f.stop.store(true);
  f.run_for(uint64_t{3600} * 1000 * 1000 * 1000);  // an hour, cut short
  // The first poll completes (and restarts) the first two, then sees the request; the
  // second drains what was started.
  EXPECT_EQ(f.path.polls, 2u);
  EXPECT_EQ(f.row().ios, 4u);
  expect_all_idle(*f.core);
}

// -d: exactly that many I/Os on the namespace, however long they take; the run ends once they
// completed, long before -t.
TEST(PerfWorkerCore, NumberIosEndsTheRunAfterExactlyThatMany) {
  Settings settings = base_settings(Workload::randrw, 50, 4, true);
  settings.number_ios = 103;  // not a multiple of -q: the last round starts 3 of the 4 tasks
  Fixture f(settings);
  ASSERT_EQ(f.set_up(), "");
  const uint64_t start_ns = f.clock.now_ns();
  f.run_for(uint64_t{3600} * 1000 * 1000 * 1000);  // -t of an hour: never reached
  EXPECT_EQ(f.path.submitted_lbas.size(), 103u);
  EXPECT_EQ(f.row().ios, 103u);
  EXPECT_EQ(f.row().verify_failures, 0u);
  EXPECT_TRUE(f.core->account().balanced());
  // 103 I/Os at 4 per poll: 26 polls, the last one completing the last 3.
  EXPECT_EQ(f.path.polls, 26u);
  EXPECT_EQ(f.clock.now_ns() - start_ns, 26 * f.path.poll_step_ns);
  EXPECT_FALSE(f.path.abandoned);
  expect_all_idle(*f.core);
}

// The last of the -d I/Os finds the queue full: the run waits for it to go, it is not dropped.
TEST(PerfWorkerCore, NumberIosWaitsForAPendingLastIo) {
  Settings settings = base_settings(Workload::randread, 100, 4, false);
  settings.number_ios = 10;
  Fixture f(settings);
  ASSERT_EQ(f.set_up(), "");
  // Starts 0-3, then 4-7 after the first poll, then 8 and 9 after the second: 9 finds the
  // queue full, and so do its first three retries.
  f.path.answers.assign(9, SubmitOutcome::submitted);
  f.path.answers.insert(f.path.answers.end(), 4, SubmitOutcome::busy);
  f.run_for(uint64_t{3600} * 1000 * 1000 * 1000);
  EXPECT_EQ(f.path.submitted_lbas.size(), 10u);
  EXPECT_EQ(f.row().ios, 10u);
  EXPECT_EQ(f.core->busy_retries(), 4u);
  EXPECT_TRUE(f.core->account().balanced());
  expect_all_idle(*f.core);
}

// -d is an additional bound: -t still ends a run whose I/Os are not done.
TEST(PerfWorkerCore, NumberIosLeavesTheDeadlineInForce) {
  Settings settings = base_settings(Workload::randread, 100, 4, false);
  settings.number_ios = 1000 * 1000;
  Fixture f(settings);
  ASSERT_EQ(f.set_up(), "");
  f.run_for(100 * 1000);  // 100 polls of 4 I/Os
  EXPECT_NEAR(static_cast<double>(f.row().ios), 400.0, 8.0);
  EXPECT_NEAR(f.core->elapsed_s(), 0.0001, 0.000002);  // and one poll of drain
  expect_all_idle(*f.core);
}

TEST(PerfWorkerCore, VerifiedDataRoundTrips) {
  VerifyFixture f;
  ASSERT_EQ(f.set_up(), "");
  f.run_for(200 * 1000);
  const ResultRow row = f.row();
  EXPECT_GT(row.ios, 400u);
  EXPECT_EQ(row.verify_failures, 0u);
  EXPECT_EQ(row.errors, 0u);
  expect_all_idle(*f.core);
}

TEST(PerfWorkerCore, VerifyCatchesACorruptRead) {
  VerifyFixture f;
  ASSERT_EQ(f.set_up(), "");
  f.path.corrupt_reads_from_poll = 50;  // most units are written by then
  f.run_for(100 * 1000);
  EXPECT_GT(f.row().verify_failures, 0u);
  EXPECT_EQ(f.row().errors, 0u);
}

TEST(PerfWorkerCore, FailedWritesMayLeaveOldOrNewData) {
  VerifyFixture f;
  ASSERT_EQ(f.set_up(), "");
  // Once most units were acknowledged, half of each write lands for a while and the status
  // says error; then writes succeed again.
  f.path.fail_writes_from_poll = 50;
  f.path.fail_writes_until_poll = 100;
  f.run_for(200 * 1000);
  const ResultRow row = f.row();
  EXPECT_GT(row.errors, 0u);
  EXPECT_GT(row.ios, 400u);
  // Blocks of the last acknowledged write and of failed writes since, mixed: no failure.
  EXPECT_EQ(row.verify_failures, 0u);
  expect_all_idle(*f.core);
}

TEST(PerfWorkerCore, AFailedWriteDoesNotExcuseGarbage) {
  VerifyFixture f;
  ASSERT_EQ(f.set_up(), "");
  f.path.fail_writes = true;
  f.path.failed_writes_land_garbage = true;  // neither the old data nor the new
  f.run_for(100 * 1000);
  EXPECT_GT(f.row().errors, 0u);
  EXPECT_GT(f.row().verify_failures, 0u);
}

// Every I/O handed to the queue ends completed or failed (refused ones included), and the
// account says so; what is still in flight is counted as such.
TEST(PerfWorkerCore, TheAccountBalances) {
  VerifyFixture f;
  ASSERT_EQ(f.set_up(), "");
  f.path.answers = {SubmitOutcome::refused, SubmitOutcome::busy, SubmitOutcome::submitted,
                    SubmitOutcome::refused};
  f.path.fail_writes = true;
  f.run_for(100 * 1000);
  const IoAccount account = f.core->account();
  const ResultRow row = f.row();
  EXPECT_EQ(account.in_flight, 0u);
  EXPECT_EQ(account.submitted, f.path.submitted_lbas.size() + 2) << "two refused";
  EXPECT_EQ(account.submitted, account.completed + account.failed);
  EXPECT_EQ(account.completed, row.ios);
  EXPECT_EQ(account.failed, row.errors);
  ASSERT_EQ(account.failures.kinds_used, 2u);
  EXPECT_TRUE(account.failures.kinds[0].refused);
  EXPECT_EQ(account.failures.kinds[0].count, 2u);
  EXPECT_EQ(account.failures.kinds[1].sc, spec::sc_generic::internal_error);
  EXPECT_EQ(account.failures.kinds[1].count, account.failed - 2);
}

TEST(PerfWorkerCore, TheAccountCountsWhatIsStillInFlight) {
  Fixture f(base_settings(Workload::randread, 100, 4, false));
  ASSERT_EQ(f.set_up(), "");
  f.path.hold_completions = true;
  f.path.poll_step_ns = uint64_t{1000} * 1000 * 1000;  // a second per poll
  f.run_for(1000);  // the drain times out (kDrainTimeoutNs): four abandoned
  IoAccount account = f.core->account();
  EXPECT_EQ(account.submitted, 4u);
  EXPECT_EQ(account.in_flight, 4u);
  EXPECT_FALSE(account.balanced());
  // Completed as aborted later (the qpair's disconnect): failed with that status, balanced.
  for (Task* task : f.path.in_flight) {
    f.core->complete(f.path, *task, spec::generic_status(spec::sc_generic::abort_requested));
  }
  account = f.core->account();
  EXPECT_EQ(account.in_flight, 0u);
  EXPECT_EQ(account.failed, 4u);
  EXPECT_TRUE(account.balanced());
}

TEST(PerfWorkerCore, SetupChecksTheNamespaceAndTheQueue) {
  // --verify needs -q free units in the worker's slice: 4 units cannot feed 8 tasks.
  Fixture small(base_settings(Workload::randrw, 50, 8, true), 4 * kIoSize);
  const std::string reason = small.set_up();
  EXPECT_NE(reason.find("too small for --verify -q 8"), std::string::npos) << reason;
  EXPECT_EQ(reason.find('\n'), std::string::npos);

  Fixture f(base_settings(Workload::randread, 100, 8, false));
  ASSERT_EQ(f.set_up(), "");
  EXPECT_EQ(f.core->tasks_needed(), 8u);
  EXPECT_EQ(f.core->check_queue_depth(8, "queues hold"), "");
  const std::string short_queue = f.core->check_queue_depth(7, "queues hold");
  EXPECT_NE(short_queue.find("worker 0: queues hold 7; -q 8 x 1 namespaces needs 8"),
            std::string::npos)
      << short_queue;
}

}  // namespace
}  // namespace nvmf::perf
