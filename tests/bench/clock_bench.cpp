// What a read of each time source costs on this machine: the stack reads a clock on every
// reactor iteration and for every bdev I/O (common/clock.h), which is about 20 ns through the
// vDSO but a system call and an emulated device read in a guest whose clocksource user space
// cannot read (QEMU's TCG guests run on the HPET). A plain system call is the yardstick.
// Also what a context switch costs between two threads of one process and between two
// processes: an interrupt-mode nvmf_tgt sharing a CPU with the host's fio is switched to and
// from a process, where nvmet's work runs in softirq and kernel threads, which borrow the
// address space they interrupt. Under QEMU's TCG, loading another address space flushes the
// vCPU's whole software TLB.
// tests/vm/scenarios/probe_clock.sh runs it inside the VM guest.
#include <benchmark/benchmark.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <thread>

#include "common/clock.h"

namespace {

void BM_ClockGettimeMonotonic(benchmark::State& state) {
  timespec now{};
  for (auto _ : state) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    benchmark::DoNotOptimize(now);
  }
}
BENCHMARK(BM_ClockGettimeMonotonic);

void BM_ClockGettimeMonotonicCoarse(benchmark::State& state) {
  timespec now{};
  for (auto _ : state) {
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    benchmark::DoNotOptimize(now);
  }
}
BENCHMARK(BM_ClockGettimeMonotonicCoarse);

// The reactors' and bdevs' default clock: the TSC where the CPU reports an invariant one,
// else CLOCK_MONOTONIC (the label says which).
void BM_TscClockNow(benchmark::State& state) {
  const nvmf::TscClock& clock = nvmf::TscClock::instance();
  for (auto _ : state) benchmark::DoNotOptimize(clock.now_ns());
  state.SetLabel(clock.using_tsc() ? "tsc" : "CLOCK_MONOTONIC fallback");
}
BENCHMARK(BM_TscClockNow);

void BM_SystemCall(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(syscall(SYS_getppid));
}
BENCHMARK(BM_SystemCall);

// The peer's side of the ping-pong: echo each byte from `in` to `out` until `in` closes.
void echo_bytes(int in, int out) noexcept {
  char byte = 0;
  while (read(in, &byte, 1) == 1) {
    if (write(out, &byte, 1) != 1) break;
  }
}

// One byte to a peer and back through two pipes, both sides pinned to one CPU, so each
// iteration is two context switches (and four system calls): Arg 0 the peer is a thread of
// this process, Arg 1 a child process.
void BM_PipeRoundTripOneCpu(benchmark::State& state) {
  const bool peer_is_process = state.range(0) != 0;
  state.SetLabel(peer_is_process ? "processes" : "threads");
  cpu_set_t saved;
  if (sched_getaffinity(0, sizeof(saved), &saved) != 0) {
    state.SkipWithError("sched_getaffinity failed");
    return;
  }
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved)) ++cpu;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  int to_peer[2];
  int from_peer[2];
  if (sched_setaffinity(0, sizeof(one), &one) != 0 || pipe(to_peer) != 0) {
    state.SkipWithError("cannot pin or make a pipe");
    return;
  }
  if (pipe(from_peer) != 0) {
    close(to_peer[0]);
    close(to_peer[1]);
    state.SkipWithError("pipe failed");
    return;
  }
  // Both inherit the affinity just set.
  std::thread thread;
  pid_t child = -1;
  if (peer_is_process) {
    child = fork();
    if (child == 0) {
      close(to_peer[1]);
      close(from_peer[0]);
      echo_bytes(to_peer[0], from_peer[1]);
      _exit(0);
    }
  } else {
    thread = std::thread([&] { echo_bytes(to_peer[0], from_peer[1]); });
  }
  char byte = 1;
  const bool forked = !peer_is_process || child > 0;
  for (auto _ : state) {
    if (!forked || write(to_peer[1], &byte, 1) != 1 || read(from_peer[0], &byte, 1) != 1) {
      state.SkipWithError(forked ? "the ping-pong failed" : "fork failed");
      break;  // Google Benchmark: after SkipWithError inside the loop, leave it
    }
  }
  close(to_peer[1]);  // the peer reads end-of-file and stops
  if (thread.joinable()) thread.join();
  if (child > 0) waitpid(child, nullptr, 0);
  close(to_peer[0]);
  close(from_peer[0]);
  close(from_peer[1]);
  sched_setaffinity(0, sizeof(saved), &saved);
}
BENCHMARK(BM_PipeRoundTripOneCpu)->Arg(0)->Arg(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
