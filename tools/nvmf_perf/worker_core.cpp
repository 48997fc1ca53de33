#include "worker_core.h"

#include <sys/resource.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "common/log.h"

// nvmf_perf's log component: defined here, in nvmf_perf_lib, so the library's unit tests link
// without the tool's main().
NVMF_LOG_COMPONENT(nvmf_perf);

namespace nvmf::perf {

namespace {

// Errors and verify failures printed at most, over all workers: the first ones say what is
// wrong, the rest only count.
constexpr uint32_t kReportMax = 5;
std::atomic<uint32_t> g_errors_reported{0};
std::atomic<uint32_t> g_mismatches_reported{0};

bool report_one_more(std::atomic<uint32_t>& reported) noexcept {
  return reported.fetch_add(1, std::memory_order_relaxed) < kReportMax;
}

// Per worker and namespace, different streams from one --seed.
uint64_t picker_seed(uint64_t seed, uint32_t worker, uint32_t nsid) noexcept {
  return seed * 0x9E3779B97F4A7C15ull + (uint64_t{worker} << 32) + nsid;
}

}  // namespace

WorkerCore::NsState::NsState(const NamespaceShape& shape, uint32_t index_in, uint32_t blocks,
                             UnitSlice slice, bool verify, uint64_t seed)
    : index(index_in),
      nsid(shape.nsid),
      block_size(shape.block_size_bytes),
      blocks_per_io(blocks),
      picker(slice, verify, seed),
      generations(verify ? slice.count : 0, kGenerationNone),
      failed_through(verify ? slice.count : 0, kGenerationNone) {}

WorkerCore::WorkerCore(const WorkerCoreParams& params)
    : params_(params),
      settings_(*params.settings),
      clock_(*params.clock),
      rng_(params.settings->seed ^ (uint64_t{params.index} << 48)) {}

std::string WorkerCore::who() const { return "worker " + std::to_string(params_.index) + ": "; }

void WorkerCore::reserve_namespaces(size_t count) { namespaces_.reserve(count); }

std::string WorkerCore::add_namespace(const NamespaceShape& shape, bool* usage_error) {
  assert(namespaces_.size() < namespaces_.capacity() && "reserve_namespaces() first");
  const Settings& s = settings_;
  const uint32_t blocks = s.io_size_bytes / shape.block_size_bytes;  // the caller checked
  uint64_t units = shape.block_count / blocks;
  if (s.verify) units = std::min(units, kVerifyUnitsMax);
  const UnitSlice slice =
      s.verify ? worker_slice(units, params_.index, params_.workers) : UnitSlice{0, units};
  // With --verify a task picks a unit no other task of the worker has in flight: the slice
  // must hold at least -q units (a completing task releases its unit before picking).
  if (slice.count < s.queue_depth) {
    *usage_error = true;
    return who() + "namespace " + std::to_string(shape.nsid) + " is too small for " +
           (s.verify ? "--verify " : "") + "-q " + std::to_string(s.queue_depth) + " -c " +
           std::to_string(params_.workers) + ": each worker's share holds " +
           std::to_string(slice.count) + " I/Os of -o " + std::to_string(s.io_size_bytes) +
           " (lower -q, -c or -o)";
  }
  NsState& ns =
      namespaces_.emplace_back(shape, static_cast<uint32_t>(namespaces_.size()), blocks, slice,
                               s.verify, picker_seed(s.seed, params_.index, shape.nsid));
  if (s.number_ios != 0) ns.ios_to_start = s.number_ios;
  return "";
}

uint64_t WorkerCore::tasks_needed() const noexcept {
  return uint64_t{settings_.queue_depth} * namespaces_.size();
}

std::string WorkerCore::check_queue_depth(uint64_t commands, const char* what) const {
  const uint64_t needed = tasks_needed();
  if (commands >= needed) return "";
  return who() + what + " " + std::to_string(commands) + "; -q " +
         std::to_string(settings_.queue_depth) + " x " + std::to_string(namespaces_.size()) +
         " namespaces needs " + std::to_string(needed) +
         " (all namespaces share a worker's queue): lower -q or --ns-count";
}

WorkerCore::Task& WorkerCore::add_task(NsState& ns, uint8_t* buffer, void* owner) {
  if (tasks_.empty()) tasks_.reserve(tasks_needed());  // every namespace was added by now
  assert(tasks_.size() < tasks_.capacity() && "more tasks than -q x namespaces");
  std::memset(buffer, 0, settings_.io_size_bytes);
  Task task;
  task.owner = owner;
  task.ns = &ns;
  task.buffer = buffer;
  tasks_.push_back(task);
  return tasks_.back();
}

bool WorkerCore::prepare(Task& task) noexcept {
  assert(task.state == TaskState::idle);
  NsState& ns = *task.ns;
  const uint64_t unit =
      workload_random(settings_.workload) ? ns.picker.pick_random() : ns.picker.pick_sequential();
  if (unit == UnitPicker::kNoUnit) return false;
  task.unit = unit;
  task.lba = unit * ns.blocks_per_io;
  const uint32_t read_percent = settings_.read_percent;
  task.is_read = read_percent == 100 || (read_percent != 0 && rng_.below(100) < read_percent);
  if (settings_.verify) {
    if (task.is_read) {
      // Poison: a read that moves no data must not pass on what the buffer held before.
      std::memset(task.buffer, 0xFF, settings_.io_size_bytes);
    } else {
      ns.last_generation = next_generation(ns.last_generation);
      task.generation = ns.last_generation;
      pattern_fill(task.buffer, ns.block_size, ns.nsid, task.lba, ns.blocks_per_io,
                   task.generation);
    }
  }
  task.state = TaskState::pending;
  return true;
}

void WorkerCore::retire_refused(Task& task, const Error& error) noexcept {
  NsState& ns = *task.ns;
  ++ns.errors;
  ++account_.failed;
  account_.failures.add(true, 0, 0);
  add_live(live_.errors, 1);
  if (report_one_more(g_errors_reported)) {
    NVMF_ERRLOG(nvmf_perf,
                "worker %" PRIu32 ": %s of nsid %" PRIu32 " lba %" PRIu64
                " refused: %s (%s); the task stops",
                params_.index, task.is_read ? "read" : "write", ns.nsid, task.lba,
                errc_name(error.code), error.detail);
  }
  // Whether a refused write changed anything is not known to every transport: distrust it.
  if (settings_.verify && !task.is_read) {
    ns.failed_through[task.unit - ns.picker.slice().first] = task.generation;
  }
  ns.picker.release(task.unit);
  task.state = TaskState::idle;
}

void WorkerCore::stop() noexcept {
  stopping_ = true;
  drop_pending();
}

void WorkerCore::drop_pending() noexcept {
  while (Task* task = pending_.pop_front()) {
    // Never submitted: the unit's data did not change.
    task->ns->picker.release(task->unit);
    task->state = TaskState::idle;
  }
}

bool WorkerCore::stop_due(uint64_t now_ns, uint64_t deadline_ns) const noexcept {
  // -d: every I/O started and none waits for the queue (stop() would drop a pending one).
  const bool ios_done = settings_.number_ios != 0 &&
                        namespaces_started_all_ == namespaces_.size() && pending_.empty();
  return ios_done || now_ns >= deadline_ns ||
         params_.stop_requested->load(std::memory_order_relaxed);
}

void WorkerCore::log_drain_timeout() const noexcept {
  NVMF_ERRLOG(nvmf_perf,
              "worker %" PRIu32 ": %" PRIu32 " I/Os still outstanding %" PRIu64
              " s after the end: abandoning them (they complete as aborted)",
              params_.index, in_flight_, kDrainTimeoutNs / 1000000000);
}

void WorkerCore::record_completion(Task& task, const spec::Status& status) noexcept {
  assert(task.state == TaskState::in_flight);
  NsState& ns = *task.ns;
  --in_flight_;
  task.state = TaskState::idle;
  const size_t slot = task.unit - ns.picker.slice().first;
  // Only completed I/Os count in IOPS, bandwidth and latency; a failed one counts as an error
  // alone (a fast failure would otherwise look like fast I/O).
  if (status.is_success()) {
    ++account_.completed;
    ns.histogram.record(clock_.now_ns() - task.submit_ns);
    ++ns.ios;
    ns.bytes += settings_.io_size_bytes;
    add_live(live_.ios, 1);
    add_live(live_.bytes, settings_.io_size_bytes);
  }
  if (!status.is_success()) {
    ++ns.errors;
    ++account_.failed;
    account_.failures.add(false, status.sct, status.sc);
    add_live(live_.errors, 1);
    // A failed write may or may not have reached the media: old or new data from now on.
    if (settings_.verify && !task.is_read) ns.failed_through[slot] = task.generation;
    if (report_one_more(g_errors_reported)) {
      NVMF_ERRLOG(nvmf_perf,
                  "worker %" PRIu32 ": %s of nsid %" PRIu32 " lba %" PRIu64
                  " failed: %s (SCT %" PRIu8 "h SC %02" PRIx8 "h%s)",
                  params_.index, task.is_read ? "read" : "write", ns.nsid, task.lba,
                  spec::status_name(status), status.sct, status.sc, status.dnr ? ", DNR" : "");
    }
  } else if (settings_.verify) {
    if (task.is_read) {
      check_read(task);
    } else {
      ns.generations[slot] = task.generation;
      ns.failed_through[slot] = kGenerationNone;  // acknowledged: only this data from now on
    }
  }
  ns.picker.release(task.unit);
}

void WorkerCore::check_read(Task& task) noexcept {
  NsState& ns = *task.ns;
  const size_t slot = task.unit - ns.picker.slice().first;
  const uint32_t generation = ns.generations[slot];
  PatternMismatch mismatch;
  if (pattern_check(task.buffer, ns.block_size, ns.nsid, task.lba, ns.blocks_per_io, generation,
                    &mismatch, ns.failed_through[slot])) {
    return;
  }
  ++ns.verify_failures;
  if (report_one_more(g_mismatches_reported)) {
    char expected[64];
    if (generation == kGenerationNone) {
      std::snprintf(expected, sizeof(expected), "zeroes (never written)");
    } else {
      std::snprintf(expected, sizeof(expected), "0x%016" PRIx64 " (generation %" PRIu32 ")",
                    mismatch.expected, generation);
    }
    NVMF_ERRLOG(nvmf_perf,
                "verify failure: nsid %" PRIu32 " lba %" PRIu64 " byte %" PRIu32
                ": expected %s, got 0x%016" PRIx64 " (worker %" PRIu32 ", read of lba %" PRIu64
                " + %" PRIu32 " blocks)",
                ns.nsid, mismatch.lba, mismatch.byte_offset, expected, mismatch.actual,
                params_.index, task.lba, ns.blocks_per_io);
  }
}

std::vector<ResultRow> WorkerCore::rows() const {
  std::vector<ResultRow> rows;
  for (const NsState& ns : namespaces_) {
    ResultRow row;
    row.label = "worker " + std::to_string(params_.index) + " nsid " + std::to_string(ns.nsid);
    row.ios = ns.ios;
    row.bytes = ns.bytes;
    row.errors = ns.errors;
    row.verify_failures = ns.verify_failures;
    row.elapsed_s = elapsed_s();
    row.latency = summarize_latency(ns.histogram);
    rows.push_back(row);
  }
  return rows;
}

void WorkerCore::merge_latency_into(LatencyHistogram* total) const noexcept {
  for (const NsState& ns : namespaces_) total->merge(ns.histogram);
}

double thread_cpu_s() noexcept {
  rusage usage{};
  if (getrusage(RUSAGE_THREAD, &usage) != 0) return 0;
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double WorkerCore::elapsed_s() const noexcept {
  return end_ns_ > start_ns_ ? static_cast<double>(end_ns_ - start_ns_) / 1e9 : 0.0;
}

}  // namespace nvmf::perf
