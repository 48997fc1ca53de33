// Fuzz target: the RDMA target's SGL parser (transport_rdma::parse_command_sgl), as the
// transport calls it for every received capsule: the SQE, the bytes that came after it, and
// the transport's limits.
//
// Input: [mode u8] [limits: 3 x u32 raw (mode bit 0), or u8 u16 u8 picking realistic ones]
//        [SQE 64 bytes] [capsule data: the rest; none at all when mode bit 1 is set]
// Properties, on success: nothing points outside the capsule (in-capsule data and a Last
// Segment's list lie inside the bytes that arrived), the total respects max_io_size, keyed
// blocks number 1..16 (a list's at most MSDBD) and add up to the total, one key to
// invalidate. On failure: one of the statuses the header documents, with DNR. Parsing is
// deterministic.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz_input.h"
#include "spec/nvme.h"
#include "spec/sgl.h"
#include "spec/status.h"
#include "target/request.h"
#include "transport_rdma/sgl_parse.h"

using nvmf::fuzz::Input;
using nvmf::transport_rdma::kKeyedDescriptorsMax;
using nvmf::transport_rdma::ParsedSgl;
using nvmf::transport_rdma::SglLimits;
namespace spec = nvmf::spec;
namespace sc = spec::sc_generic;

namespace {

SglLimits take_limits(Input& in, uint8_t mode) {
  SglLimits limits;
  if ((mode & 1) != 0) {  // anything: the parser's contract has no precondition on them
    limits.max_io_size = in.take<uint32_t>();
    limits.in_capsule_data_size = in.take<uint32_t>();
    limits.max_keyed_descriptors = in.take<uint32_t>();
    return limits;
  }
  // What TargetOpts::validate() lets through: 4 KiB x 2^n, 16-byte units up to 16 KiB, 1..16.
  limits.max_io_size = 4096u << (in.byte() % 12);
  limits.in_capsule_data_size = 16u * (in.take<uint16_t>() % 1025);
  limits.max_keyed_descriptors = 1 + in.byte() % kKeyedDescriptorsMax;
  return limits;
}

bool documented_failure(const spec::Status& status) {
  if (status.sct != spec::sct::generic || !status.dnr) return false;
  switch (status.sc) {
    case sc::invalid_opcode:
    case sc::invalid_field:
    case sc::sgl_descriptor_type_invalid:
    case sc::sgl_offset_invalid:
    case sc::data_sgl_length_invalid:
      return true;
    default:
      return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  nvmf::fuzz::drop_log_lines();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint8_t mode = in.byte();
  const SglLimits limits = take_limits(in, mode);
  spec::Sqe sqe;
  in.take_bytes(&sqe, sizeof(sqe));
  const bool no_capsule = (mode & 2) != 0;
  // The capsule's data in an allocation of its own and exact size: a read past it is caught.
  std::vector<uint8_t> capsule = in.take_vector(no_capsule ? 0 : in.remaining());
  const uint8_t* capsule_data = no_capsule ? nullptr : capsule.data();
  const auto capsule_length = static_cast<uint32_t>(capsule.size());
  const auto xfer = static_cast<uint8_t>(nvmf::target::xfer_direction(sqe));

  ParsedSgl parsed;
  const spec::Status status = nvmf::transport_rdma::parse_command_sgl(
      sqe, xfer, capsule_data, capsule_length, limits, &parsed);

  ParsedSgl again;
  const spec::Status status_again = nvmf::transport_rdma::parse_command_sgl(
      sqe, xfer, capsule_data, capsule_length, limits, &again);
  FUZZ_CHECK(status == status_again);
  FUZZ_CHECK(parsed.kind == again.kind && parsed.total_length == again.total_length);

  if (xfer == spec::data_transfer::none) {
    FUZZ_CHECK(status.is_success() && parsed.kind == ParsedSgl::Kind::none);
  }
  if (!status.is_success()) {
    FUZZ_CHECK(documented_failure(status));
    return 0;
  }
  FUZZ_CHECK(parsed.total_length <= limits.max_io_size);
  FUZZ_CHECK((parsed.kind == ParsedSgl::Kind::none) == (parsed.total_length == 0));
  switch (parsed.kind) {
    case ParsedSgl::Kind::none:
      break;
    case ParsedSgl::Kind::in_capsule:
      // The transport hands the core iov = capsule + offset, total_length bytes.
      FUZZ_CHECK(xfer == spec::data_transfer::host_to_controller);
      FUZZ_CHECK(capsule_data != nullptr);
      FUZZ_CHECK(uint64_t{parsed.in_capsule_offset} + parsed.total_length <= capsule_length);
      FUZZ_CHECK(parsed.in_capsule_offset <= limits.in_capsule_data_size);
      break;
    case ParsedSgl::Kind::keyed: {
      FUZZ_CHECK(parsed.keyed_count >= 1 && parsed.keyed_count <= kKeyedDescriptorsMax);
      uint64_t sum = 0;
      for (uint32_t i = 0; i < parsed.keyed_count; ++i) {
        FUZZ_CHECK(parsed.keyed[i].length <= spec::sgl_keyed_length_max);
        sum += parsed.keyed[i].length;
      }
      FUZZ_CHECK(sum == parsed.total_length);
      const spec::SglKind kind = spec::sgl_kind(sqe.sgl1);
      if (kind == spec::SglKind::last_segment_offset) {
        // MSDBD bounds a list (a lone keyed SGL1 is always one descriptor), and the list the
        // blocks came from lies inside the capsule.
        FUZZ_CHECK(parsed.keyed_count <= limits.max_keyed_descriptors);
        FUZZ_CHECK(capsule_data != nullptr);
        FUZZ_CHECK(sqe.sgl1.address + uint64_t{sqe.sgl1.length()} <= capsule_length);
        FUZZ_CHECK(sqe.sgl1.length() == parsed.keyed_count * spec::sgl_descriptor_size);
        for (uint32_t i = 0; i < parsed.keyed_count; ++i) {
          spec::SglDescriptor entry;
          std::memcpy(&entry, capsule_data + sqe.sgl1.address + i * spec::sgl_descriptor_size,
                      sizeof(entry));
          FUZZ_CHECK(entry.address == parsed.keyed[i].address);
          FUZZ_CHECK(entry.key() == parsed.keyed[i].key);
          if (spec::sgl_kind(entry) == spec::SglKind::keyed_invalidate) {
            FUZZ_CHECK(parsed.invalidate_key && entry.key() == parsed.invalidate_rkey);
          }
        }
      } else {
        FUZZ_CHECK(parsed.keyed_count == 1);
        FUZZ_CHECK(parsed.keyed[0].address == sqe.sgl1.address);
        FUZZ_CHECK(parsed.invalidate_key == (kind == spec::SglKind::keyed_invalidate));
      }
      break;
    }
  }
  return 0;
}
