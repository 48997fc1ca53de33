// nvmf_perf's command line: the options as typed (Options), their check (check_options, a pure
// function so tests need not run the tool), and the settings the run uses (Settings). Enum
// values that the libraries parse (memreg policy, sim profile) stay strings here and are
// checked against name lists, so this piece builds without libnvmf_host.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nvmf::perf {

enum class Workload : uint8_t { read, write, randread, randwrite, rw, randrw };
const char* workload_name(Workload workload) noexcept;
bool workload_parse(std::string_view text, Workload* workload) noexcept;
constexpr bool workload_random(Workload w) noexcept {
  return w == Workload::randread || w == Workload::randwrite || w == Workload::randrw;
}
constexpr bool workload_mixed(Workload w) noexcept {
  return w == Workload::rw || w == Workload::randrw;
}

// --mode: how a worker waits for its completions (RDMA). poll: spins on process_completions()
// (spdk_nvme_perf's way, the default); interrupt: sleeps on the queue pairs' event fds
// whenever a poll finds nothing (IoQpair::wait_for_completions()); adaptive: polls while
// completions come, sleeps once its polls found nothing for --adaptive-idle-us.
enum class CompletionMode : uint8_t { poll, interrupt, adaptive };
const char* completion_mode_name(CompletionMode mode) noexcept;
bool completion_mode_parse(std::string_view text, CompletionMode* mode) noexcept;
// --adaptive-idle-us: shorter than one 4 KiB round trip over rxe at QD 1 (about 75 us in the
// VM, docs/performance.md), longer than the gap between completions of a busy queue (a few us).
inline constexpr uint32_t kAdaptiveIdleUsDefault = 50;

// nvme: an nvme bdev on the in-process register-level NVMe controller model, its data buffers
// shared with the RDMA transport (the zero-copy path of a real SSD, in process).
enum class SimBdevKind : uint8_t { null, malloc, nvme };

// Names the libraries accept (memreg_policy_parse, sim_profile_parse, send_fence_parse); the
// run converts them with those functions, so a drift between the lists is caught at start-up.
inline constexpr const char* kMemregNames[] = {"global", "unsafe", "sagi", "max", "deferred"};
// --memreg-switch-every without --memreg-switch-policies: the policies that never let the
// target reach a buffer after its I/O completed (not unsafe), in the table's order.
inline constexpr const char* kMemregSwitchCycleDefault[] = {"global", "sagi", "max", "deferred"};
inline constexpr const char* kSimProfileNames[] = {"rxe", "mlx5-2017", "mlx5-fenced",
                                                   "adversarial", "mlx5-2017-rare"};
inline constexpr const char* kSimSendFenceNames[] = {"profile", "reads", "key-updates"};
// The one profile whose lag --sim-race-one-in sets (SimOpts::mkey_commit_slow_one_in).
inline constexpr const char* kSimRareProfile = "mlx5-2017-rare";
// --chaos: the faults the sim run can inject (chaos.h says what each one does).
inline constexpr const char* kChaosFaultNames[] = {"qp-error", "drop",        "delay",
                                                   "refuse",   "bdev-error", "async-event"};
// --chaos-every-ms: one fault this often unless told (a few per second keeps a 3 s run busy
// while each reconnect, --reconnect-delay-ms, still has room to finish).
inline constexpr uint32_t kChaosEveryMsDefault = 300;

// The sim target's block size: SPDK's null and malloc bdev default.
inline constexpr uint32_t kSimBlockSizeBytes = 512;
// SPDK's null bdev is typically created with 1 TiB; nothing is stored, so size costs nothing.
inline constexpr uint64_t kSimNullBytesDefault = uint64_t{1} << 40;
// A malloc namespace is RAM: 64 MiB each (SPDK's usual Malloc size) keeps N of them cheap.
inline constexpr uint64_t kSimMallocBytesDefault = uint64_t{64} << 20;
// An NVMe queue of N entries holds N - 1 commands (full when tail + 1 == head).
inline constexpr uint32_t kQueueEntriesMax = 65535;  // ControllerOpts::io_queue_size is 16-bit
// Default I/O queue size when the needed one is smaller (kernel and SPDK default).
inline constexpr uint32_t kIoQueueSizeDefault = 128;
// I/O queue pairs at most, over all workers: a controller has at most 127 I/O queues under
// SPDK's default limit (max_qpairs_per_ctrlr 128, the admin queue included).
inline constexpr uint32_t kIoQpairsMax = 127;
// Worker threads at most: one I/O queue pair each at least, and more threads than that on one
// controller only measure contention.
inline constexpr uint32_t kCoresMax = kIoQpairsMax;
// Namespaces per subsystem at most (TargetOpts::max_namespaces_default range).
inline constexpr uint32_t kNamespacesMax = 1024;

// -r 'trtype:PCIe traddr:model': the PCIe path on the in-process NVMe controller model
// (src/nvme_pcie/model) instead of a VFIO device, so the path runs on a machine without one.
inline constexpr const char* kPcieModelAddress = "model";

// True for a PCI function address in the one form VFIO's sysfs paths use: DDDD:BB:DD.F,
// hexadecimal domain, bus and device (0..1f), function 0..7.
bool pci_address_valid(std::string_view address) noexcept;

// Reads an -r transport ID just far enough to tell the PCIe path from a fabric one. "" and
// *pcie false: not trtype PCIe (the host library parses it later); "" and *pcie true:
// *pci_address is the traddr, lowercase (DDDD:BB:DD.F or kPcieModelAddress); else a one-line
// reason (a bad traddr, a key PCIe does not take, ...). Keys and the trtype value are matched
// without regard to case, as SPDK does.
std::string parse_pcie_trid(std::string_view trid, bool* pcie, std::string* pci_address);

// The command line as typed. `*_given` says whether an option appeared (defaults depend on it).
struct Options {
  std::string trid;                  // -r
  bool sim = false;                  // --sim
  uint32_t queue_depth = 32;         // -q: per namespace per worker
  uint32_t io_size_bytes = 4096;     // -o
  std::string workload;              // -w
  uint32_t read_percent = 50;        // -M
  bool read_percent_given = false;
  uint32_t time_s = 10;              // -t
  uint64_t number_ios = 0;           // -d; 0 = no limit
  uint32_t cores = 1;                // -c
  uint32_t qpairs_per_worker = 1;    // -P
  bool qpairs_per_worker_given = false;
  uint32_t ns_count = 0;             // --ns-count; 0 = not given
  bool ns_count_given = false;
  std::string sim_bdev;              // --sim-bdev; empty = not given
  std::string sim_profile;           // --sim-profile; empty = not given (rxe)
  std::string sim_remote_invalidate; // --sim-remote-invalidate; empty = not given (on)
  std::string sim_payload;           // --sim-payload; empty = not given (copy)
  std::string sim_send_fence;        // --sim-send-fence
  bool sim_send_fence_given = false;
  uint32_t sim_race_one_in = 0;      // --sim-race-one-in
  bool sim_race_one_in_given = false;
  uint64_t sim_bdev_size_mib = 0;    // --sim-bdev-size-mib; 0 = not given
  std::string memreg = "global";     // --memreg
  bool memreg_given = false;
  double memreg_switch_every_s = 0;  // --memreg-switch-every
  bool memreg_switch_every_given = false;
  uint64_t memreg_switch_every_ios = 0;  // --memreg-switch-every-ios
  bool memreg_switch_every_ios_given = false;
  std::string memreg_switch_policies;  // --memreg-switch-policies, as typed
  bool memreg_switch_policies_given = false;
  bool verify = false;               // --verify
  std::string json_path;             // --json
  std::string log_level = "notice";  // --log-level
  uint32_t io_queue_size = 0;        // --io-queue-size; 0 = not given
  uint64_t seed = 1;                 // --seed: random offsets and the sim's choices
  uint32_t reconnect_delay_ms = 1000;      // --reconnect-delay-ms
  bool reconnect_delay_given = false;
  uint32_t ctrl_loss_timeout_ms = 600000;  // --ctrl-loss-timeout-ms
  bool ctrl_loss_timeout_given = false;
  uint32_t io_timeout_ms = 30000;          // --io-timeout-ms (ControllerOpts' default)
  bool io_timeout_given = false;
  uint32_t fast_io_fail_ms = 0;            // --fast-io-fail-ms; off unless given
  bool fast_io_fail_given = false;
  std::string chaos;                 // --chaos, as typed (comma-separated fault names)
  uint32_t chaos_every_ms = kChaosEveryMsDefault;  // --chaos-every-ms
  bool chaos_every_given = false;
  std::string mode;                  // --mode; empty = not given (poll)
  uint32_t adaptive_idle_us = kAdaptiveIdleUsDefault;  // --adaptive-idle-us
  bool adaptive_idle_given = false;
};

// What the run uses, every default resolved.
struct Settings {
  bool sim = false;
  std::string trid;  // empty with sim (the sim target's address is used)
  // -r 'trtype:PCIe traddr:...': a local controller through src/nvme_pcie, no fabric.
  bool pcie = false;
  std::string pci_address;  // with pcie: DDDD:BB:DD.F (lowercase) or kPcieModelAddress
  bool pcie_model() const noexcept { return pcie && pci_address == kPcieModelAddress; }
  Workload workload = Workload::read;
  uint32_t read_percent = 100;  // of I/Os that are reads: 100 read*, 0 write*, -M for mixes
  uint32_t queue_depth = 32;
  uint32_t io_size_bytes = 4096;
  uint32_t time_s = 10;
  // -d, spdk_nvme_perf's --number-ios: each worker submits this many I/Os on each namespace
  // and the run ends when they are done, or at -t if that comes first; 0 = -t alone. A run of
  // so many I/Os does the same work on a loaded machine as on an idle one, only slower.
  uint64_t number_ios = 0;
  uint32_t cores = 1;
  // -P, spdk_nvme_perf's: I/O queue pairs per worker. The worker's tasks (-q per namespace)
  // go to them in turn, task k to queue pair k mod P, and stay there: each queue pair holds
  // its share at once (spdk_nvme_perf sends each I/O to the next queue pair instead, so a slow
  // one collects more than its share). All namespaces share them, as they share the worker's
  // one queue pair without -P. RDMA only.
  uint32_t qpairs_per_worker = 1;
  uint32_t io_qpairs() const noexcept { return cores * qpairs_per_worker; }  // every worker's
  uint32_t ns_count = 0;  // 0 = every active namespace (not sim, not the PCIe model)
  SimBdevKind sim_bdev = SimBdevKind::null;
  // Each sim namespace; with the PCIe model each model namespace (kSimMallocBytesDefault).
  uint64_t sim_bdev_bytes = kSimNullBytesDefault;
  std::string sim_profile = "rxe";
  bool sim_remote_invalidate = true;
  // --sim-payload skip: the sim moves no payload of the workers' RDMA READs and WRITEs
  // (SimProvider::skip_payloads on their buffers); refused with --verify.
  bool sim_payload_skip = false;
  // What IBV_SEND_FENCE waits for in the sim (SimOpts::send_fence): profile, reads or
  // key-updates.
  std::string sim_send_fence = "profile";
  // mlx5-2017-rare: one BIND_MW / LOCAL_INV in this many lags (SimOpts::mkey_commit_slow_one_in);
  // 0 = the sim's default. Always 0 with the other profiles.
  uint32_t sim_race_one_in = 0;
  std::string memreg = "global";  // RDMA only; with memreg switching the cycle's first
  // --memreg-switch-every: every this many seconds each worker asks its queue pairs for the
  // next policy of memreg_switch_policies (after the last, the first again); 0 = never.
  double memreg_switch_every_s = 0;
  // --memreg-switch-every-ios: instead, each queue pair is asked for its next policy each time
  // this many more I/Os completed on it (IoQpairStats::completed); 0 = never. At most one of
  // the two is set.
  uint64_t memreg_switch_every_ios = 0;
  bool memreg_switching() const noexcept {
    return memreg_switch_every_s > 0 || memreg_switch_every_ios > 0;
  }
  std::vector<std::string> memreg_switch_policies;  // the cycle (names from kMemregNames)
  bool verify = false;
  std::string json_path;
  std::string log_level = "notice";
  uint32_t io_queue_size = 0;  // 0 = io_queue_entries() decides once ns_count is known
  uint64_t seed = 1;
  uint32_t reconnect_delay_ms = 1000;
  uint32_t ctrl_loss_timeout_ms = 600000;
  uint32_t io_timeout_ms = 30000;
  bool fast_io_fail = false;  // fast_io_fail_ms applies (else ControllerOpts' kFastIoFailOff)
  uint32_t fast_io_fail_ms = 0;
  // --chaos (sim only): the faults to inject, names from kChaosFaultNames, each once; empty:
  // none. One of them every chaos_every_ms, drawn from --seed.
  std::vector<std::string> chaos_faults;
  uint32_t chaos_every_ms = kChaosEveryMsDefault;
  CompletionMode mode = CompletionMode::poll;  // --mode (RDMA only)
  uint32_t adaptive_idle_us = kAdaptiveIdleUsDefault;  // with mode adaptive
};

// Checks the options and resolves the defaults. Returns "" and fills *settings, or a one-line
// reason that names the option (the tool prints it and exits 2).
std::string check_options(const Options& options, Settings* settings);

// Commands each of a worker's I/O queue pairs holds at most: every namespace's -q commands
// share the worker's `qpairs` queue pairs, task k on queue pair k mod qpairs.
constexpr uint64_t io_qpair_commands(uint32_t queue_depth, uint32_t ns_count,
                                     uint32_t qpairs) noexcept {
  return (uint64_t{queue_depth} * ns_count + qpairs - 1) / qpairs;
}
// Entries each I/O queue needs: its commands, plus the one slot an NVMe queue always leaves
// empty.
constexpr uint64_t io_queue_entries_needed(uint32_t queue_depth, uint32_t ns_count,
                                           uint32_t qpairs = 1) noexcept {
  return io_qpair_commands(queue_depth, ns_count, qpairs) + 1;
}
// The queue size to ask for with `ns_count` namespaces: --io-queue-size, or the needed size but
// at least kIoQueueSizeDefault. "" or a reason (too large, smaller than needed, or fewer
// commands per worker than -P queue pairs to give them to).
std::string io_queue_entries(const Settings& settings, uint32_t ns_count, uint32_t* entries);

// Parses argv into *options. Returns 0 (run), 1 (help was printed: exit 0) or 2 (*error holds
// one line: exit 2). Checks only what CLI11 checks (syntax, numbers); then call check_options.
int parse_command_line(int argc, const char* const* argv, Options* options, std::string* error);

}  // namespace nvmf::perf
