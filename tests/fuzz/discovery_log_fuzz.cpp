// Fuzz target: reads of the discovery log page (Get Log Page LID 70h on a discovery
// controller): any offset, length, buffer size, iovec split and RAE, between changes of the
// configuration the log is built from (subsystems, listeners, allowed hosts).
//
// Input: [subsystems: count u8, then per subsystem a flags u8: allow any host (bit 0), lists
//         kHostNqn (bit 1), listeners (bits 3:2), first listener's address (bits 7:4)]
//        then records: op % 4 == 0, 1: read [mode u8] [offset u64] [numd u32]
//                                           [buffer length u16] [segments u8] [lid u8]
//                                  2: change [what u8] [argument u8]
//                                  3: poll (AERs and their completions)
//        read mode: bit 0 RAE, bit 1 raw offset (else taken modulo the log size + 2 KiB and
//        dword aligned), bit 2 raw NUMD (else the buffer length), bit 3 raw LID (else 70h);
//        the buffer length is taken modulo the log size + 4 KiB + 1.
// Properties: a read succeeds exactly when its parameters are valid (dword offset inside the
// log, length within the buffer); then its bytes are the same bytes of one full read of the
// log (taken right before, RAE set), zeroes past the log's end, and the same whatever the
// buffer held before (defined bytes); the full log's header counts one record per listener
// of every subsystem the host may use, in order, with GENCTR as the target reports it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_input.h"
#include "spec/discovery.h"
#include "target_harness.h"

using nvmf::fuzz::Completion;
using nvmf::fuzz::FakeQueue;
using nvmf::fuzz::Input;
using nvmf::fuzz::TargetHarness;
namespace spec = nvmf::spec;
namespace target = nvmf::target;

namespace {

constexpr unsigned kSubsystemsMax = 4;
// The largest log here: the header and 5 subsystems x 8 listeners.
constexpr uint32_t kFullLogBytes = (1 + 5 * 8) * 1024;

std::string subsystem_nqn(unsigned index) {
  return "nqn.2026-01.io.example:fuzz" + std::to_string(index);
}

// Eight addresses (two families, two hosts, two ports), so subsystems share ports.
target::ListenerAddress listener_address(uint8_t variant) {
  target::ListenerAddress address;
  address.trtype = spec::trtype::rdma;
  if ((variant & 4) != 0) {
    address.adrfam = spec::adrfam::ipv6;
    address.traddr = "fe80::" + std::to_string(1 + (variant & 1));
  } else {
    address.adrfam = spec::adrfam::ipv4;
    address.traddr = "10.0.0." + std::to_string(1 + (variant & 1));
  }
  address.trsvcid = (variant & 2) != 0 ? "4421" : "4420";
  return address;
}

bool host_allowed(const target::SubsystemInfo& info) {
  if (info.allow_any_host) return true;
  for (const std::string& host : info.hosts) {
    if (host == nvmf::fuzz::kHostNqn) return true;
  }
  return false;
}

class DiscoverySession {
 public:
  explicit DiscoverySession(Input& in) : in_(in) {
    const unsigned count = in_.byte() % (kSubsystemsMax + 1);
    for (unsigned i = 0; i < count; ++i) {
      const uint8_t flags = in_.byte();
      target::SubsystemOpts opts;
      opts.nqn = subsystem_nqn(i);
      opts.allow_any_host = (flags & 1) != 0;
      if ((flags & 2) != 0) opts.hosts = {nvmf::fuzz::kHostNqn};
      FUZZ_CHECK(harness_.target().add_subsystem(opts).has_value());
      for (unsigned l = 0; l < ((flags >> 2) & 3); ++l) {
        (void)harness_.target().add_listener(
            opts.nqn, listener_address(static_cast<uint8_t>((flags >> 4) + l)));
      }
    }
    admin_ = &harness_.new_queue(0, 32);
    Completion done;
    const spec::Sqe connect = spec::to_sqe(spec::make_connect_command(1, 0, 32, 0, 0));
    FUZZ_CHECK(harness_.run(
        *admin_, connect,
        nvmf::fuzz::connect_data(std::string(spec::discovery_nqn), spec::cntlid_dynamic), 0,
        &done));
    FUZZ_CHECK(done.status().is_success());
    FUZZ_CHECK(harness_.run(*admin_,
                            spec::to_sqe(spec::make_property_set(2, spec::property_offset::cc,
                                                                 nvmf::fuzz::cc_enable_value())),
                            {}, 0, &done));
    FUZZ_CHECK(done.status().is_success());
  }

  void run() {
    for (unsigned record = 0; record < 48 && !in_.empty() && !admin_->destroyed(); ++record) {
      switch (in_.byte() % 4) {
        case 0:
        case 1:
          read();
          break;
        case 2:
          change();
          break;
        case 3:
          event_request();
          break;
      }
      for (unsigned i = 0; i < 4; ++i) harness_.reactors().poll_round();
      admin_->forget_completions();
    }
  }

 private:
  // Submits and waits (Get Log Page completes at once: the log is built under the mutex).
  Completion get(const spec::Sqe& sqe, uint32_t buffer_length, unsigned segments, uint8_t fill) {
    const int slot = admin_->submit(sqe, {}, buffer_length, segments, fill);
    FUZZ_CHECK(slot >= 0);
    Completion done;
    FUZZ_CHECK_MSG(admin_->take_completion(slot, &done), "Get Log Page did not complete at once");
    return done;
  }

  // The whole log as the host would read it: the header for its size, then all of it in one
  // go (RAE: the reads change nothing).
  std::vector<uint8_t> full_log() {
    const spec::Sqe header_read = spec::make_get_log_page(
        7, spec::log_page::discovery, spec::discovery_log_header_size, 0, spec::nsid_none, 0, true);
    const Completion first = get(header_read, spec::discovery_log_header_size, 1, 0xEE);
    FUZZ_CHECK(first.status().is_success());
    spec::DiscoveryLogPageHeader header;
    std::memcpy(&header, first.data.data(), sizeof(header));
    const uint64_t size = spec::discovery_log_page_size(header.numrec);
    FUZZ_CHECK(size <= kFullLogBytes);
    const spec::Sqe sqe =
        spec::make_get_log_page(8, spec::log_page::discovery, size, 0, spec::nsid_none, 0, true);
    const Completion done = get(sqe, static_cast<uint32_t>(size), 1, 0xEE);
    FUZZ_CHECK(done.status().is_success());
    FUZZ_CHECK(done.data.size() == size);
    FUZZ_CHECK(std::memcmp(done.data.data(), first.data.data(), sizeof(header)) == 0);
    FUZZ_CHECK(header.genctr == harness_.target().discovery_generation());
    FUZZ_CHECK(header.recfmt == 0);
    // One record per listener of each subsystem the host may use, in creation order.
    std::vector<std::string> expected;
    for (const target::SubsystemInfo& info : harness_.target().subsystems_info()) {
      if (info.discovery || !host_allowed(info)) continue;
      for (size_t l = 0; l < info.listeners.size(); ++l) expected.push_back(info.nqn);
    }
    FUZZ_CHECK(header.numrec == expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      spec::DiscoveryLogEntry entry;
      std::memcpy(
          &entry,
          done.data.data() + spec::discovery_log_header_size + i * spec::discovery_log_entry_size,
          sizeof(entry));
      FUZZ_CHECK(spec::get_nul_terminated(entry.subnqn) == expected[i]);
      FUZZ_CHECK(entry.portid != 0);
    }
    log_size_ = size;
    return done.data;
  }

  void read() {
    const uint8_t mode = in_.byte();
    uint64_t offset = in_.take<uint64_t>();
    uint32_t numd = in_.take<uint32_t>();
    const uint16_t buffer_choice = in_.take<uint16_t>();
    const uint8_t segments = in_.byte();
    uint8_t lid = in_.byte();
    const bool rae = (mode & 1) != 0;

    const std::vector<uint8_t> reference = full_log();
    // Up to 4 KiB more than the log: larger buffers only add zeroes to check.
    const auto buffer_length = static_cast<uint32_t>(buffer_choice % (log_size_ + 4096 + 1));
    if ((mode & 2) == 0) offset = (offset % (log_size_ + 2048)) & ~uint64_t{3};
    if ((mode & 4) == 0) numd = buffer_length < 4 ? 0 : buffer_length / 4 - 1;
    if ((mode & 8) == 0) lid = spec::log_page::discovery;

    spec::Sqe sqe =
        spec::make_get_log_page(9, spec::log_page::discovery, 4, 0, spec::nsid_none, 0, rae);
    sqe.cdw10 = (sqe.cdw10 & ~0xFFFF00FFu) | lid | ((numd & 0xFFFF) << 16);
    sqe.cdw11 = (sqe.cdw11 & ~0xFFFFu) | (numd >> 16);
    sqe.cdw12 = static_cast<uint32_t>(offset);
    sqe.cdw13 = static_cast<uint32_t>(offset >> 32);
    const uint64_t length = spec::get_log_page_length_bytes(sqe);

    const Completion first = get(sqe, buffer_length, segments, 0xEE);
    const bool valid = lid == spec::log_page::discovery && offset % 4 == 0 &&
                       length <= buffer_length && offset < log_size_;
    FUZZ_CHECK_MSG(first.status().is_success() == valid,
                   valid ? "a valid discovery log read failed" : "an invalid read succeeded");
    if (!valid) return;
    const Completion second = get(sqe, buffer_length, segments, 0x11);
    FUZZ_CHECK(second.status().is_success());
    FUZZ_CHECK_MSG(first.data == second.data, "the read left bytes of the buffer undefined");
    FUZZ_CHECK(first.data.size() == buffer_length);
    // The log's bytes from `offset`; past the log's end, and past the requested length (the
    // buffer is the core's to fill), zeroes.
    std::vector<uint8_t> expected(buffer_length, 0);
    const uint64_t from_log =
        std::min<uint64_t>(std::min<uint64_t>(length, buffer_length), reference.size() - offset);
    std::memcpy(expected.data(), reference.data() + offset, from_log);
    FUZZ_CHECK_MSG(first.data == expected, "the window differs from the full log");
  }

  void change() {
    const uint8_t what = in_.byte();
    const uint8_t argument = in_.byte();
    target::Target& tgt = harness_.target();
    const std::string nqn = subsystem_nqn(argument % (kSubsystemsMax + 1));
    const uint64_t generation = tgt.discovery_generation();
    switch (what % 7) {
      case 0:
        (void)tgt.add_listener(nqn, listener_address(argument >> 3));
        break;
      case 1:
        (void)tgt.remove_listener(nqn, listener_address(argument >> 3));
        break;
      case 2:
        (void)tgt.add_host(nqn, nvmf::fuzz::kHostNqn);
        break;
      case 3:
        (void)tgt.remove_host(nqn, nvmf::fuzz::kHostNqn);
        break;
      case 4:
        (void)tgt.set_allow_any_host(nqn, (argument & 0x80) != 0);
        break;
      case 5: {
        target::SubsystemOpts opts;
        opts.nqn = nqn;
        opts.allow_any_host = (argument & 0x80) != 0;
        (void)tgt.add_subsystem(opts);
        break;
      }
      case 6:
        (void)tgt.remove_subsystem(nqn, target::ConnectedControllers::disconnect);
        break;
    }
    FUZZ_CHECK(tgt.discovery_generation() >= generation);
  }

  void event_request() {
    // Held until a discovery log change (if enabled) or the queue's teardown.
    (void)admin_->submit(spec::make_sqe(spec::admin_opcode::async_event_request, 11), {}, 0, 1);
    (void)admin_->submit(
        spec::make_set_features(12, spec::feature::async_event_configuration, in_.take<uint32_t>()),
        {}, 0, 1);
  }

  Input& in_;
  TargetHarness harness_;
  FakeQueue* admin_ = nullptr;
  uint64_t log_size_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  nvmf::fuzz::drop_log_lines();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  DiscoverySession session(in);
  session.run();
  return 0;
}
