// The I/O path: Read, Write, Flush, Write Zeroes and Dataset Management mapped onto the
// namespace's bdev through this reactor's channel. No lock, no allocation: the BdevIo lives in
// the Request, a busy bdev parks the Request on its namespace's lane (BdevLane), and the
// poller retries it. Checks and statuses follow SPDK lib/nvmf/ctrlr_bdev.c.
//
// The request state machine (RequestState, request.h):
//   executing -> need_bdev            checks passed, the bdev I/O is described
//   need_bdev -> need_bdev            the channel is busy: wait on the lane
//   need_bdev -> bdev_submitted       the channel took it
//   need_bdev -> complete             the bdev refused it (mapped to a status)
//   bdev_submitted -> bdev_done       the BdevIo callback ran
//   bdev_done -> need_bdev            Dataset Management: the next range
//   bdev_done -> complete             finished (status mapped from the bdev), or the queue
//                                     pair is being destroyed (no next range)
//   bdev_submitted -> free            the queue pair was abandoned: dropped, request_released
//   complete -> free                  request_complete()
// advance() loops until the state stops changing; the callback only sets a state and calls it.
#include <cstring>

#include "common/log.h"
#include "target/target.h"

NVMF_LOG_COMPONENT_DECLARE(target);

namespace nvmf::target {

namespace {

spec::Status map_io_status(const bdev::BdevIo& io) noexcept {
  switch (io.status) {
    case bdev::IoStatus::success:
      return spec::status_success;
    case bdev::IoStatus::io_error:
      // The bdev header's mapping: a failed write is a Write Fault, a failed read an
      // Unrecovered Read Error, anything else an Internal Error.
      if (io.type == bdev::IoType::write) {
        return spec::make_status(spec::sct::media_data_integrity, spec::sc_media::write_fault);
      }
      if (io.type == bdev::IoType::read) {
        return spec::make_status(spec::sct::media_data_integrity,
                                 spec::sc_media::unrecovered_read_error);
      }
      return spec::generic_status(spec::sc_generic::internal_error);
    case bdev::IoStatus::no_space:
      return spec::generic_status(spec::sc_generic::capacity_exceeded);
    case bdev::IoStatus::aborted:
      return spec::generic_status(spec::sc_generic::aborted_sq_deletion);
    case bdev::IoStatus::nvme_error:
      // The bdev chose the status (the error bdev's injected failures): passed on as is.
      return spec::make_status(io.nvme_sct, io.nvme_sc, io.nvme_dnr);
    case bdev::IoStatus::pending:
      break;
  }
  return spec::generic_status(spec::sc_generic::internal_error);
}

bdev::IoType io_type_of(uint8_t opcode) noexcept {
  switch (opcode) {
    case spec::nvm_opcode::read:
      return bdev::IoType::read;
    case spec::nvm_opcode::write:
      return bdev::IoType::write;
    case spec::nvm_opcode::flush:
      return bdev::IoType::flush;
    case spec::nvm_opcode::write_zeroes:
      return bdev::IoType::write_zeroes;
    default:
      return bdev::IoType::unmap;  // Dataset Management (deallocate)
  }
}

void fail(Request& req, const spec::Status& status) noexcept {
  req.state = RequestState::complete;
  detail::complete_status(req, status);
}

}  // namespace

// Here rather than in target.cpp so that advance() below inlines it: the I/O path finishes
// every command through it.
void detail::finish(Request& req) noexcept {
  Qpair& qpair = *req.qpair;
  req.rsp.cid = req.cmd.cid;
  req.rsp.sqid = qpair.qid_;
  // With SQ flow control disabled SQHD is not maintained; FFFFh as the Linux target reports.
  req.rsp.sqhd = qpair.sq_flow_control_disabled_ ? 0xFFFF : qpair.sq_head_;
  req.rsp.status = static_cast<uint16_t>(req.rsp.status & ~1u);  // phase tag: PCIe only
  assert(qpair.outstanding_ > 0);
  --qpair.outstanding_;
  req.state = RequestState::free;
  qpair.ops_.request_complete(qpair.ops_.ctx, req);
}

// Here rather than in poll_group.cpp, and inline: execute_io() looks up every command's
// namespace, and a call per command costs as much as the lookup.
inline PollGroup::NsSlot* PollGroup::lookup_namespace(Subsystem& subsystem,
                                                      uint32_t nsid) noexcept {
  if (subsystem.id() >= subsystems_.size()) return nullptr;
  SubsystemSlot& slot = subsystems_[subsystem.id()];
  if (slot.subsystem == nullptr) return nullptr;  // no I/O queue of it connected here
  // One acquire load per command: a namespace added or removed since the last look makes this
  // reactor refresh its table first (control path, rare).
  if (slot.generation != subsystem.ns_generation()) refresh_namespaces(slot);
  if (nsid == 0 || nsid > slot.ns.size()) return nullptr;
  NsSlot& ns = slot.ns[nsid - 1];
  return ns.lane ? &ns : nullptr;
}

void PollGroup::execute_io(Request& req) noexcept {
  Qpair& qpair = *req.qpair;
  Controller& controller = *qpair.controller_;
  const spec::Sqe& cmd = req.cmd;
  if (!controller.io_ready()) {
    // Disabled, shut down or failed controller (SPDK: Command Sequence Error).
    return fail(req, detail::generic_error(spec::sc_generic::command_sequence_error));
  }
  switch (cmd.opcode) {
    case spec::nvm_opcode::read:
    case spec::nvm_opcode::write:
    case spec::nvm_opcode::flush:
    case spec::nvm_opcode::write_zeroes:
    case spec::nvm_opcode::dataset_management:
      break;
    default:
      return fail(req, detail::generic_error(spec::sc_generic::invalid_opcode));
  }
  if (cmd.fuse() != spec::fuse::normal) {
    // Fused operations are not supported (Identify FUSES = 0).
    return fail(req, detail::generic_error(spec::sc_generic::invalid_field));
  }
  NsSlot* ns = lookup_namespace(controller.subsystem(), cmd.nsid);
  if (ns == nullptr) {
    return fail(req, detail::generic_error(spec::sc_generic::invalid_namespace_or_format));
  }
  const bdev::IoType type = io_type_of(cmd.opcode);
  if ((ns->io_types & bdev::io_type_bit(type)) == 0) {
    // Not advertised in ONCS for this namespace's bdev.
    return fail(req, detail::generic_error(spec::sc_generic::invalid_opcode));
  }

  bdev::BdevIo& io = req.bdev_io;
  io.type = type;
  io.iov = nullptr;
  io.iovcnt = 0;
  io.offset_blocks = 0;
  io.num_blocks = 0;
  io.done = &PollGroup::bdev_done;
  io.done_ctx = &req;
  req.lane = ns->lane.get();

  switch (cmd.opcode) {
    case spec::nvm_opcode::read:
    case spec::nvm_opcode::write: {
      const uint64_t lba = spec::rw_starting_lba(cmd);
      const uint64_t blocks = spec::rw_block_count(cmd);
      if (!range_within(lba, blocks, ns->block_count)) {  // overflow-safe: LBA + NLB may wrap
        return fail(req, detail::generic_error(spec::sc_generic::lba_out_of_range));
      }
      const uint64_t bytes = blocks << ns->block_shift;
      if (bytes > target_.opts().max_io_size) {  // above MDTS
        return fail(req, detail::generic_error(spec::sc_generic::invalid_field));
      }
      if (bytes != req.length) {
        // The host's SGL does not describe exactly NLB blocks.
        return fail(req, detail::generic_error(spec::sc_generic::data_sgl_length_invalid));
      }
      io.offset_blocks = lba;
      io.num_blocks = blocks;
      io.iov = req.iov;
      io.iovcnt = req.iovcnt;
      break;
    }
    case spec::nvm_opcode::flush:
      break;  // the whole device: bdev.h allows 0/0 for flush
    case spec::nvm_opcode::write_zeroes: {
      const uint64_t lba = spec::rw_starting_lba(cmd);
      const uint64_t blocks = spec::rw_block_count(cmd);
      if (!range_within(lba, blocks, ns->block_count)) {
        return fail(req, detail::generic_error(spec::sc_generic::lba_out_of_range));
      }
      io.offset_blocks = lba;
      io.num_blocks = blocks;
      break;
    }
    case spec::nvm_opcode::dataset_management: {
      const uint32_t ranges = spec::dsm_range_count(cmd);
      if (uint64_t{ranges} * sizeof(spec::DsmRange) > req.length) {
        return fail(req, detail::generic_error(spec::sc_generic::data_sgl_length_invalid));
      }
      if (!spec::dsm_deallocate(cmd)) {
        // Only deallocate does something; the other attributes are hints (SPDK completes
        // such a command successfully).
        req.state = RequestState::complete;
        return detail::complete_status(req, spec::status_success);
      }
      // Check every range before touching any, so a bad one changes nothing.
      for (uint32_t i = 0; i < ranges; ++i) {
        spec::DsmRange range;
        detail::copy_from_request(req, uint64_t{i} * sizeof(range), &range, sizeof(range));
        if (range.block_count != 0 &&
            !range_within(range.starting_lba, range.block_count, ns->block_count)) {
          return fail(req, detail::generic_error(spec::sc_generic::lba_out_of_range));
        }
      }
      req.dsm_range_count = static_cast<uint16_t>(ranges);
      req.dsm_range_next = 0;
      if (!prepare_dsm_range(req)) {  // every range was empty
        req.state = RequestState::complete;
        return detail::complete_status(req, spec::status_success);
      }
      break;
    }
  }

  req.state = RequestState::need_bdev;
  if (!req.lane->waiting.empty()) {
    // Older commands wait for this bdev: keep their order. Other namespaces are not held up.
    wait_on_lane(req);
    return;
  }
  advance(req);
}

void PollGroup::wait_on_lane(Request& req) noexcept {
  req.lane->waiting.push_back(req);
  ++req.qpair->waiting_for_bdev_;
  ++pending_requests_;
  PollGroupCounters::bump(counters_.bdev_busy_waits);
}

void PollGroup::leave_lane(Request& req) noexcept {
  req.lane->waiting.remove(req);
  --req.qpair->waiting_for_bdev_;
  --pending_requests_;
}

bool PollGroup::prepare_dsm_range(Request& req) noexcept {
  while (req.dsm_range_next < req.dsm_range_count) {
    spec::DsmRange range;
    detail::copy_from_request(req, uint64_t{req.dsm_range_next} * sizeof(range), &range,
                              sizeof(range));
    ++req.dsm_range_next;
    if (range.block_count == 0) continue;
    req.bdev_io.offset_blocks = range.starting_lba;
    req.bdev_io.num_blocks = range.block_count;
    return true;
  }
  return false;
}

inline bool PollGroup::submit(Request& req) noexcept {
  bdev::IoChannel& channel = *req.lane->channel;
  auto submitted = channel.submit(req.bdev_io);
  if (submitted) {
    req.state = RequestState::bdev_submitted;
    ++req.qpair->in_bdev_;
    ++in_bdev_;
    return true;
  }
  if (submitted.error().code == Errc::busy) return false;
  // The checks above make these unexpected; map them anyway.
  NVMF_ERRLOG(target, "bdev %s refused %s: %s", channel.bdev().name().c_str(),
              bdev::io_type_name(req.bdev_io.type), errc_name(submitted.error().code));
  spec::Status status = spec::generic_status(spec::sc_generic::internal_error);
  if (submitted.error().code == Errc::not_supported) {
    status = detail::generic_error(spec::sc_generic::invalid_opcode);
  } else if (submitted.error().code == Errc::out_of_range) {
    status = detail::generic_error(spec::sc_generic::lba_out_of_range);
  }
  req.rsp.set_status(status);
  req.state = RequestState::complete;
  return true;
}

inline void PollGroup::advance(Request& req) noexcept {
  for (;;) {
    switch (req.state) {
      case RequestState::need_bdev:
        if (!submit(req)) {
          // Busy: wait on the lane (no allocation; the poller retries in order).
          if (!req.link.linked()) wait_on_lane(req);
          return;
        }
        if (req.link.linked()) leave_lane(req);
        continue;  // bdev_submitted, or complete when the bdev refused
      case RequestState::bdev_submitted:
        return;  // the BdevIo callback continues
      case RequestState::bdev_done:
        // A queue pair being destroyed takes no new bdev work: its teardown waits only for
        // what is inside already.
        if (req.rsp.decoded_status().is_success() &&
            req.cmd.opcode == spec::nvm_opcode::dataset_management &&
            req.qpair->state_ != QpairState::destroying && prepare_dsm_range(req)) {
          req.state = RequestState::need_bdev;
        } else {
          req.state = RequestState::complete;
        }
        continue;
      case RequestState::complete:
        return detail::finish(req);
      default:
        assert(false && "request in a state advance() does not handle");
        return;
    }
  }
}

void PollGroup::bdev_done(bdev::BdevIo& io, void* ctx) noexcept {
  auto& req = *static_cast<Request*>(ctx);
  PollGroup& group = req.qpair->group_;
  assert(req.state == RequestState::bdev_submitted);
  if (req.qpair->state_ == QpairState::abandoned) return group.drop_late_completion(req);
  --req.qpair->in_bdev_;
  --group.in_bdev_;
  // The status is still success here (execute() cleared rsp, and a failed range ends a
  // Dataset Management command): only a failure needs mapping and encoding.
  assert(req.rsp.status == 0);
  if (io.status != bdev::IoStatus::success) req.rsp.set_status(map_io_status(io));
  req.state = RequestState::bdev_done;
  group.advance(req);
}

void PollGroup::drop_late_completion(Request& req) noexcept {
  Qpair& qpair = *req.qpair;
  --qpair.in_bdev_;
  --in_bdev_;
  --qpair.outstanding_;
  PollGroupCounters::bump(counters_.late_completions);
  req.state = RequestState::free;
  // The transport may free the memory `req` lives in: it is not touched after this.
  qpair.ops_.request_released(qpair.ops_.ctx, req);
  if (qpair.in_bdev_ > 0) return;
  NVMF_INFOLOG(target, "queue %u: the last command it left inside a bdev came back", qpair.qid());
  abandoned_.remove(qpair);
  delete &qpair;
}

int PollGroup::retry_pending(unsigned budget) noexcept {
  int work = 0;
  // A command that completes here (the bdev refused it) may let the transport execute new
  // ones, which may refresh the namespace table: lanes_ is rebuilt after the walk, not in it.
  const bool outer_walk = polling_channels_;
  polling_channels_ = true;
  for (BdevLane* lane : lanes_) {
    while (!lane->waiting.empty() && static_cast<unsigned>(work) < budget) {
      Request& req = lane->waiting.front();
      advance(req);
      if (req.link.linked()) break;  // still busy: the rest of this lane waits behind it
      ++work;
    }
  }
  polling_channels_ = outer_walk;
  if (!polling_channels_ && channel_list_stale_) rebuild_channel_list();
  return work;
}

}  // namespace nvmf::target
