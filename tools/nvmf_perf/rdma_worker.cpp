#include "worker.h"

#include <cinttypes>
#include <cstring>

#include "common/log.h"

NVMF_LOG_COMPONENT_DECLARE(nvmf_perf);

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

Worker::NsState::NsState(host::Namespace* ns_in, uint32_t blocks, UnitSlice slice, bool verify,
                         uint64_t seed)
    : ns(ns_in),
      nsid(ns_in->id()),
      block_size(ns_in->block_size()),
      blocks_per_io(blocks),
      picker(slice, verify, seed),
      generations(verify ? slice.count : 0, kGenerationNone) {}

Worker::Worker(const WorkerParams& params)
    : params_(params),
      settings_(*params.settings),
      rng_(params.settings->seed ^ (uint64_t{params.index} << 48)) {}

Worker::~Worker() { teardown(); }

std::string Worker::setup(bool* usage_error) {
  *usage_error = false;
  const Settings& s = settings_;
  const std::string who = "worker " + std::to_string(params_.index) + ": ";
  namespaces_.reserve(params_.namespaces.size());
  for (host::Namespace* ns : params_.namespaces) {
    const uint32_t blocks = s.io_size_bytes / ns->block_size();  // main checked divisibility
    uint64_t units = ns->block_count() / blocks;
    if (s.verify) units = std::min(units, kVerifyUnitsMax);
    const UnitSlice slice =
        s.verify ? worker_slice(units, params_.index, params_.workers) : UnitSlice{0, units};
    // With --verify a task picks a unit no other task of the worker has in flight: the slice
    // must hold at least -q units (a completing task releases its unit before picking).
    if (slice.count < s.queue_depth) {
      *usage_error = true;
      return who + "namespace " + std::to_string(ns->id()) + " is too small for --verify with -q " +
             std::to_string(s.queue_depth) + " -c " + std::to_string(params_.workers) +
             ": each worker's share holds " + std::to_string(slice.count) + " I/Os of -o " +
             std::to_string(s.io_size_bytes) + " (lower -q, -c or -o)";
    }
    namespaces_.emplace_back(ns, blocks, slice, s.verify,
                             picker_seed(s.seed, params_.index, ns->id()));
  }

  {
    std::lock_guard<std::mutex> lock(*params_.controller_mutex);
    std::string message;
    host::IoQpairOpts opts;
    opts.queue_size = params_.queue_entries;
    auto qpair = params_.controller->alloc_io_qpair(opts, &message);
    if (!qpair) {
      return who + "cannot allocate an I/O qpair: " +
             (message.empty() ? std::string(errc_name(qpair.error().code)) : message);
    }
    qpair_ = std::move(*qpair);
  }
  const uint64_t needed = uint64_t{s.queue_depth} * namespaces_.size();
  if (qpair_->depth() < needed) {
    *usage_error = true;
    return who + "the target granted I/O queues of depth " + std::to_string(qpair_->depth()) +
           "; -q " + std::to_string(s.queue_depth) + " x " + std::to_string(namespaces_.size()) +
           " namespaces needs " + std::to_string(needed) +
           " (all namespaces share a worker's queue): lower -q or --ns-count";
  }

  tasks_.reserve(needed);
  for (NsState& ns : namespaces_) {
    for (uint32_t i = 0; i < s.queue_depth; ++i) {
      void* buffer = params_.host->dma_alloc(s.io_size_bytes);
      if (buffer == nullptr) {
        return who + "Host::dma_alloc(" + std::to_string(s.io_size_bytes) + ") failed after " +
               std::to_string(tasks_.size()) + " buffers: lower -q, -o, -c or --ns-count";
      }
      std::memset(buffer, 0, s.io_size_bytes);
      Task task;
      task.worker = this;
      task.ns = &ns;
      task.buffer = static_cast<uint8_t*>(buffer);
      tasks_.push_back(task);
    }
  }
  return "";
}

void Worker::run(uint64_t deadline_ns, const Ticker& ticker) noexcept {
  const Clock& clock = *params_.clock;
  start_ns_ = clock.now_ns();
  for (Task& task : tasks_) start(task);
  uint64_t drain_deadline_ns = 0;
  for (;;) {
    qpair_->process_completions();
    const uint64_t now = clock.now_ns();
    if (!stopping_ &&
        (now >= deadline_ns || params_.stop_requested->load(std::memory_order_relaxed))) {
      stopping_ = true;
      drop_pending();
      drain_deadline_ns = now + kDrainTimeoutNs;
    }
    if (!stopping_) retry_pending();
    if (ticker.tick != nullptr) ticker.tick(ticker.ctx, now);
    if (stopping_ && in_flight_ == 0) break;
    if (stopping_ && now >= drain_deadline_ns) {
      NVMF_ERRLOG(nvmf_perf,
                  "worker %" PRIu32 ": %" PRIu32 " I/Os still outstanding %" PRIu64
                  " s after the end: disconnecting the qpair (they complete as aborted)",
                  params_.index, in_flight_, kDrainTimeoutNs / 1000000000);
      qpair_->disconnect();
      break;
    }
  }
  end_ns_ = clock.now_ns();
}

bool Worker::start(Task& task) noexcept {
  NsState& ns = *task.ns;
  const uint64_t unit = workload_random(settings_.workload) ? ns.picker.pick_random()
                                                             : ns.picker.pick_sequential();
  if (unit == UnitPicker::kNoUnit) return false;  // setup() made the slices large enough
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
  if (!try_submit(task)) pending_.push_back(task);
  return true;
}

bool Worker::try_submit(Task& task) noexcept {
  NsState& ns = *task.ns;
  task.submit_ns = params_.clock->now_ns();
  const Result<void> submitted =
      task.is_read ? ns.ns->read(*qpair_, task.buffer, task.lba, ns.blocks_per_io, &on_complete,
                                 &task)
                   : ns.ns->write(*qpair_, task.buffer, task.lba, ns.blocks_per_io,
                                  &on_complete, &task);
  if (submitted) {
    ++in_flight_;
    return true;
  }
  switch (submitted.error().code) {
    case Errc::busy:
      ++busy_retries_;
      return false;
    case Errc::bad_state:
    case Errc::disconnected:
      // The qpair is down (the controller is reconnecting it): try again after a poll.
      return false;
    default:
      // Refused for good (a range or buffer the library rejects): retrying cannot help, so
      // count an error and retire the task instead of spinning on it.
      ++ns.errors;
      add_live(live_.errors, 1);
      if (report_one_more(g_errors_reported)) {
        NVMF_ERRLOG(nvmf_perf,
                    "worker %" PRIu32 ": %s of nsid %" PRIu32 " lba %" PRIu64
                    " refused: %s (%s); the task stops",
                    params_.index, task.is_read ? "read" : "write", ns.nsid, task.lba,
                    errc_name(submitted.error().code), submitted.error().detail);
      }
      if (settings_.verify && !task.is_read) {
        ns.generations[task.unit - ns.picker.slice().first] = kGenerationUnknown;
      }
      ns.picker.release(task.unit);
      return true;
  }
}

void Worker::retry_pending() noexcept {
  while (!pending_.empty()) {
    Task* task = pending_.pop_front();
    if (!try_submit(*task)) {
      pending_.push_front(*task);  // still full: keep the order, try after the next poll
      return;
    }
  }
}

void Worker::drop_pending() noexcept {
  while (Task* task = pending_.pop_front()) {
    // Never submitted: the unit's data did not change.
    task->ns->picker.release(task->unit);
  }
}

void Worker::on_complete(void* ctx, const spec::Status& status) noexcept {
  auto* task = static_cast<Task*>(ctx);
  task->worker->complete(*task, status);
}

void Worker::complete(Task& task, const spec::Status& status) noexcept {
  NsState& ns = *task.ns;
  --in_flight_;
  ns.histogram.record(params_.clock->now_ns() - task.submit_ns);
  ++ns.ios;
  ns.bytes += settings_.io_size_bytes;
  add_live(live_.ios, 1);
  add_live(live_.bytes, settings_.io_size_bytes);
  const size_t slot = task.unit - ns.picker.slice().first;
  if (!status.is_success()) {
    ++ns.errors;
    add_live(live_.errors, 1);
    // A failed write may or may not have reached the media: the unit's content is unknown.
    if (settings_.verify && !task.is_read) ns.generations[slot] = kGenerationUnknown;
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
    }
  }
  ns.picker.release(task.unit);
  if (!stopping_) start(task);
}

void Worker::check_read(Task& task) noexcept {
  NsState& ns = *task.ns;
  const uint32_t generation = ns.generations[task.unit - ns.picker.slice().first];
  PatternMismatch mismatch;
  if (pattern_check(task.buffer, ns.block_size, ns.nsid, task.lba, ns.blocks_per_io, generation,
                    &mismatch)) {
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

void Worker::teardown() noexcept {
  stopping_ = true;  // callbacks of a disconnect must not start new I/O
  pending_.clear();
  if (qpair_) {
    qpair_stats_ = qpair_->stats();  // the counters go with the qpair
    std::lock_guard<std::mutex> lock(*params_.controller_mutex);
    qpair_.reset();
  }
  for (Task& task : tasks_) {
    if (task.buffer != nullptr) {
      params_.host->dma_free(task.buffer);
      task.buffer = nullptr;
    }
  }
}

std::vector<ResultRow> Worker::rows() const {
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

void Worker::merge_latency_into(LatencyHistogram* total) const noexcept {
  for (const NsState& ns : namespaces_) total->merge(ns.histogram);
}

double Worker::elapsed_s() const noexcept {
  return end_ns_ > start_ns_ ? static_cast<double>(end_ns_ - start_ns_) / 1e9 : 0.0;
}

}  // namespace nvmf::perf
