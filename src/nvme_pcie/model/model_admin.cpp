// ModelController: the admin command set (Identify, Get Log Page, Set / Get Features, Create /
// Delete I/O queues, Abort, Asynchronous Event Request, Keep Alive).
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/log.h"
#include "nvme_pcie/model/model_controller.h"
#include "spec/pcie.h"
#include "spec/string_field.h"

NVMF_LOG_COMPONENT_DECLARE(nvme_model);

namespace nvmf::nvme_pcie::model {

namespace {

using spec::Sqe;
using spec::Status;

constexpr uint16_t kPciVendorId = 0x1B36;  // Red Hat, as QEMU's emulated NVMe
constexpr uint16_t kPciSubsystemVendorId = 0x1AF4;
constexpr uint8_t kAbortLimit0sBased = 3;       // ACL: 4 Aborts outstanding
constexpr uint8_t kAsyncEventLimit0sBased = 3;  // AERL: 4 AERs outstanding
constexpr uint16_t kMaxPowerCentiwatts = 2500;  // PSD0: a 25 W device
constexpr uint32_t kErrorLogEntries = 1;        // ELPE 0
constexpr uint16_t kCompositeTemperatureKelvin = 313;

Status generic(uint8_t code) noexcept { return spec::generic_status(code, true); }
Status command_specific(uint8_t code) noexcept { return spec::command_specific_status(code, true); }

uint8_t log2_of(uint32_t value) noexcept {
  uint8_t result = 0;
  while ((value >> result) > 1) ++result;
  return result;
}

bool is_zero(const uint8_t* bytes, size_t size) noexcept {
  return std::all_of(bytes, bytes + size, [](uint8_t b) { return b == 0; });
}

}  // namespace

ModelController::Outcome ModelController::execute_admin_locked(const Sqe& sqe) noexcept {
  namespace op = spec::admin_opcode;
  switch (sqe.opcode) {
    case op::identify:
      return identify_locked(sqe);
    case op::get_log_page:
      return get_log_page_locked(sqe);
    case op::set_features:
      return set_features_locked(sqe);
    case op::get_features:
      return get_features_locked(sqe);
    case op::create_io_cq:
      return create_io_cq_locked(sqe);
    case op::create_io_sq:
      return create_io_sq_locked(sqe);
    case op::delete_io_sq:
      return delete_io_sq_locked(sqe);
    case op::delete_io_cq:
      return delete_io_cq_locked(sqe);
    case op::abort:
      return abort_locked(sqe);
    case op::async_event_request:
      return async_event_request_locked(sqe);
    case op::keep_alive:
      return Outcome{};  // nothing times out in the model
    default:
      return Outcome{generic(spec::sc_generic::invalid_opcode)};
  }
}

// --- Identify ---

ModelController::Outcome ModelController::identify_locked(const Sqe& sqe) noexcept {
  // Every structure is 4096 bytes; build it on the stack, then DMA it out.
  union {
    spec::IdentifyController controller;
    spec::IdentifyNamespace ns;
    spec::ActiveNamespaceList list;
    uint8_t bytes[spec::identify_data_size];
  } data;
  std::memset(&data, 0, sizeof(data));
  Status status = spec::status_success;
  switch (spec::identify_cns(sqe)) {
    case spec::cns::namespace_data:
      status = fill_identify_namespace_locked(sqe.nsid, &data.ns);
      break;
    case spec::cns::controller:
      fill_identify_controller_locked(&data.controller);
      break;
    case spec::cns::active_namespace_list:
      status = fill_namespace_list_locked(sqe.nsid, &data.list);
      break;
    case spec::cns::namespace_id_descriptor_list:
      status = fill_descriptor_list_locked(sqe.nsid, data.bytes);
      break;
    default:
      status = generic(spec::sc_generic::invalid_field);
      break;
  }
  if (!status.is_success()) return Outcome{status};
  return Outcome{transfer_locked(sqe, sizeof(data), false, true, data.bytes, sizeof(data))};
}

void ModelController::fill_identify_controller_locked(spec::IdentifyController* id) const noexcept {
  id->vid = kPciVendorId;
  id->ssvid = kPciSubsystemVendorId;
  spec::put_space_padded(id->sn, sizeof(id->sn), opts_.serial);
  spec::put_space_padded(id->mn, sizeof(id->mn), opts_.model_number);
  spec::put_space_padded(id->fr, sizeof(id->fr), opts_.firmware);
  id->mdts = opts_.mdts;
  id->cntlid = opts_.cntlid;
  id->ver = vs_;
  id->oaes = spec::async_event_config_bit::namespace_attribute;
  id->cntrltype = spec::controller_type::io;
  id->oacs = 0;
  id->acl = kAbortLimit0sBased;
  id->aerl = kAsyncEventLimit0sBased;
  id->lpa = spec::lpa_bit::extended_data;  // Get Log Page honours LPOL/LPOU
  id->elpe = kErrorLogEntries - 1;
  id->npss = 0;
  id->psd[0].mp = kMaxPowerCentiwatts;
  id->sqes = spec::make_queue_entry_sizes(spec::pcie::io_sq_entry_size_log2,
                                          spec::pcie::io_sq_entry_size_log2);
  id->cqes = spec::make_queue_entry_sizes(spec::pcie::io_cq_entry_size_log2,
                                          spec::pcie::io_cq_entry_size_log2);
  id->nn = nn_;
  id->oncs = spec::oncs_bit::dataset_management | spec::oncs_bit::write_zeroes;
  if (opts_.volatile_write_cache) {
    id->vwc = spec::vwc_bit::present | spec::vwc_bit::flush_broadcast_supported;
  }
  id->sgls = opts_.sgl_supported ? spec::sgls_bit::supported_no_alignment : 0;
  // No configured NQN: the spec's default form, "nqn.2014.08.org.nvmexpress:" + VID + SSVID
  // (4 hex digits each) + SN + MN as they appear in this structure.
  char nqn[sizeof(id->subnqn)];
  std::snprintf(nqn, sizeof(nqn), "nqn.2014.08.org.nvmexpress:%04x%04x%.20s%.40s", id->vid,
                id->ssvid, id->sn, id->mn);
  spec::put_nul_padded(id->subnqn, sizeof(id->subnqn), nqn);
}

const ModelController::NamespaceState* ModelController::find_namespace_locked(
    uint32_t nsid) const noexcept {
  for (const NamespaceState& ns : namespaces_) {
    if (ns.config.nsid == nsid) return &ns;
  }
  return nullptr;
}

Status ModelController::fill_identify_namespace_locked(uint32_t nsid,
                                                       spec::IdentifyNamespace* id) const noexcept {
  if (nsid == spec::nsid_none || nsid == spec::nsid_all || nsid > nn_) {
    return generic(spec::sc_generic::invalid_namespace_or_format);
  }
  const NamespaceState* ns = find_namespace_locked(nsid);
  if (ns == nullptr || !ns->active) return spec::status_success;  // inactive: all zeroes
  id->nsze = id->ncap = id->nuse = ns->config.block_count;
  id->nlbaf = 0;  // one format
  id->flbas = spec::make_flbas(0, false);
  id->dlfeat = 0x01;  // bits 2:0 = 001b: deallocated blocks read as zeroes
  id->lbaf[0].lbads = log2_of(ns->config.block_size_bytes);
  std::memcpy(id->nguid, ns->config.nguid.data(), sizeof(id->nguid));
  std::memcpy(id->eui64, ns->config.eui64.data(), sizeof(id->eui64));
  return spec::status_success;
}

Status ModelController::fill_namespace_list_locked(uint32_t after_nsid,
                                                   spec::ActiveNamespaceList* list) const noexcept {
  // FFFFFFFEh and FFFFFFFFh are not NSIDs a list can start after.
  if (after_nsid >= 0xFFFFFFFE) return generic(spec::sc_generic::invalid_namespace_or_format);
  size_t count = 0;
  for (const NamespaceState& ns : namespaces_) {  // sorted by NSID
    if (!ns.active || ns.config.nsid <= after_nsid) continue;
    if (count == std::size(list->nsid)) break;
    list->nsid[count++] = ns.config.nsid;
  }
  return spec::status_success;
}

Status ModelController::fill_descriptor_list_locked(uint32_t nsid, uint8_t* out) const noexcept {
  const NamespaceState* ns = find_namespace_locked(nsid);
  if (ns == nullptr || !ns->active) {
    return generic(spec::sc_generic::invalid_namespace_or_format);
  }
  spec::NamespaceIdentifiers ids;
  ids.has_eui64 = !is_zero(ns->config.eui64.data(), ns->config.eui64.size());
  ids.has_nguid = !is_zero(ns->config.nguid.data(), ns->config.nguid.size());
  std::memcpy(ids.eui64, ns->config.eui64.data(), sizeof(ids.eui64));
  std::memcpy(ids.nguid, ns->config.nguid.data(), sizeof(ids.nguid));
  spec::encode_ns_id_descriptor_list(ids, out, spec::identify_data_size);
  return spec::status_success;
}

// --- Get Log Page ---

ModelController::Outcome ModelController::get_log_page_locked(const Sqe& sqe) noexcept {
  const uint64_t length_bytes = spec::get_log_page_length_bytes(sqe);
  const uint64_t offset_bytes = spec::get_log_page_offset_bytes(sqe);
  if (offset_bytes % 4 != 0) return Outcome{generic(spec::sc_generic::invalid_field)};
  union {
    spec::ErrorInformationEntry errors[kErrorLogEntries];
    spec::SmartHealthLog smart;
    spec::ChangedNamespaceList changed;
  } log;
  std::memset(&log, 0, sizeof(log));
  uint64_t log_bytes = 0;
  const uint8_t lid = spec::get_log_page_lid(sqe);
  switch (lid) {
    case spec::log_page::error_information:
      log_bytes = sizeof(log.errors);
      break;
    case spec::log_page::smart_health:
      log.smart.set_composite_temperature_kelvin(kCompositeTemperatureKelvin);
      log.smart.available_spare = 100;
      log.smart.available_spare_threshold = 10;
      log_bytes = sizeof(log.smart);
      break;
    case spec::log_page::changed_namespace_list:
      if (changed_overflow_) {
        log.changed.nsid[0] = spec::changed_namespace_list_overflow;
      } else {
        std::copy(changed_nsids_.begin(), changed_nsids_.end(), log.changed.nsid);
      }
      log_bytes = sizeof(log.changed);
      break;
    default:
      return Outcome{command_specific(spec::sc_command::invalid_log_page)};
  }
  const uint64_t start = std::min(offset_bytes, log_bytes);
  auto* source = reinterpret_cast<uint8_t*>(&log) + start;
  const Status status = transfer_locked(sqe, length_bytes, false, true, source, log_bytes - start);
  // Reading the changed list without Retain Asynchronous Event clears it and re-arms the
  // namespace attribute notice.
  if (status.is_success() && lid == spec::log_page::changed_namespace_list &&
      !spec::get_log_page_rae(sqe)) {
    changed_nsids_.clear();
    changed_overflow_ = false;
    namespace_event_masked_ = false;
  }
  return Outcome{status};
}

// --- Features ---

bool ModelController::io_queues_exist_locked() const noexcept {
  for (size_t qid = 1; qid < sqs_.size(); ++qid) {
    if (sqs_[qid].exists || cqs_[qid].exists) return true;
  }
  return false;
}

ModelController::Outcome ModelController::set_features_locked(const Sqe& sqe) noexcept {
  if (spec::set_features_save(sqe)) {
    return Outcome{command_specific(spec::sc_command::feature_id_not_saveable)};
  }
  switch (spec::features_fid(sqe)) {
    case spec::feature::number_of_queues: {
      const uint32_t sq_requested = (sqe.cdw11 & 0xFFFF) + 1;
      const uint32_t cq_requested = (sqe.cdw11 >> 16) + 1;
      if (sq_requested > 0xFFFF || cq_requested > 0xFFFF) {  // FFFFh is invalid
        return Outcome{generic(spec::sc_generic::invalid_field)};
      }
      if (io_queues_exist_locked()) {
        return Outcome{generic(spec::sc_generic::command_sequence_error)};
      }
      queues_granted_sq_ = std::min<uint32_t>(sq_requested, opts_.io_queue_pairs_max);
      queues_granted_cq_ = std::min<uint32_t>(cq_requested, opts_.io_queue_pairs_max);
      return Outcome{spec::status_success,
                     spec::encode_number_of_queues(queues_granted_sq_, queues_granted_cq_)};
    }
    case spec::feature::volatile_write_cache:
      if (!opts_.volatile_write_cache) return Outcome{generic(spec::sc_generic::invalid_field)};
      write_cache_enabled_ = spec::volatile_write_cache_enabled(sqe.cdw11);
      return Outcome{};
    case spec::feature::async_event_configuration:
      async_event_config_ = sqe.cdw11;
      return Outcome{};
    case spec::feature::keep_alive_timer:
      keep_alive_timeout_ms_ = sqe.cdw11;
      return Outcome{};
    case spec::feature::interrupt_coalescing:
    case spec::feature::interrupt_vector_configuration:
      return Outcome{};  // interrupts are not modelled: accepted, no effect
    default:
      return Outcome{generic(spec::sc_generic::invalid_field)};
  }
}

ModelController::Outcome ModelController::get_features_locked(const Sqe& sqe) noexcept {
  switch (spec::features_fid(sqe)) {
    case spec::feature::number_of_queues:
      return Outcome{spec::status_success,
                     spec::encode_number_of_queues(queues_granted_sq_, queues_granted_cq_)};
    case spec::feature::volatile_write_cache:
      if (!opts_.volatile_write_cache) return Outcome{generic(spec::sc_generic::invalid_field)};
      return Outcome{spec::status_success, write_cache_enabled_ ? 1u : 0u};
    case spec::feature::async_event_configuration:
      return Outcome{spec::status_success, async_event_config_};
    case spec::feature::keep_alive_timer:
      return Outcome{spec::status_success, keep_alive_timeout_ms_};
    case spec::feature::interrupt_coalescing:
    case spec::feature::interrupt_vector_configuration:
      return Outcome{spec::status_success, 0};
    default:
      return Outcome{generic(spec::sc_generic::invalid_field)};
  }
}

// --- Create / Delete I/O queues ---

// The checks Create I/O CQ and Create I/O SQ share, in the order the status is chosen.
Status ModelController::check_new_queue_locked(const Sqe& sqe, bool is_sq) noexcept {
  const uint16_t qid = spec::pcie::create_queue_qid(sqe);
  const uint32_t granted = is_sq ? queues_granted_sq_ : queues_granted_cq_;
  if (qid == 0 || qid > granted || (is_sq ? sqs_[qid].exists : cqs_[qid].exists)) {
    return command_specific(spec::sc_command::invalid_queue_identifier);
  }
  if (is_sq) {
    const uint16_t cqid = spec::pcie::create_sq_cqid(sqe);
    if (cqid == 0 || cqid >= cqs_.size() || !cqs_[cqid].exists) {
      return command_specific(spec::sc_command::completion_queue_invalid);
    }
  }
  const uint32_t entries = spec::pcie::create_queue_entries(sqe);
  if (entries < 2 || entries > opts_.mqes + 1) {
    return command_specific(spec::sc_command::invalid_queue_size);
  }
  const uint8_t entry_log2 = is_sq ? spec::cc_iosqes(cc_) : spec::cc_iocqes(cc_);
  const uint8_t required_log2 =
      is_sq ? spec::pcie::io_sq_entry_size_log2 : spec::pcie::io_cq_entry_size_log2;
  if (!spec::pcie::create_queue_contiguous(sqe) || entry_log2 != required_log2) {
    return generic(spec::sc_generic::invalid_field);
  }
  const uint64_t base = spec::pcie::sqe_prp1(sqe);
  if (base % page_size_bytes_ != 0) return generic(spec::sc_generic::prp_offset_invalid);
  if (dma_pointer_locked(base, uint64_t{entries} << entry_log2) == nullptr) {
    return generic(spec::sc_generic::invalid_field);
  }
  return spec::status_success;
}

ModelController::Outcome ModelController::create_io_cq_locked(const Sqe& sqe) noexcept {
  if (const Status status = check_new_queue_locked(sqe, false); !status.is_success()) {
    return Outcome{status};
  }
  CompletionQueue& cq = cqs_[spec::pcie::create_queue_qid(sqe)];
  cq.exists = true;
  cq.entries = spec::pcie::create_queue_entries(sqe);
  cq.base = reinterpret_cast<uint8_t*>(spec::pcie::sqe_prp1(sqe));
  cq.tail = cq.head = 0;
  cq.phase = true;
  cq.sq_users = 0;
  cq.waiting.resize(cq.entries);  // allocation at creation, not per command
  cq.waiting_first = cq.waiting_count = 0;
  return Outcome{};
}

ModelController::Outcome ModelController::create_io_sq_locked(const Sqe& sqe) noexcept {
  if (const Status status = check_new_queue_locked(sqe, true); !status.is_success()) {
    return Outcome{status};
  }
  SubmissionQueue& sq = sqs_[spec::pcie::create_queue_qid(sqe)];
  sq = SubmissionQueue{};
  sq.exists = true;
  sq.cqid = spec::pcie::create_sq_cqid(sqe);
  sq.entries = spec::pcie::create_queue_entries(sqe);
  sq.base = reinterpret_cast<uint8_t*>(spec::pcie::sqe_prp1(sqe));
  ++cqs_[sq.cqid].sq_users;
  return Outcome{};
}

ModelController::Outcome ModelController::delete_io_sq_locked(const Sqe& sqe) noexcept {
  const uint16_t qid = static_cast<uint16_t>(sqe.cdw10 & 0xFFFF);
  if (qid == 0 || qid >= sqs_.size() || !sqs_[qid].exists) {
    return Outcome{command_specific(spec::sc_command::invalid_queue_identifier)};
  }
  // Held commands complete (on the SQ's CQ, before the Delete does) as aborted.
  for (size_t i = 0; i < held_.size();) {
    if (held_[i].sqid == qid) {
      complete_held_locked(i, spec::generic_status(spec::sc_generic::aborted_sq_deletion));
    } else {
      ++i;
    }
  }
  --cqs_[sqs_[qid].cqid].sq_users;
  sqs_[qid] = SubmissionQueue{};
  return Outcome{};
}

ModelController::Outcome ModelController::delete_io_cq_locked(const Sqe& sqe) noexcept {
  const uint16_t qid = static_cast<uint16_t>(sqe.cdw10 & 0xFFFF);
  if (qid == 0 || qid >= cqs_.size() || !cqs_[qid].exists) {
    return Outcome{command_specific(spec::sc_command::invalid_queue_identifier)};
  }
  CompletionQueue& cq = cqs_[qid];
  if (cq.sq_users > 0) return Outcome{command_specific(spec::sc_command::invalid_queue_deletion)};
  cq.exists = false;
  cq.waiting_count = 0;
  return Outcome{};
}

// --- Abort, Asynchronous Event Request ---

ModelController::Outcome ModelController::abort_locked(const Sqe& sqe) noexcept {
  const uint16_t sqid = static_cast<uint16_t>(sqe.cdw10 & 0xFFFF);
  const uint16_t cid = static_cast<uint16_t>(sqe.cdw10 >> 16);
  for (size_t i = 0; i < held_.size(); ++i) {
    const HeldCommand& held = held_[i];
    if (held.kind == HeldKind::stalled && held.sqid == sqid && held.sqe.cid == cid) {
      complete_held_locked(i, spec::generic_status(spec::sc_generic::abort_requested));
      return Outcome{spec::status_success, 0};
    }
  }
  // Not found (already completed, or never held): DW0 bit 0 = 1, "not aborted".
  return Outcome{spec::status_success, 1};
}

ModelController::Outcome ModelController::async_event_request_locked(const Sqe& sqe) noexcept {
  const auto outstanding = std::count_if(held_.begin(), held_.end(), [](const HeldCommand& c) {
    return c.kind == HeldKind::async_event;
  });
  if (outstanding >= kAsyncEventLimit0sBased + 1) {
    return Outcome{command_specific(spec::sc_command::async_event_request_limit_exceeded)};
  }
  held_.push_back(HeldCommand{sqe, 0, HeldKind::async_event});
  deliver_namespace_event_locked();  // an event raised before any AER was outstanding
  Outcome outcome;
  outcome.held = true;
  return outcome;
}

}  // namespace nvmf::nvme_pcie::model
