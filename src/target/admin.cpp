// Admin commands of a controller: Identify, Get Log Page, Set/Get Features, Asynchronous Event
// Request, Keep Alive, Abort. Runs on the admin reactor; reads of subsystem state take the
// target mutex (control path). Behaviour follows SPDK lib/nvmf/ctrlr.c and Linux
// drivers/nvme/target/admin-cmd.c; comments name the source where they differ.
#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "spec/admin.h"
#include "spec/discovery.h"
#include "spec/string_field.h"
#include "target/target.h"

NVMF_LOG_COMPONENT_DECLARE(target);

namespace nvmf::target {

namespace {

// Firmware revision in Identify FR (8 bytes): the project version.
constexpr std::string_view kFirmwareRevision = "0.1.0";
// Entries of the Error Information log (ELPE + 1). The core records none (SPDK neither): the
// page reads as one invalid (all-zero) entry.
constexpr uint32_t kErrorLogEntries = 1;
// RAB: recommended arbitration burst 2^6 (SPDK's value; meaningless on fabrics).
constexpr uint8_t kArbitrationBurst = 6;
// SGLS: SGLs supported (no alignment), keyed SGL data blocks, and the Offset subtype for
// in-capsule data (SPDK: supported, keyed_sgl, sgl_offset).
constexpr uint32_t kSglSupport = spec::sgls_bit::supported_no_alignment |
                                 spec::sgls_bit::keyed_data_block |
                                 spec::sgls_bit::address_as_offset;
// Flush with NSID FFFFFFFFh: bits 2:1 of VWC = 10b "not supported" (SPDK); such a Flush fails
// with Invalid Namespace or Format like any inactive NSID.
constexpr uint8_t kVwcFlushBroadcastNotSupported = 0x2u << 1;
// CTRATT bit 0: 128-bit host identifier (Fabrics requires it).
constexpr uint32_t kCtrattHostId128 = 1u << 0;
// OAES bit 8: Namespace Attribute Notices; bit 31: Discovery Log Page Change notices.
constexpr uint32_t kOaesNamespaceAttribute = 1u << 8;
constexpr uint32_t kOaesDiscoveryLogChange = 1u << 31;

spec::Status invalid_field() noexcept {
  return detail::generic_error(spec::sc_generic::invalid_field);
}

uint32_t log2_of(uint32_t value) noexcept {
  uint32_t result = 0;
  while (value > 1) {
    value >>= 1;
    ++result;
  }
  return result;
}

void put_u128(spec::Uint128& field, uint64_t value) noexcept {
  field.low = value;
  field.high = 0;
}

}  // namespace

void Controller::execute_admin(Request& req) noexcept {
  owner_.check();
  if (state_ != ControllerState::ready) {
    // Not enabled, shut down or failed: only Fabrics commands (SPDK: Command Sequence Error).
    return detail::complete_status(req,
                                   detail::generic_error(spec::sc_generic::command_sequence_error));
  }
  const uint8_t opcode = req.cmd.opcode;
  if (spec::opcode_data_transfer(opcode) == spec::data_transfer::controller_to_host) {
    detail::zero_request(req);  // every byte the transport sends back is defined
  }
  if (subsystem_.is_discovery()) {
    // A discovery controller serves Identify, Get Log Page, Keep Alive, and (Fabrics 1.1) the
    // Keep Alive Timer and Async Event Configuration features with their event requests.
    switch (opcode) {
      case spec::admin_opcode::identify:
      case spec::admin_opcode::get_log_page:
      case spec::admin_opcode::keep_alive:
      case spec::admin_opcode::get_features:
      case spec::admin_opcode::set_features:
      case spec::admin_opcode::async_event_request:
        break;
      default:
        return detail::complete_status(req,
                                       detail::generic_error(spec::sc_generic::invalid_opcode));
    }
  }
  switch (opcode) {
    case spec::admin_opcode::identify:
      return identify(req);
    case spec::admin_opcode::get_log_page:
      return get_log_page(req);
    case spec::admin_opcode::get_features:
      return get_features(req);
    case spec::admin_opcode::set_features:
      return set_features(req);
    case spec::admin_opcode::async_event_request:
      return async_event_request(req);
    case spec::admin_opcode::keep_alive:
      return keep_alive(req);
    case spec::admin_opcode::abort:
      return abort(req);
    default:
      // Includes Create/Delete I/O SQ/CQ, which do not exist on Fabrics.
      NVMF_DEBUGLOG(target, "controller %u: unsupported admin opcode %#x", cntlid_, opcode);
      return detail::complete_status(req, detail::generic_error(spec::sc_generic::invalid_opcode));
  }
}

// ---------------------------------------------------------------------------------------------
// Identify

void Controller::identify(Request& req) noexcept {
  if (req.length < spec::identify_data_size) {
    return detail::complete_status(
        req, detail::generic_error(spec::sc_generic::data_sgl_length_invalid));
  }
  const uint8_t cns = spec::identify_cns(req.cmd);
  if (subsystem_.is_discovery() && cns != spec::cns::controller) {
    return detail::complete_status(req, invalid_field());
  }
  switch (cns) {
    case spec::cns::namespace_data:
      return identify_namespace(req);
    case spec::cns::controller:
      return identify_controller(req);
    case spec::cns::active_namespace_list:
      return identify_active_namespaces(req);
    case spec::cns::namespace_id_descriptor_list:
      return identify_namespace_descriptors(req);
    default:
      return detail::complete_status(req, invalid_field());
  }
}

void Controller::identify_controller(Request& req) noexcept {
  const TargetOpts& opts = target_.opts();
  spec::IdentifyController data{};
  spec::put_space_padded(data.fr, kFirmwareRevision);
  data.mdts = opts.mdts();
  data.cntlid = cntlid_;
  data.ver = vs_;
  data.ctratt = kCtrattHostId128;
  data.lpa = spec::lpa_bit::extended_data;  // NUMDU and LPOL/LPOU are honoured
  data.elpe = kErrorLogEntries - 1;
  data.aerl = kAsyncEventRequestsMax - 1;
  data.kas = static_cast<uint16_t>(opts.keep_alive_granularity_ms / 100);  // 100 ms units
  data.maxcmd = static_cast<uint16_t>(std::min<uint32_t>(opts.max_queue_depth, 0xFFFF));
  data.sgls = kSglSupport;
  spec::put_nul_padded(data.subnqn, subsystem_.nqn());
  if (subsystem_.is_discovery()) {
    data.cntrltype = spec::controller_type::discovery;
    data.oaes = kOaesDiscoveryLogChange;
  } else {
    data.cntrltype = spec::controller_type::io;
    spec::put_space_padded(data.sn, subsystem_.serial_number());
    spec::put_space_padded(data.mn, subsystem_.model_number());
    data.rab = kArbitrationBurst;
    // Several hosts may each have a controller, reachable through several ports (SPDK sets
    // both bits).
    data.cmic = spec::cmic_bit::multiple_ports | spec::cmic_bit::multiple_controllers;
    data.oaes = kOaesNamespaceAttribute;
    data.acl = kAbortsInFlightMax - 1;               // 0's based
    data.sqes = spec::make_queue_entry_sizes(6, 6);  // 64-byte SQEs only
    data.cqes = spec::make_queue_entry_sizes(4, 4);  // 16-byte CQEs only
    data.nn = subsystem_.max_namespaces();
    data.vwc = spec::vwc_bit::present | kVwcFlushBroadcastNotSupported;
    bool all_write_zeroes = true;
    bool all_unmap = true;
    {
      std::lock_guard lock(target_.mutex_);
      for (const auto& ns : subsystem_.namespaces()) {
        if (!ns) continue;
        all_write_zeroes = all_write_zeroes && ns->bdev().supports(bdev::IoType::write_zeroes);
        all_unmap = all_unmap && ns->bdev().supports(bdev::IoType::unmap);
      }
    }
    // Advertised when every namespace's bdev can do it (SPDK checks the same way).
    if (all_write_zeroes) data.oncs |= spec::oncs_bit::write_zeroes;
    if (all_unmap) data.oncs |= spec::oncs_bit::dataset_management;
    // NVMe over Fabrics attributes: capsules hold the SQE plus in-capsule data (16-byte
    // units), responses are bare CQEs, in-capsule data starts right after the SQE, dynamic
    // controller model, Disconnect supported.
    data.ioccsz = (sizeof(spec::Sqe) + opts.in_capsule_data_size) / 16;
    data.iorcsz = sizeof(spec::Cqe) / 16;
    data.icdoff = 0;
    data.fcatt = 0;
    data.msdbd = static_cast<uint8_t>(opts.max_sgl_descriptors);
    data.ofcs = spec::ofcs_bit::disconnect;
  }
  detail::copy_to_request(req, 0, &data, sizeof(data));
  detail::complete_status(req, spec::status_success);
}

void Controller::identify_namespace(Request& req) noexcept {
  const uint32_t nsid = req.cmd.nsid;
  if (nsid == 0 || nsid > subsystem_.max_namespaces()) {
    // FFFFFFFFh (common namespace capabilities) is not supported either (SPDK).
    return detail::complete_status(
        req, detail::generic_error(spec::sc_generic::invalid_namespace_or_format));
  }
  spec::IdentifyNamespace data{};
  {
    std::lock_guard lock(target_.mutex_);
    const Namespace* ns = subsystem_.find_namespace(nsid);
    if (ns == nullptr) {
      // An allocated-but-inactive NSID reads as zeroes (the buffer already is).
      return detail::complete_status(req, spec::status_success);
    }
    const bdev::Bdev& bdev = ns->bdev();
    data.nsze = data.ncap = data.nuse = bdev.block_count();
    data.nlbaf = 0;  // one LBA format
    data.flbas = spec::make_flbas(0, false);
    data.lbaf[0].lbads = static_cast<uint8_t>(log2_of(bdev.block_size_bytes()));
    data.nmic = 1;  // may be attached to several controllers (SPDK: can_share)
    // Deallocated blocks read back as zeroes on backends that store data and deallocate
    // (bdev.h IoType::unmap; an nvme bdev offers unmap only when its device promises zeroes).
    if (std::strcmp(bdev.backend_name(), "null") != 0 && bdev.supports(bdev::IoType::unmap)) {
      data.dlfeat = 0x1;
    }
    put_u128(data.nvmcap, bdev.size_bytes());
    std::memcpy(data.nguid, ns->nguid().data(), sizeof(data.nguid));
    std::memcpy(data.eui64, ns->eui64().data(), sizeof(data.eui64));
  }
  detail::copy_to_request(req, 0, &data, sizeof(data));
  detail::complete_status(req, spec::status_success);
}

void Controller::identify_active_namespaces(Request& req) noexcept {
  const uint32_t after = req.cmd.nsid;
  if (after >= 0xFFFFFFFE) {  // no NSID can follow these (SPDK, spec)
    return detail::complete_status(
        req, detail::generic_error(spec::sc_generic::invalid_namespace_or_format));
  }
  spec::ActiveNamespaceList list{};
  {
    std::lock_guard lock(target_.mutex_);
    size_t count = 0;
    for (const auto& ns : subsystem_.namespaces()) {
      if (!ns || ns->nsid() <= after) continue;
      list.nsid[count++] = ns->nsid();
      if (count == std::size(list.nsid)) break;
    }
  }
  detail::copy_to_request(req, 0, &list, sizeof(list));
  detail::complete_status(req, spec::status_success);
}

void Controller::identify_namespace_descriptors(Request& req) noexcept {
  spec::NamespaceIdentifiers ids;
  {
    std::lock_guard lock(target_.mutex_);
    const Namespace* ns = subsystem_.find_namespace(req.cmd.nsid);
    if (ns == nullptr) {
      return detail::complete_status(
          req, detail::generic_error(spec::sc_generic::invalid_namespace_or_format));
    }
    const auto nonzero = [](const auto& bytes) {
      return std::any_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b != 0; });
    };
    ids.has_eui64 = nonzero(ns->eui64());
    std::memcpy(ids.eui64, ns->eui64().data(), sizeof(ids.eui64));
    ids.has_nguid = nonzero(ns->nguid());
    std::memcpy(ids.nguid, ns->nguid().data(), sizeof(ids.nguid));
    ids.has_uuid = !bdev::uuid_is_null(ns->uuid());
    std::memcpy(ids.uuid, ns->uuid().data(), sizeof(ids.uuid));
  }
  uint8_t list[spec::identify_data_size];
  spec::encode_ns_id_descriptor_list(ids, list, sizeof(list));
  detail::copy_to_request(req, 0, list, sizeof(list));
  detail::complete_status(req, spec::status_success);
}

// ---------------------------------------------------------------------------------------------
// Get Log Page

void Controller::get_log_page(Request& req) noexcept {
  const uint8_t lid = spec::get_log_page_lid(req.cmd);
  const bool rae = spec::get_log_page_rae(req.cmd);
  const uint64_t offset = spec::get_log_page_offset_bytes(req.cmd);
  const uint64_t length = spec::get_log_page_length_bytes(req.cmd);
  if (offset % 4 != 0) return detail::complete_status(req, invalid_field());  // dword offsets
  if (length > req.length) {
    // The host asks for more than its buffer holds.
    return detail::complete_status(
        req, detail::generic_error(spec::sc_generic::data_sgl_length_invalid));
  }
  const bool discovery = subsystem_.is_discovery();
  if (discovery != (lid == spec::log_page::discovery)) {
    // Discovery controllers serve only the discovery log, I/O controllers never (SPDK).
    return detail::complete_status(req, invalid_field());
  }

  // Writes [offset, offset + length) of a page of `size` bytes; past its end stays zero.
  const auto serve = [&](const void* page, uint64_t size) {
    if (offset >= size) return false;  // nothing of the page at that offset
    detail::copy_to_request(req, 0, static_cast<const uint8_t*>(page) + offset,
                            std::min(length, size - offset));
    return true;
  };

  switch (lid) {
    case spec::log_page::error_information: {
      spec::ErrorInformationEntry entries[kErrorLogEntries] = {};
      if (!serve(entries, sizeof(entries))) return detail::complete_status(req, invalid_field());
      return detail::complete_status(req, spec::status_success);
    }
    case spec::log_page::smart_health: {
      // Controller-wide only (LPA bit 0 clear): NSID must be 0 or FFFFFFFFh.
      if (req.cmd.nsid != spec::nsid_none && req.cmd.nsid != spec::nsid_all) {
        return detail::complete_status(req, invalid_field());
      }
      spec::SmartHealthLog log{};
      uint64_t bytes_read = 0;
      uint64_t bytes_written = 0;
      uint64_t reads = 0;
      uint64_t writes = 0;
      {
        std::lock_guard lock(target_.mutex_);
        for (const auto& ns : subsystem_.namespaces()) {
          if (!ns) continue;
          const bdev::IoStats stats = ns->bdev().stats();
          bytes_read += stats.bytes_of(bdev::IoType::read);
          bytes_written += stats.bytes_of(bdev::IoType::write);
          reads += stats.ops_of(bdev::IoType::read);
          writes += stats.ops_of(bdev::IoType::write);
        }
      }
      // Data units are thousands of 512-byte units, rounded up.
      constexpr uint64_t kDataUnitBytes = 512 * 1000;
      put_u128(log.data_units_read, (bytes_read + kDataUnitBytes - 1) / kDataUnitBytes);
      put_u128(log.data_units_written, (bytes_written + kDataUnitBytes - 1) / kDataUnitBytes);
      put_u128(log.host_read_commands, reads);
      put_u128(log.host_write_commands, writes);
      if (!serve(&log, sizeof(log))) return detail::complete_status(req, invalid_field());
      return detail::complete_status(req, spec::status_success);
    }
    case spec::log_page::changed_namespace_list: {
      spec::ChangedNamespaceList list{};
      bool served = false;
      {
        std::lock_guard lock(target_.mutex_);
        constexpr uint32_t capacity = std::size(list.nsid);
        if (changed_namespace_count_ > capacity) {
          list.nsid[0] = spec::changed_namespace_list_overflow;
        } else {
          std::copy_n(changed_namespaces_, changed_namespace_count_, list.nsid);
        }
        served = serve(&list, sizeof(list));
        if (served && !rae) {
          // Reading clears the list and re-arms the notice (unless Retain Asynchronous Event).
          changed_namespace_count_ = 0;
          // The host has now seen every change: a notice raised while masked is consumed too.
          masked_events_ &= ~event_bit::namespace_attribute_changed;
          pending_events_ &= ~event_bit::namespace_attribute_changed;
        }
      }
      if (!served) return detail::complete_status(req, invalid_field());
      detail::complete_status(req, spec::status_success);
      return process_events();
    }
    case spec::log_page::discovery: {
      bool served = false;
      {
        std::lock_guard lock(target_.mutex_);
        const uint64_t size = target_.discovery_log_size_locked(hostnqn_);
        if (offset < size) {
          target_.discovery_log_read_locked(hostnqn_, req, offset, std::min(length, size - offset));
          served = true;
          if (!rae) {
            masked_events_ &= ~event_bit::discovery_log_changed;
            pending_events_ &= ~event_bit::discovery_log_changed;
          }
        }
      }
      if (!served) return detail::complete_status(req, invalid_field());
      detail::complete_status(req, spec::status_success);
      return process_events();
    }
    default:
      // SPDK and Linux answer Invalid Field for log pages they do not implement.
      return detail::complete_status(req, invalid_field());
  }
}

// ---------------------------------------------------------------------------------------------
// Features

void Controller::set_features(Request& req) noexcept {
  if (spec::set_features_save(req.cmd)) {
    // Nothing is saveable (ONCS bit 4 clear).
    return detail::complete_status(req,
                                   detail::status_error(spec::sct::command_specific,
                                                        spec::sc_command::feature_id_not_saveable));
  }
  const uint32_t value = req.cmd.cdw11;
  const bool discovery = subsystem_.is_discovery();
  switch (spec::features_fid(req.cmd)) {
    case spec::feature::number_of_queues: {
      if (discovery) break;
      if ((value & 0xFFFF) == 0xFFFF || (value >> 16) == 0xFFFF) {
        return detail::complete_status(req, invalid_field());  // FFFFh is invalid (base spec)
      }
      const uint32_t max = target_.opts().max_qpairs_per_ctrlr - 1;
      const uint32_t sq = std::min(spec::number_of_queues_sq_count(value), max);
      const uint32_t cq = std::min(spec::number_of_queues_cq_count(value), max);
      {
        std::lock_guard lock(target_.mutex_);
        if (attached_ > 1) {
          // I/O queues already exist (SPDK: Command Sequence Error).
          return detail::complete_status(
              req, detail::generic_error(spec::sc_generic::command_sequence_error));
        }
        io_queues_granted_ = std::min(sq, cq);  // a queue pair needs one SQ and one CQ
        num_queues_dw0_ = spec::encode_number_of_queues(sq, cq);
      }
      req.rsp.cdw0 = num_queues_dw0_;
      return detail::complete_status(req, spec::status_success);
    }
    case spec::feature::keep_alive_timer: {
      if (value == 0) {
        kato_ms_ = 0;  // disables the timer (base spec)
      } else {
        const uint64_t unit = target_.opts().keep_alive_granularity_ms;
        kato_ms_ = static_cast<uint32_t>(std::min<uint64_t>(
            (uint64_t{value} + unit - 1) / unit * unit, UINT32_MAX / unit * unit));
      }
      arm_keep_alive();
      return detail::complete_status(req, spec::status_success);
    }
    case spec::feature::async_event_configuration: {
      const uint32_t supported = discovery ? spec::async_event_config_bit::discovery_log_page_change
                                           : spec::async_event_config_bit::namespace_attribute;
      {
        std::lock_guard lock(target_.mutex_);
        async_event_config_ = value & supported;
      }
      return detail::complete_status(req, spec::status_success);
    }
    case spec::feature::volatile_write_cache:
      if (discovery) break;
      volatile_write_cache_enabled_ = spec::volatile_write_cache_enabled(value);
      return detail::complete_status(req, spec::status_success);
    default:
      break;
  }
  detail::complete_status(req, invalid_field());
}

void Controller::get_features(Request& req) noexcept {
  // SEL is not honoured: current values only, like SPDK.
  const bool discovery = subsystem_.is_discovery();
  switch (spec::features_fid(req.cmd)) {
    case spec::feature::number_of_queues:
      if (discovery) break;
      {
        std::lock_guard lock(target_.mutex_);
        req.rsp.cdw0 = num_queues_dw0_;
      }
      return detail::complete_status(req, spec::status_success);
    case spec::feature::keep_alive_timer:
      req.rsp.cdw0 = kato_ms_;
      return detail::complete_status(req, spec::status_success);
    case spec::feature::async_event_configuration: {
      std::lock_guard lock(target_.mutex_);
      req.rsp.cdw0 = async_event_config_;
    }
      return detail::complete_status(req, spec::status_success);
    case spec::feature::volatile_write_cache:
      if (discovery) break;
      req.rsp.cdw0 = volatile_write_cache_enabled_ ? 1 : 0;
      return detail::complete_status(req, spec::status_success);
    default:
      break;
  }
  detail::complete_status(req, invalid_field());
}

// ---------------------------------------------------------------------------------------------
// Asynchronous Event Request, Keep Alive, Abort

void Controller::async_event_request(Request& req) noexcept {
  if (held_event_count_ >= kAsyncEventRequestsMax) {
    return detail::complete_status(
        req, spec::command_specific_status(spec::sc_command::async_event_request_limit_exceeded));
  }
  req.state = RequestState::held_event;
  held_events_[held_event_count_++] = &req;
  process_events();  // an event may be waiting already
}

void Controller::keep_alive(Request& req) noexcept {
  // Only Keep Alive restarts the timer (SPDK; we do not claim Traffic Based Keep Alive).
  arm_keep_alive();
  detail::complete_status(req, spec::status_success);
}

void Controller::abort(Request& req) noexcept {
  const uint16_t sqid = spec::abort_sqid(req.cmd.cdw10);
  const uint16_t cid = spec::abort_cid(req.cmd.cdw10);
  Qpair& admin = *req.qpair;
  if (admin.aborts_in_flight_ >= kAbortsInFlightMax) {
    return detail::complete_status(
        req, spec::command_specific_status(spec::sc_command::abort_command_limit_exceeded));
  }
  // DW0 bit 0: 0 = the command was aborted, 1 = it was not (it completed, is executing, or
  // was never there). Either way the Abort itself succeeds.
  req.rsp.cdw0 = 1;
  req.abort_target = req.cmd.cdw10;
  req.abort_after_transfer = false;
  if (sqid == 0) return abort_on_admin_queue(req, cid);
  {
    std::lock_guard lock(target_.mutex_);
    Qpair* target_qpair = qpair(sqid);
    if (target_qpair != nullptr) {
      // The queue belongs to some reactor (maybe this one): its poll group looks through its
      // commands waiting for the bdev, then asks the transport, and sends the answer back
      // through our poll group.
      req.state = RequestState::cross_reactor;
      req.abort_qpair = target_qpair;
      ++admin.aborts_in_flight_;
      target_qpair->abort_inbox_.push_back(req);
      target_qpair->group_.raise_attention();
      return;
    }
  }
  detail::complete_status(req, spec::status_success);
}

void Controller::abort_on_admin_queue(Request& req, uint16_t cid) noexcept {
  Qpair& admin = *req.qpair;
  // Held event requests are the only admin commands the core keeps waiting.
  for (unsigned i = 0; i < held_event_count_; ++i) {
    Request* held = held_events_[i];
    if (held->cmd.cid != cid || held == &req) continue;
    for (unsigned j = i + 1; j < held_event_count_; ++j) held_events_[j - 1] = held_events_[j];
    --held_event_count_;
    detail::complete_status(*held, spec::generic_status(spec::sc_generic::abort_requested));
    req.rsp.cdw0 = 0;
    return detail::complete_status(req, spec::status_success);
  }
  // An admin command the transport still holds (a Get Log Page waiting for a data buffer).
  const TransportAbort found = admin.ops_.abort_request == nullptr
                                   ? TransportAbort::not_found
                                   : admin.ops_.abort_request(admin.ops_.ctx, admin, cid);
  if (found == TransportAbort::after_transfer) {
    // Answered by refuse_aborted() once the command's data has arrived.
    std::lock_guard lock(target_.mutex_);
    req.state = RequestState::cross_reactor;
    req.abort_qpair = &admin;
    req.abort_after_transfer = true;
    ++admin.aborts_in_flight_;
    admin.abort_inbox_.push_back(req);
    return;
  }
  req.rsp.cdw0 = found == TransportAbort::aborted ? 0 : 1;
  detail::complete_status(req, spec::status_success);
}

}  // namespace nvmf::target
