#include "options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <vector>

namespace nvmf::perf {

namespace {

constexpr const char* kWorkloadNames[] = {"read", "write", "randread", "randwrite", "rw", "randrw"};
constexpr const char* kCompletionModeNames[] = {"poll", "interrupt", "adaptive"};

template <size_t N>
bool is_one_of(const std::string& text, const char* const (&names)[N]) {
  return std::any_of(std::begin(names), std::end(names),
                     [&](const char* name) { return text == name; });
}

template <size_t N>
std::string join(const char* const (&names)[N]) {
  std::string joined;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) joined += i + 1 == N ? " or " : ", ";
    joined += names[i];
  }
  return joined;
}

std::vector<std::string_view> split_whitespace(std::string_view text) {
  std::vector<std::string_view> words;
  constexpr std::string_view kWhitespace = " \t\r\n\v\f";
  size_t position = 0;
  while (true) {
    const size_t begin = text.find_first_not_of(kWhitespace, position);
    if (begin == std::string_view::npos) return words;
    position = std::min(text.find_first_of(kWhitespace, begin), text.size());
    words.push_back(text.substr(begin, position - begin));
  }
}

std::string lowercase(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

}  // namespace

const char* workload_name(Workload workload) noexcept {
  return kWorkloadNames[static_cast<size_t>(workload)];
}

bool workload_parse(std::string_view text, Workload* workload) noexcept {
  for (size_t i = 0; i < std::size(kWorkloadNames); ++i) {
    if (text == kWorkloadNames[i]) {
      *workload = static_cast<Workload>(i);
      return true;
    }
  }
  return false;
}

const char* completion_mode_name(CompletionMode mode) noexcept {
  return kCompletionModeNames[static_cast<size_t>(mode)];
}

bool completion_mode_parse(std::string_view text, CompletionMode* mode) noexcept {
  for (size_t i = 0; i < std::size(kCompletionModeNames); ++i) {
    if (text == kCompletionModeNames[i]) {
      *mode = static_cast<CompletionMode>(i);
      return true;
    }
  }
  return false;
}

bool pci_address_valid(std::string_view address) noexcept {
  // DDDD:BB:DD.F, 12 characters.
  static constexpr std::string_view kShape = "hhhh:hh:hh.f";
  if (address.size() != kShape.size()) return false;
  for (size_t i = 0; i < kShape.size(); ++i) {
    const char c = address[i];
    const char want = kShape[i];
    const bool ok = want == 'h' ? std::isxdigit(static_cast<unsigned char>(c)) != 0
                    : want == 'f' ? c >= '0' && c <= '7'
                                  : c == want;
    if (!ok) return false;
  }
  // The device number has five bits.
  const int device_high = std::tolower(static_cast<unsigned char>(address[8]));
  return device_high == '0' || device_high == '1';
}

std::string parse_pcie_trid(std::string_view trid, bool* pcie, std::string* pci_address) {
  *pcie = false;
  std::string trtype;
  std::string traddr;
  std::string other_key;
  for (const std::string_view pair : split_whitespace(trid)) {
    // SPDK's "key:value" and "key=value"; a PCI address holds ':' itself.
    const size_t separator = pair.find_first_of(":=");
    if (separator == std::string_view::npos) continue;  // the host library will say why
    const std::string key = lowercase(pair.substr(0, separator));
    const std::string_view value = pair.substr(separator + 1);
    if (key == "trtype") {
      trtype = lowercase(value);
    } else if (key == "traddr") {
      traddr = lowercase(value);
    } else if (other_key.empty()) {
      other_key = std::string(pair.substr(0, separator));
    }
  }
  if (trtype != "pcie") return "";
  *pcie = true;
  if (!other_key.empty()) {
    return "-r: trtype PCIe takes traddr only, not " + other_key +
           " (e.g. -r 'trtype:PCIe traddr:0000:01:00.0')";
  }
  if (traddr.empty()) {
    return "-r: trtype PCIe needs traddr:DDDD:BB:DD.F (e.g. traddr:0000:01:00.0) or "
           "traddr:model";
  }
  if (traddr != kPcieModelAddress && !pci_address_valid(traddr)) {
    return "-r: traddr '" + traddr + "' is not a PCI address DDDD:BB:DD.F (e.g. 0000:01:00.0) "
           "nor 'model'";
  }
  *pci_address = traddr;
  return "";
}

namespace {

std::string check_target(const Options& options, Settings* s) {
  if (options.sim == !options.trid.empty()) {
    return options.sim ? "-r and --sim exclude each other: give one target"
                       : "no target: give -r TRID (e.g. -r 'trtype:RDMA traddr:10.0.0.1 "
                         "trsvcid:4420 subnqn:nqn...' or -r 'trtype:PCIe "
                         "traddr:0000:01:00.0') or --sim";
  }
  s->sim = options.sim;
  s->trid = options.trid;
  if (options.sim) return "";
  std::string reason = parse_pcie_trid(options.trid, &s->pcie, &s->pci_address);
  if (!reason.empty() || !s->pcie) return reason;
  // Options of the fabric's host library mean nothing to a local controller.
  const char* fabric_only = options.memreg_given                    ? "--memreg"
                            : options.reconnect_delay_given         ? "--reconnect-delay-ms"
                            : options.ctrl_loss_timeout_given       ? "--ctrl-loss-timeout-ms"
                            : options.io_timeout_given              ? "--io-timeout-ms"
                            : options.fast_io_fail_given            ? "--fast-io-fail-ms"
                            : options.qpairs_per_worker_given       ? "-P"
                            : options.memreg_switch_every_given     ? "--memreg-switch-every"
                            : options.memreg_switch_every_ios_given ? "--memreg-switch-every-ios"
                            : !options.mode.empty()                 ? "--mode"
                            : options.adaptive_idle_given           ? "--adaptive-idle-us"
                                                                    : nullptr;
  if (fabric_only != nullptr) {
    return std::string(fabric_only) + " applies to RDMA targets, not to trtype PCIe";
  }
  return "";
}

std::string check_workload(const Options& options, Settings* s) {
  if (options.workload.empty()) return "-w is required: read, write, randread, randwrite, rw or randrw";
  if (!workload_parse(options.workload, &s->workload)) {
    return "-w: '" + options.workload + "' is not one of read, write, randread, randwrite, rw, randrw";
  }
  const bool reads = s->workload == Workload::read || s->workload == Workload::randread;
  if (!workload_mixed(s->workload)) {
    if (options.read_percent_given) {
      return "-M applies to -w rw and randrw only (-w " + options.workload + " is " +
             (reads ? "all reads)" : "all writes)");
    }
    s->read_percent = reads ? 100 : 0;
    return "";
  }
  if (options.read_percent > 100) {
    return "-M: " + std::to_string(options.read_percent) + " is not a percentage (0..100)";
  }
  s->read_percent = options.read_percent;
  return "";
}

std::string check_shape(const Options& options, Settings* s) {
  if (options.queue_depth < 1 || options.queue_depth >= kQueueEntriesMax) {
    return "-q: " + std::to_string(options.queue_depth) + " is not within 1.." +
           std::to_string(kQueueEntriesMax - 1);
  }
  s->queue_depth = options.queue_depth;
  // A namespace's blocks are 512 bytes at the least (the smallest LBA format), so anything
  // else can never be whole blocks; the real block size is checked after connecting.
  if (options.io_size_bytes == 0 || options.io_size_bytes % 512 != 0) {
    return "-o: " + std::to_string(options.io_size_bytes) +
           " is not a positive multiple of the block size (512 or more)";
  }
  s->io_size_bytes = options.io_size_bytes;
  if (options.time_s < 1) return "-t: the run must last at least 1 second";
  s->time_s = options.time_s;
  s->number_ios = options.number_ios;  // 0: no limit, as in spdk_nvme_perf
  if (options.cores < 1 || options.cores > kCoresMax) {
    return "-c: " + std::to_string(options.cores) + " is not within 1.." +
           std::to_string(kCoresMax);
  }
  s->cores = options.cores;
  const uint32_t qpairs_max = kIoQpairsMax / s->cores;
  if (options.qpairs_per_worker < 1 || options.qpairs_per_worker > qpairs_max) {
    return "-P: " + std::to_string(options.qpairs_per_worker) + " is not within 1.." +
           std::to_string(qpairs_max) + " (-c " + std::to_string(s->cores) +
           " workers x -P queue pairs: at most " + std::to_string(kIoQpairsMax) +
           " I/O queues on one controller)";
  }
  s->qpairs_per_worker = options.qpairs_per_worker;
  if (options.ns_count_given && (options.ns_count < 1 || options.ns_count > kNamespacesMax)) {
    return "--ns-count: " + std::to_string(options.ns_count) + " is not within 1.." +
           std::to_string(kNamespacesMax);
  }
  // The sim and the PCIe model make their namespaces: one unless told; a real target has its.
  const bool made_here = options.sim || s->pcie_model();
  s->ns_count = options.ns_count_given ? options.ns_count : (made_here ? 1 : 0);
  return "";
}

std::string check_sim_bdev(const Options& options, Settings* s) {
  if (options.sim_bdev.empty()) {
    s->sim_bdev = options.verify ? SimBdevKind::malloc : SimBdevKind::null;
  } else if (options.sim_bdev == "null") {
    if (options.verify) {
      return "--sim-bdev null cannot be used with --verify: the null bdev discards writes "
             "and reads return no data (use --sim-bdev malloc)";
    }
    s->sim_bdev = SimBdevKind::null;
  } else if (options.sim_bdev == "malloc") {
    s->sim_bdev = SimBdevKind::malloc;
  } else if (options.sim_bdev == "nvme") {
    s->sim_bdev = SimBdevKind::nvme;
  } else {
    return "--sim-bdev: '" + options.sim_bdev + "' is not one of null, malloc, nvme";
  }
  return "";
}

// The size of each namespace the run makes (sim bdevs, PCIe model namespaces).
std::string check_made_namespace_size(const Options& options, Settings* s) {
  s->sim_bdev_bytes = options.sim && s->sim_bdev == SimBdevKind::null ? kSimNullBytesDefault
                                                                      : kSimMallocBytesDefault;
  if (options.sim_bdev_size_mib != 0) {
    // 2^24 MiB = 16 TiB: beyond, block counts of 512-byte blocks stop being plausible.
    if (options.sim_bdev_size_mib > (uint64_t{1} << 24)) {
      return "--sim-bdev-size-mib: " + std::to_string(options.sim_bdev_size_mib) +
             " is above 16777216 (16 TiB)";
    }
    s->sim_bdev_bytes = options.sim_bdev_size_mib << 20;
  }
  if (s->sim_bdev_bytes < s->io_size_bytes) {
    return "--sim-bdev-size-mib: a namespace of " + std::to_string(s->sim_bdev_bytes >> 20) +
           " MiB is smaller than one I/O of -o " + std::to_string(s->io_size_bytes);
  }
  return "";
}

std::string check_chaos(const Options& options, Settings* s);

std::string check_sim(const Options& options, Settings* s) {
  if (!options.sim) {
    const char* sim_only = !options.sim_bdev.empty()                ? "--sim-bdev"
                           : !options.sim_profile.empty()           ? "--sim-profile"
                           : !options.sim_remote_invalidate.empty() ? "--sim-remote-invalidate"
                           : !options.sim_payload.empty()           ? "--sim-payload"
                           : options.sim_send_fence_given           ? "--sim-send-fence"
                           : options.sim_race_one_in_given          ? "--sim-race-one-in"
                           : !options.chaos.empty()                 ? "--chaos"
                           : options.chaos_every_given              ? "--chaos-every-ms"
                                                                    : nullptr;
    if (sim_only != nullptr) return std::string(sim_only) + " needs --sim";
    if (!s->pcie_model()) {
      if (options.sim_bdev_size_mib != 0) {
        return "--sim-bdev-size-mib needs --sim or -r 'trtype:PCIe traddr:model'";
      }
      return "";
    }
    return check_made_namespace_size(options, s);
  }
  if (std::string reason = check_sim_bdev(options, s); !reason.empty()) return reason;
  if (std::string reason = check_made_namespace_size(options, s); !reason.empty()) return reason;
  if (!options.sim_profile.empty()) {
    if (!is_one_of(options.sim_profile, kSimProfileNames)) {
      return "--sim-profile: '" + options.sim_profile + "' is not one of " +
             join(kSimProfileNames);
    }
    s->sim_profile = options.sim_profile;
  }
  if (!options.sim_remote_invalidate.empty()) {
    if (options.sim_remote_invalidate != "on" && options.sim_remote_invalidate != "off") {
      return "--sim-remote-invalidate: '" + options.sim_remote_invalidate + "' is not on or off";
    }
    s->sim_remote_invalidate = options.sim_remote_invalidate == "on";
  }
  if (!options.sim_payload.empty()) {
    if (options.sim_payload != "copy" && options.sim_payload != "skip") {
      return "--sim-payload: '" + options.sim_payload + "' is not copy or skip";
    }
    s->sim_payload_skip = options.sim_payload == "skip";
    if (s->sim_payload_skip && options.verify) {
      return "--sim-payload skip cannot be used with --verify: no data would reach the target "
             "or come back";
    }
  }
  if (options.sim_send_fence_given) {
    if (!is_one_of(options.sim_send_fence, kSimSendFenceNames)) {
      return "--sim-send-fence: '" + options.sim_send_fence + "' is not one of " +
             join(kSimSendFenceNames);
    }
    s->sim_send_fence = options.sim_send_fence;
  }
  if (options.sim_race_one_in_given) {
    // The other profiles' lag does not depend on it: refusing beats ignoring it silently.
    if (s->sim_profile != kSimRareProfile) {
      const char* why = s->sim_profile == "rxe"           ? "has no commit lag"
                        : s->sim_profile == "adversarial" ? "draws every lag at random"
                                                          : "lags every bind and LOCAL_INV";
      return std::string("--sim-race-one-in applies to --sim-profile ") + kSimRareProfile +
             " only, not to " + s->sim_profile + " (" + s->sim_profile + " " + why + ")";
    }
    if (options.sim_race_one_in < 1) {
      return "--sim-race-one-in: 0 is not 1 or more (1: every bind and LOCAL_INV lags, as "
             "mlx5-2017)";
    }
    s->sim_race_one_in = options.sim_race_one_in;
  }
  return check_chaos(options, s);
}

// --chaos "a,b": fault names (or "all"), each once; --chaos-every-ms needs --chaos. "" or the
// reason.
std::string check_chaos(const Options& options, Settings* s) {
  s->chaos_every_ms = options.chaos_every_ms;
  if (options.chaos.empty()) {
    return options.chaos_every_given ? "--chaos-every-ms needs --chaos" : "";
  }
  if (options.chaos_every_ms < 1) return "--chaos-every-ms: 0 is not 1 or more";
  if (options.chaos == "all") {
    s->chaos_faults.assign(std::begin(kChaosFaultNames), std::end(kChaosFaultNames));
    return "";
  }
  const std::string option = "--chaos '" + options.chaos + "': ";
  size_t begin = 0;
  for (;;) {
    const size_t comma = std::min(options.chaos.find(',', begin), options.chaos.size());
    const std::string name = options.chaos.substr(begin, comma - begin);
    if (!is_one_of(name, kChaosFaultNames)) {
      return option + "'" + name + "' is not one of " + join(kChaosFaultNames) + " (or all)";
    }
    if (std::find(s->chaos_faults.begin(), s->chaos_faults.end(), name) !=
        s->chaos_faults.end()) {
      return option + name + " is named twice";
    }
    s->chaos_faults.push_back(name);
    if (comma == options.chaos.size()) return "";
    begin = comma + 1;
  }
}

// --memreg-switch-policies "a,b,c": each a policy name, at least two, none right after itself
// (the last is followed by the first). "" or the reason.
std::string parse_memreg_cycle(const std::string& text, std::vector<std::string>* cycle) {
  const std::string option = "--memreg-switch-policies '" + text + "': ";
  size_t begin = 0;
  for (;;) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    const std::string name = text.substr(begin, comma - begin);
    if (name.empty()) return option + "an empty policy name (give names separated by commas)";
    if (!is_one_of(name, kMemregNames)) {
      return option + "'" + name + "' is not one of " + join(kMemregNames);
    }
    cycle->push_back(name);
    if (comma == text.size()) break;
    begin = comma + 1;
  }
  if (cycle->size() < 2) return option + "give two policies or more (one never switches)";
  for (size_t i = 0; i < cycle->size(); ++i) {
    const std::string& next = (*cycle)[(i + 1) % cycle->size()];
    if ((*cycle)[i] == next) {
      return option + next +
             " follows itself (the cycle starts again after the last): a switch "
             "to the policy in use does nothing";
    }
  }
  return "";
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

// --memreg-switch-every SECONDS or --memreg-switch-every-ios N, and the cycle. "" or the reason.
std::string check_memreg_switch(const Options& options, Settings* s) {
  const bool by_time = options.memreg_switch_every_given;
  const bool by_count = options.memreg_switch_every_ios_given;
  if (!by_time && !by_count) {
    if (options.memreg_switch_policies_given) {
      return "--memreg-switch-policies needs --memreg-switch-every SECONDS or "
             "--memreg-switch-every-ios N";
    }
    return "";
  }
  if (by_time && by_count) {
    return "--memreg-switch-every and --memreg-switch-every-ios exclude each other: switch "
           "by time or by completed I/Os";
  }
  const char* option = by_time ? "--memreg-switch-every" : "--memreg-switch-every-ios";
  if (by_time) {
    const double every_s = options.memreg_switch_every_s;
    if (!std::isfinite(every_s) || every_s <= 0) {
      return "--memreg-switch-every: " + seconds_text(every_s) +
             " is not a positive number of seconds (e.g. 0.2)";
    }
    if (every_s >= s->time_s) {
      return "--memreg-switch-every " + seconds_text(every_s) + " never switches in a run of -t " +
             std::to_string(s->time_s) + " s: give less than -t";
    }
    s->memreg_switch_every_s = every_s;
  } else {
    const uint64_t every_ios = options.memreg_switch_every_ios;
    if (every_ios < 1) {
      return "--memreg-switch-every-ios: 0 is not 1 or more (I/Os completed on a queue pair "
             "between its switches)";
    }
    // With -d and a known namespace count, what each queue pair completes in the run.
    if (s->number_ios != 0 && s->ns_count != 0) {
      // A worker's -d x namespaces I/Os are shared by its -P queue pairs (double: no overflow).
      const double per_qpair =
          static_cast<double>(s->number_ios) * s->ns_count / s->qpairs_per_worker;
      if (static_cast<double>(every_ios) >= per_qpair) {
        return "--memreg-switch-every-ios " + std::to_string(every_ios) +
               " never switches: with -d " + std::to_string(s->number_ios) +
               " a queue pair completes about " + std::to_string(static_cast<uint64_t>(per_qpair)) +
               " I/Os; give fewer";
      }
    }
    s->memreg_switch_every_ios = every_ios;
  }
  if (options.memreg_given) {
    return std::string("--memreg and ") + option +
           " exclude each other: the run starts with the first policy of "
           "--memreg-switch-policies (default global,sagi,max,deferred)";
  }
  s->memreg_switch_policies.clear();
  if (options.memreg_switch_policies_given) {
    std::string reason =
        parse_memreg_cycle(options.memreg_switch_policies, &s->memreg_switch_policies);
    if (!reason.empty()) return reason;
  } else {
    s->memreg_switch_policies.assign(std::begin(kMemregSwitchCycleDefault),
                                     std::end(kMemregSwitchCycleDefault));
  }
  s->memreg = s->memreg_switch_policies.front();
  return "";
}

// --mode poll|interrupt|adaptive and --adaptive-idle-us (adaptive only). "" or the reason.
std::string check_mode(const Options& options, Settings* s) {
  if (!options.mode.empty() && !completion_mode_parse(options.mode, &s->mode)) {
    return "--mode: '" + options.mode + "' is not one of " + join(kCompletionModeNames);
  }
  if (!options.adaptive_idle_given) return "";
  if (s->mode != CompletionMode::adaptive) {
    return "--adaptive-idle-us applies to --mode adaptive only";
  }
  if (options.adaptive_idle_us < 1) {
    return "--adaptive-idle-us: 0 is not 1 or more (a worker that sleeps at once is --mode "
           "interrupt)";
  }
  s->adaptive_idle_us = options.adaptive_idle_us;
  return "";
}

std::string check_rest(const Options& options, Settings* s) {
  if (std::string reason = check_mode(options, s); !reason.empty()) return reason;
  if (!is_one_of(options.memreg, kMemregNames)) {
    return "--memreg: '" + options.memreg + "' is not one of " + join(kMemregNames);
  }
  s->memreg = options.memreg;
  if (std::string reason = check_memreg_switch(options, s); !reason.empty()) return reason;
  static constexpr const char* kLogLevels[] = {"error", "warn", "notice", "info", "debug"};
  if (!is_one_of(options.log_level, kLogLevels)) {
    return "--log-level: '" + options.log_level + "' is not one of " + join(kLogLevels);
  }
  s->log_level = options.log_level;
  s->verify = options.verify;
  s->json_path = options.json_path;
  s->seed = options.seed;
  s->reconnect_delay_ms = options.reconnect_delay_ms;
  s->ctrl_loss_timeout_ms = options.ctrl_loss_timeout_ms;
  s->io_timeout_ms = options.io_timeout_ms;
  s->fast_io_fail = options.fast_io_fail_given;
  s->fast_io_fail_ms = options.fast_io_fail_ms;
  if (options.io_queue_size != 0) {
    if (options.io_queue_size < 2 || options.io_queue_size > kQueueEntriesMax) {
      return "--io-queue-size: " + std::to_string(options.io_queue_size) + " is not within 2.." +
             std::to_string(kQueueEntriesMax);
    }
    s->io_queue_size = options.io_queue_size;
  }
  if (s->ns_count == 0) return "";
  uint32_t entries = 0;
  return io_queue_entries(*s, s->ns_count, &entries);
}

}  // namespace

std::string check_options(const Options& options, Settings* settings) {
  Settings s;
  using Check = std::string (*)(const Options&, Settings*);
  // In this order: the later checks read what the earlier ones settled (target, sizes).
  for (const Check check : {check_target, check_workload, check_shape, check_sim, check_rest}) {
    std::string reason = check(options, &s);
    if (!reason.empty()) return reason;
  }
  *settings = s;
  return "";
}

std::string io_queue_entries(const Settings& settings, uint32_t ns_count, uint32_t* entries) {
  const uint32_t qpairs = settings.qpairs_per_worker;
  const uint64_t commands = uint64_t{settings.queue_depth} * ns_count;
  const std::string shape = "-q " + std::to_string(settings.queue_depth) + " x " +
                            std::to_string(ns_count) + " namespaces";
  if (commands < qpairs) {
    return "-P " + std::to_string(qpairs) + ": " + shape + " gives a worker " +
           std::to_string(commands) + " I/Os, fewer than its queue pairs (each needs one at " +
           "least): raise -q or lower -P";
  }
  const uint64_t needed = io_queue_entries_needed(settings.queue_depth, ns_count, qpairs);
  // Who shares a queue, for the messages.
  const std::string sharing = qpairs == 1 ? " (all namespaces share a worker's queue)"
                                          : " over -P " + std::to_string(qpairs) +
                                                " queue pairs (all namespaces share them)";
  if (settings.io_queue_size != 0) {
    if (settings.io_queue_size < needed) {
      return "--io-queue-size: " + std::to_string(settings.io_queue_size) +
             " entries cannot hold " + shape + sharing + ": needs " + std::to_string(needed);
    }
    *entries = settings.io_queue_size;
    return "";
  }
  if (needed > kQueueEntriesMax) {
    return shape + sharing + " needs " + std::to_string(needed) +
           " entries per I/O queue; at most " + std::to_string(kQueueEntriesMax) +
           ": lower -q or --ns-count";
  }
  *entries = static_cast<uint32_t>(std::max<uint64_t>(needed, kIoQueueSizeDefault));
  return "";
}

int parse_command_line(int argc, const char* const* argv, Options* options, std::string* error) {
  Options& o = *options;
  CLI::App app{"nvmf_perf: NVMe-over-Fabrics RDMA and local NVMe PCIe benchmark (like "
               "spdk_nvme_perf)"};
  auto* trid = app.add_option("-r,--transport-id", o.trid,
                              "target, SPDK transport ID: 'trtype:RDMA adrfam:IPv4 "
                              "traddr:10.0.0.1 trsvcid:4420 subnqn:nqn...', or a local "
                              "controller through the userspace PCIe driver (bound to vfio-pci, "
                              "hugepages reserved: scripts/setup.sh): 'trtype:PCIe "
                              "traddr:0000:01:00.0', or 'trtype:PCIe traddr:model' for the "
                              "in-process NVMe controller model (no device needed)");
  auto* sim = app.add_flag("--sim", o.sim,
                           "run against an in-process target over the simulated HCA");
  trid->excludes(sim);
  app.add_option("-q,--queue-depth", o.queue_depth, "I/Os outstanding per namespace per worker (32)");
  app.add_option("-o,--io-size", o.io_size_bytes, "I/O size in bytes, whole blocks (4096)");
  app.add_option("-w,--workload", o.workload, "read, write, randread, randwrite, rw, randrw")
      ->required();
  auto* read_percent = app.add_option("-M,--rwmixread", o.read_percent,
                                      "percentage of reads for rw and randrw (50)");
  app.add_option("-t,--time", o.time_s, "seconds to run (10)");
  app.add_option("-d,--number-ios", o.number_ios,
                 "I/Os each worker submits on each namespace, like spdk_nvme_perf's -d: the run "
                 "ends when they are done or at -t, whichever comes first (0: -t alone, the "
                 "default)");
  app.add_option("-c,--cores", o.cores, "host worker threads, each with its own I/O queue (1)");
  auto* qpairs = app.add_option(
      "-P,--qpairs-per-worker", o.qpairs_per_worker,
      "RDMA: I/O queue pairs per worker, like spdk_nvme_perf's -P (1); the worker's -q I/Os "
      "per namespace are dealt to them in turn and stay there (-q 96 -P 12: 8 on each)");
  auto* ns_count = app.add_option("--ns-count", o.ns_count,
                                  "namespaces: with --sim or traddr:model how many to create "
                                  "(1), otherwise the first N active ones (all)");
  app.add_option("--sim-bdev", o.sim_bdev,
                 "null, malloc, or nvme (the NVMe controller model through the PCIe driver); "
                 "default null, malloc with --verify");
  app.add_option("--sim-bdev-size-mib", o.sim_bdev_size_mib,
                 "size of each sim namespace (null 1 TiB, malloc 64 MiB), or of each "
                 "namespace of the PCIe model (64 MiB)");
  app.add_option("--sim-profile", o.sim_profile,
                 "rxe (default), mlx5-2017 (every bind and LOCAL_INV lags: the 2017 race, "
                 "certain), mlx5-fenced (mlx5-2017 with the strong fence on every bind), "
                 "adversarial (random lags and interleavings), mlx5-2017-rare (one bind or "
                 "LOCAL_INV in --sim-race-one-in lags: the race, rare)");
  app.add_option("--sim-remote-invalidate", o.sim_remote_invalidate,
                 "on (default): the sim target answers with SEND_WITH_INV; off: never");
  app.add_option("--sim-payload", o.sim_payload,
                 "copy (default): the sim copies every RDMA READ and WRITE payload, on the "
                 "thread that posts it; skip: not those to or from the workers' I/O buffers "
                 "(every key and bounds check still made), as a real HCA's DMA costs no CPU: "
                 "two cores then measure the stack, not the copies (refused with --verify)");
  auto* send_fence = app.add_option(
      "--sim-send-fence", o.sim_send_fence,
      "what IBV_SEND_FENCE waits for in the sim: profile (default: reads on rxe, key-updates "
      "on the mlx5 profiles and adversarial), reads (the IBTA fence: prior RDMA READs "
      "complete), key-updates (every prior work request complete and its key change visible)");
  auto* race_one_in = app.add_option(
      "--sim-race-one-in", o.sim_race_one_in,
      "with --sim-profile mlx5-2017-rare only (refused with the other profiles): one bind or "
      "LOCAL_INV in N lags, seeded by --seed (1000000; 1 = every one, as mlx5-2017)");
  auto* memreg = app.add_option("--memreg", o.memreg,
                                "RDMA: global (default), unsafe, sagi, max, deferred");
  auto* switch_every = app.add_option(
      "--memreg-switch-every", o.memreg_switch_every_s,
      "RDMA: every SECONDS (e.g. 0.2; less than -t) each worker switches its queue pairs to the "
      "next memreg policy of --memreg-switch-policies, under load: each queue pair drains, "
      "switches and resumes, without a reconnect (excludes --memreg)");
  auto* switch_every_ios = app.add_option(
      "--memreg-switch-every-ios", o.memreg_switch_every_ios,
      "RDMA: like --memreg-switch-every, by count: each queue pair switches to the next policy "
      "each time N more I/Os completed on it, however long they took (with -d a run makes the "
      "same switches on a loaded machine as on an idle one; excludes --memreg-switch-every "
      "and --memreg)");
  auto* switch_policies = app.add_option(
      "--memreg-switch-policies", o.memreg_switch_policies,
      "with --memreg-switch-every or --memreg-switch-every-ios: the cycle, comma-separated "
      "(global,sagi,max,deferred: the safe ones; unsafe only if named); the run starts with "
      "the first");
  app.add_flag("--verify", o.verify, "write patterns and check every read");
  app.add_option("--json", o.json_path,
                 "write the results to FILE as JSON (with cpu_us_per_io, and bytes_copied on "
                 "the PCIe path)");
  app.add_option("--log-level", o.log_level, "error, warn, notice (default), info, debug");
  app.add_option("--io-queue-size", o.io_queue_size,
                 "entries per I/O queue, RDMA or PCIe (default: max(128, q x namespaces + 1))");
  app.add_option("--seed", o.seed, "seed of the random offsets and of the sim (1)");
  auto* reconnect_delay = app.add_option(
      "--reconnect-delay-ms", o.reconnect_delay_ms,
      "RDMA: after a queue pair fails, reconnect after this long (1000; the kernel's default "
      "of 10 s would outlast a short run)");
  auto* ctrl_loss_timeout = app.add_option(
      "--ctrl-loss-timeout-ms", o.ctrl_loss_timeout_ms,
      "RDMA: give a failed queue up after this long (600000, the kernel's default)");
  auto* io_timeout = app.add_option(
      "--io-timeout-ms", o.io_timeout_ms,
      "RDMA: an I/O outstanding this long is aborted, one more such time and its queue "
      "reconnects (30000, the kernel's io_timeout; 0 = none)");
  auto* fast_io_fail = app.add_option(
      "--fast-io-fail-ms", o.fast_io_fail_ms,
      "RDMA: while a queue reconnects, its I/O fails (Host Pathing Error) after this long "
      "instead of waiting for the reconnect (the kernel's fast_io_fail_tmo; default off)");
  app.add_option("--chaos", o.chaos,
                 "with --sim: inject faults during the run, one every --chaos-every-ms drawn "
                 "from this comma-separated list by --seed (reproducible): qp-error (a work "
                 "request fails, its QP to error), drop (both QPs of a connection to error), "
                 "delay (completions held back, then released), refuse (reconnects refused "
                 "for a while), bdev-error (reads and writes fail with an NVMe status), "
                 "async-event (QP fatal), or all; failed I/Os are then expected: the run "
                 "fails only if the account (submitted = completed + failed) or --verify does");
  auto* chaos_every = app.add_option("--chaos-every-ms", o.chaos_every_ms,
                                     "with --chaos: milliseconds between faults (300)");
  app.add_option("--mode", o.mode,
                 "RDMA: how a worker waits for completions: poll (default: spin), interrupt "
                 "(sleep on the queue pairs' event fds whenever a poll finds nothing), adaptive "
                 "(poll while completions come, sleep once polls found nothing for "
                 "--adaptive-idle-us)");
  auto* adaptive_idle = app.add_option(
      "--adaptive-idle-us", o.adaptive_idle_us,
      "with --mode adaptive: microseconds of empty polls before a worker sleeps (50)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success&) {
    std::fputs(app.help().c_str(), stdout);
    return 1;
  } catch (const CLI::ParseError& parse_error) {
    *error = parse_error.what();
    return 2;
  }
  o.read_percent_given = read_percent->count() > 0;
  o.ns_count_given = ns_count->count() > 0;
  o.qpairs_per_worker_given = qpairs->count() > 0;
  o.memreg_given = memreg->count() > 0;
  o.memreg_switch_every_given = switch_every->count() > 0;
  o.memreg_switch_every_ios_given = switch_every_ios->count() > 0;
  o.memreg_switch_policies_given = switch_policies->count() > 0;
  o.sim_send_fence_given = send_fence->count() > 0;
  o.sim_race_one_in_given = race_one_in->count() > 0;
  o.reconnect_delay_given = reconnect_delay->count() > 0;
  o.ctrl_loss_timeout_given = ctrl_loss_timeout->count() > 0;
  o.io_timeout_given = io_timeout->count() > 0;
  o.fast_io_fail_given = fast_io_fail->count() > 0;
  o.chaos_every_given = chaos_every->count() > 0;
  o.adaptive_idle_given = adaptive_idle->count() > 0;
  return 0;
}

}  // namespace nvmf::perf
