// The whole stack on one core: libnvmf_host -> sim HCA -> RDMA target transport -> target core
// -> null bdev and back, 4 KiB random I/O, everything polled from this thread (the target's
// reactor through a ReactorHarness), so a run is the same sequence of calls every time.
// items_per_second = I/Os per second of one core doing all three jobs; under
// `valgrind --tool=callgrind` it gives instructions per I/O for each side
// (tools/bench/callgrind-per-io.sh). Never pass/fail on time.
//
// By default reads at queue depth 128 with the `global` policy on `rxe`. Flags after the
// benchmark's own choose another stack and a fixed count of I/Os (one iteration):
//   --memreg=POLICY --sim-profile=PROFILE --remote-invalidate=on|off --read-percent=N
//   --queue-depth=N --ios=N
#include <benchmark/benchmark.h>
#include <valgrind/callgrind.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bdev/null_bdev.h"
#include "nvmf/host.h"
#include "reactor/harness.h"
#include "target/target.h"
#include "transport_rdma/target_transport.h"
#include "verbs/sim/sim.h"

namespace nvmf {
namespace {

constexpr const char* kNqn = "nqn.2026-01.io.nvmf:bench";
constexpr uint32_t kBlockBytes = 512;
constexpr uint32_t kIoBytes = 4096;

// A run of --ios that stops completing I/Os (a queue pair that failed waits for a reconnect
// delay on the harness's clock, which stands still) gives up after this many rounds per I/O:
// a QD1 I/O needs about three.
constexpr uint64_t kRoundsPerIoMax = 64;

// The stack and the load; the defaults are the benchmark docs/performance.md quotes.
struct StackParams {
  host::MemregPolicy memreg = host::MemregPolicy::global;
  verbs::sim::SimProfile profile = verbs::sim::SimProfile::rxe;
  bool remote_invalidate = true;
  uint32_t read_percent = 100;
  uint32_t depth = 128;
  uint64_t ios = 0;    // 0: as many as the benchmark's time allows; else exactly this many
  bool given = false;  // any flag given: register the configured run instead of the default
};

struct Stack {
  reactor::ReactorHarness harness{1};
  std::unique_ptr<verbs::sim::SimProvider> target_provider, host_provider;
  std::unique_ptr<bdev::Bdev> null;
  std::unique_ptr<target::Target> target;
  std::unique_ptr<transport_rdma::RdmaTargetTransport> transport;
  std::unique_ptr<host::Host> host;
  std::unique_ptr<host::Controller> controller;
  std::unique_ptr<host::IoQpair> qpair;
  host::Namespace* ns = nullptr;

  static void pump(void* ctx) { static_cast<Stack*>(ctx)->harness.poll_round(); }

  bool setup(const StackParams& params) {
    const uint32_t depth = params.depth;
    verbs::sim::SimOpts sim_opts;
    sim_opts.profile = params.profile;
    sim_opts.clock = &harness.clock();
    auto provider = verbs::sim::SimProvider::create(sim_opts);
    if (!provider) return false;
    target_provider = std::move(*provider);
    auto peer = target_provider->create_peer("sim1");
    if (!peer) return false;
    host_provider = std::move(*peer);

    bdev::NullBdevOpts null_opts;
    null_opts.name = "Null0";
    null_opts.block_size_bytes = kBlockBytes;
    null_opts.block_count = uint64_t{1} << 31;  // 1 TiB
    null_opts.queue_depth_max = 1024;
    null_opts.clock = &harness.clock();
    auto made = bdev::create_null_bdev(null_opts);
    if (!made) return false;
    null = std::move(*made);
    target::TargetOpts target_opts;
    target_opts.max_queue_depth = 1024;
    auto created = target::Target::create(target_opts);
    if (!created) return false;
    target = std::move(*created);
    target::SubsystemOpts subsystem;
    subsystem.nqn = kNqn;
    subsystem.allow_any_host = true;
    if (!target->add_subsystem(subsystem)) return false;
    target::NamespaceOpts ns_opts;
    ns_opts.bdev = null.get();
    if (!target->add_namespace(kNqn, ns_opts)) return false;
    transport_rdma::RdmaTargetOpts transport_opts;
    transport_opts.limits.max_queue_depth = 1024;
    // The harness's FakeClock stands still: a timed acceptor would never run again. The sim's
    // empty CM channel costs a few instructions a round (no system call).
    transport_opts.acceptor_poll_period_us = 0;
    transport_opts.send_with_invalidate = params.remote_invalidate
                                              ? transport_rdma::SendWithInvalidate::automatic
                                              : transport_rdma::SendWithInvalidate::off;
    auto rdma = transport_rdma::RdmaTargetTransport::create(*target_provider, *target,
                                                            {&harness.reactor(0)}, transport_opts);
    if (!rdma) return false;
    transport = std::move(*rdma);
    if (!transport->listen("10.0.0.1", 4420)) return false;

    host::HostOpts host_opts;
    host_opts.provider = host_provider.get();
    host_opts.idle = &Stack::pump;
    host_opts.idle_ctx = this;
    host_opts.clock = &harness.clock();
    auto made_host = host::Host::create(host_opts);
    if (!made_host) return false;
    host = std::move(*made_host);
    host::TransportId trid;
    trid.traddr = "10.0.0.1";
    trid.subnqn = kNqn;
    host::ControllerOpts ctrl_opts;
    ctrl_opts.keep_alive_timeout_ms = 0;
    ctrl_opts.io_queue_size = static_cast<uint16_t>(depth + 1);
    ctrl_opts.memreg = params.memreg;
    std::string message;
    auto connected = host->connect(trid, ctrl_opts, &message);
    if (!connected) {
      std::fprintf(stderr, "connect: %s\n", message.c_str());
      return false;
    }
    controller = std::move(*connected);
    auto allocated = controller->alloc_io_qpair({}, &message);
    if (!allocated) {
      std::fprintf(stderr, "alloc_io_qpair: %s\n", message.c_str());
      return false;
    }
    qpair = std::move(*allocated);
    ns = controller->ns(1);
    return ns != nullptr && qpair->depth() >= depth;
  }

  void teardown() {
    qpair.reset();
    if (controller) (void)controller->disconnect();
    controller.reset();
    if (transport) {
      transport->begin_shutdown();
      for (int i = 0; i < 100000 && !transport->drained(); ++i) harness.poll_round();
      harness.poll_until_idle();
    }
    transport.reset();
    host.reset();
    target.reset();
  }
};

struct Task {
  Stack* stack = nullptr;
  void* buffer = nullptr;
  uint64_t* completed = nullptr;
  uint64_t* rng = nullptr;
  const bool* stopping = nullptr;
  uint32_t read_percent = 100;
  bool failed = false;
};

uint64_t xorshift(uint64_t* state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return x;
}

uint64_t next_lba(uint64_t* state) {
  return (xorshift(state) % ((uint64_t{1} << 31) / (kIoBytes / kBlockBytes))) *
         (kIoBytes / kBlockBytes);
}

void submit(Task& task);

void on_done(void* ctx, const spec::Status& status) {
  auto& task = *static_cast<Task*>(ctx);
  if (*task.stopping) return;  // aborted by the final disconnect
  ++*task.completed;
  if (!status.is_success()) task.failed = true;
  submit(task);
}

void submit(Task& task) {
  const uint64_t lba = next_lba(task.rng);
  const bool is_read = task.read_percent == 100 || xorshift(task.rng) % 100 < task.read_percent;
  host::Namespace& ns = *task.stack->ns;
  auto submitted =
      is_read
          ? ns.read(*task.stack->qpair, task.buffer, lba, kIoBytes / kBlockBytes, &on_done, &task)
          : ns.write(*task.stack->qpair, task.buffer, lba, kIoBytes / kBlockBytes, &on_done, &task);
  if (!submitted) task.failed = true;
}

void run_full_stack(benchmark::State& state, const StackParams& params) {
  const uint32_t depth = params.depth;
  Stack stack;
  if (!stack.setup(params)) {
    state.SkipWithError("stack setup failed");
    return;
  }
  uint64_t completed = 0;
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  bool stopping = false;
  std::vector<Task> tasks(depth);
  for (Task& task : tasks) {
    task.stack = &stack;
    task.buffer = stack.host->dma_alloc(kIoBytes);
    task.completed = &completed;
    task.rng = &rng;
    task.stopping = &stopping;
    task.read_percent = params.read_percent;
  }
  for (Task& task : tasks) submit(task);
  uint64_t start = completed;
  // Under `valgrind --tool=callgrind --collect-atstart=no` only the loop is measured (the
  // macros cost nothing outside valgrind).
  uint64_t rounds = 0;
  CALLGRIND_TOGGLE_COLLECT;
  for (auto _ : state) {
    // One round: the host reaps and resubmits, the target's reactor runs once. With --ios
    // the one iteration runs rounds until that many I/Os completed.
    const uint64_t rounds_max = rounds + params.ios * kRoundsPerIoMax;
    do {
      stack.qpair->process_completions();
      stack.harness.poll_round();
      ++rounds;
    } while (completed - start < params.ios && rounds < rounds_max);
  }
  CALLGRIND_TOGGLE_COLLECT;
  const uint64_t ios = completed - start;
  std::printf("measured_ios %llu\n", static_cast<unsigned long long>(ios));
  stopping = true;
  stack.qpair->disconnect();
  bool failed = false;
  for (Task& task : tasks) failed = failed || task.failed;
  for (Task& task : tasks) stack.host->dma_free(task.buffer);
  stack.teardown();
  state.counters["ios"] = static_cast<double>(ios);
  state.counters["IOPS"] = benchmark::Counter(static_cast<double>(ios), benchmark::Counter::kIsRate);
  state.counters["rounds_per_io"] =
      ios == 0 ? 0.0 : static_cast<double>(rounds) / static_cast<double>(ios);
  if (failed) state.SkipWithError("an I/O failed (aborted ones at the final disconnect aside)");
  if (ios < params.ios) state.SkipWithError("the I/Os stalled before --ios completed");
}

void BM_RandRead4kFullStack(benchmark::State& state) {
  StackParams params;
  params.depth = static_cast<uint32_t>(state.range(0));
  run_full_stack(state, params);
}
// UseRealTime: IOPS per wall-clock second (kIsRate divides by the benchmark's time, CPU time
// without it), comparable with nvmf_perf's; a run the machine's other work preempts shows it.
BENCHMARK(BM_RandRead4kFullStack)->Arg(128)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Reads "--name=VALUE" flags into *params. "" or the reason (the flag named).
std::string parse_stack_flags(int argc, char** argv, StackParams* params) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : arg.substr(equals + 1);
    char* end = nullptr;
    const unsigned long long number = std::strtoull(value.c_str(), &end, 10);
    const bool is_number = !value.empty() && *end == '\0';
    bool ok = true;
    if (name == "--memreg") {
      ok = host::memreg_policy_parse(value, &params->memreg);
    } else if (name == "--sim-profile") {
      ok = verbs::sim::sim_profile_parse(value.c_str(), &params->profile);
    } else if (name == "--remote-invalidate") {
      ok = value == "on" || value == "off";
      params->remote_invalidate = value == "on";
    } else if (name == "--read-percent") {
      ok = is_number && number <= 100;
      params->read_percent = static_cast<uint32_t>(number);
    } else if (name == "--queue-depth") {
      ok = is_number && number >= 1 && number <= 1023;  // the target's depth limit, less one
      params->depth = static_cast<uint32_t>(number);
    } else if (name == "--ios") {
      ok = is_number && number >= 1;
      params->ios = number;
    } else {
      return "unknown flag " + arg;
    }
    if (!ok) return "bad value in " + arg;
    params->given = true;
  }
  return "";
}

}  // namespace
}  // namespace nvmf

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);  // takes the --benchmark_* flags out of argv
  nvmf::StackParams params;
  const std::string error = nvmf::parse_stack_flags(argc, argv, &params);
  if (!error.empty()) {
    std::fprintf(stderr,
                 "host_stack_bench: %s (flags: --memreg= --sim-profile= "
                 "--remote-invalidate=on|off --read-percent= --queue-depth= --ios=)\n",
                 error.c_str());
    return 2;
  }
  if (params.given) {
    // The configured stack instead of the default benchmark.
    benchmark::ClearRegisteredBenchmarks();
    auto* configured = benchmark::RegisterBenchmark(
        "BM_FullStack", [params](benchmark::State& state) { nvmf::run_full_stack(state, params); });
    configured->Unit(benchmark::kMicrosecond)->UseRealTime();
    if (params.ios != 0) configured->Iterations(1);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
