// The discovery log page (LID 70h), built on the fly for one host: a 1024-byte header, then
// one 1024-byte entry per (subsystem that allows the host) x (listener of that subsystem).
// Only the bytes the host asked for are produced, straight into its buffer, so a page of any
// size needs no allocation. Called with the target mutex held, so GENCTR, NUMREC and the
// entries of one read always agree.
#include <algorithm>
#include <cstring>

#include "spec/discovery.h"
#include "spec/string_field.h"
#include "target/target.h"

namespace nvmf::target {

namespace {

// Copies the part of [region_start, region_start + size) that overlaps the requested window
// [offset, offset + length) into the request buffer (which starts at `offset`).
void copy_window(Request& req, uint64_t offset, uint64_t length, uint64_t region_start,
                 const void* data, uint64_t size) noexcept {
  const uint64_t begin = std::max(offset, region_start);
  const uint64_t end = std::min(offset + length, region_start + size);
  if (begin >= end) return;
  detail::copy_to_request(req, begin - offset,
                          static_cast<const uint8_t*>(data) + (begin - region_start), end - begin);
}

}  // namespace

uint64_t Target::discovery_log_size_locked(std::string_view hostnqn) const noexcept {
  uint64_t records = 0;
  for (const auto& subsystem : subsystems_) {
    if (subsystem->removed() || subsystem->is_discovery() || !subsystem->host_allowed(hostnqn)) {
      continue;
    }
    records += subsystem->listeners().size();
  }
  return spec::discovery_log_page_size(records);
}

void Target::discovery_log_read_locked(std::string_view hostnqn, Request& req, uint64_t offset,
                                       uint64_t length) const noexcept {
  spec::DiscoveryLogPageHeader header{};
  header.genctr = discovery_generation();
  header.numrec = (discovery_log_size_locked(hostnqn) - spec::discovery_log_header_size) /
                  spec::discovery_log_entry_size;
  header.recfmt = 0;
  copy_window(req, offset, length, 0, &header, sizeof(header));

  uint64_t position = spec::discovery_log_header_size;
  for (const auto& subsystem : subsystems_) {
    if (subsystem->removed() || subsystem->is_discovery() || !subsystem->host_allowed(hostnqn)) {
      continue;
    }
    for (const ListenerAddress& address : subsystem->listeners()) {
      if (position >= offset + length) return;  // past the window: stop building entries
      if (position + spec::discovery_log_entry_size > offset) {
        spec::DiscoveryLogEntry entry{};
        entry.trtype = address.trtype;
        entry.adrfam = address.adrfam;
        entry.subtype = spec::subsystem_type::nvm;
        // We honour CATTR "disable SQ flow control"; no secure channel is needed.
        entry.treq =
            spec::treq::secure_channel_not_required | spec::treq::sq_flow_control_disable_supported;
        const auto port = std::find(ports_.begin(), ports_.end(), address);
        entry.portid = static_cast<uint16_t>(port - ports_.begin() + 1);
        entry.cntlid = spec::cntlid_dynamic;
        entry.asqsz =
            static_cast<uint16_t>(std::min<uint32_t>(opts_.max_admin_queue_depth, 0xFFFF));
        spec::put_nul_padded(entry.trsvcid, address.trsvcid);
        spec::put_nul_padded(entry.subnqn, subsystem->nqn());
        spec::put_nul_padded(entry.traddr, address.traddr);
        if (address.trtype == spec::trtype::rdma) {
          spec::set_entry_rdma_tsas(entry, spec::make_rdma_tsas(spec::rdma_prtype::not_specified));
        }
        copy_window(req, offset, length, position, &entry, sizeof(entry));
      }
      position += spec::discovery_log_entry_size;
    }
  }
}

}  // namespace nvmf::target
