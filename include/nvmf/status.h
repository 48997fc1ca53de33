// NVMe completion status values: Status Code Types (SCT), Status Codes (SC) per type, a
// decoded Status value, and status_name() for logs. This is the wire error channel: parse and
// map functions in upper layers return a Status, never a Result. The 16-bit encoding of the
// CQE "Status Field" lives in src/spec/nvme.h. Header-only; any thread.
//
// Public API (every libnvmf_host completion carries a Status); src/spec/status.h forwards
// here for the rest of the stack.
//
// Sources: Base spec "Status Field" and its "Generic Command Status Values", "Command Specific
// Status Values", "Media and Data Integrity Errors", "Path Related Status" figures; the NVM
// Command Set spec for NVM command specific values; the Fabrics Command Set "Fabrics Command
// Status Values".
#pragma once

#include <cstdint>

namespace nvmf::spec {

// Status Code Type (SCT): bits 11:9 of the Status Field.
namespace sct {
inline constexpr uint8_t generic = 0x0;
inline constexpr uint8_t command_specific = 0x1;
inline constexpr uint8_t media_data_integrity = 0x2;
inline constexpr uint8_t path_related = 0x3;
inline constexpr uint8_t vendor_specific = 0x7;
}  // namespace sct

// Generic Command Status Values (SCT 0).
namespace sc_generic {
inline constexpr uint8_t success = 0x00;
inline constexpr uint8_t invalid_opcode = 0x01;
inline constexpr uint8_t invalid_field = 0x02;
inline constexpr uint8_t command_id_conflict = 0x03;
inline constexpr uint8_t data_transfer_error = 0x04;
inline constexpr uint8_t aborted_power_loss = 0x05;
inline constexpr uint8_t internal_error = 0x06;
inline constexpr uint8_t abort_requested = 0x07;
inline constexpr uint8_t aborted_sq_deletion = 0x08;
inline constexpr uint8_t aborted_failed_fused = 0x09;
inline constexpr uint8_t aborted_missing_fused = 0x0A;
inline constexpr uint8_t invalid_namespace_or_format = 0x0B;
inline constexpr uint8_t command_sequence_error = 0x0C;
inline constexpr uint8_t invalid_sgl_segment_descriptor = 0x0D;
inline constexpr uint8_t invalid_number_of_sgl_descriptors = 0x0E;
inline constexpr uint8_t data_sgl_length_invalid = 0x0F;
inline constexpr uint8_t metadata_sgl_length_invalid = 0x10;
inline constexpr uint8_t sgl_descriptor_type_invalid = 0x11;
inline constexpr uint8_t invalid_use_of_cmb = 0x12;
inline constexpr uint8_t prp_offset_invalid = 0x13;
inline constexpr uint8_t atomic_write_unit_exceeded = 0x14;
inline constexpr uint8_t operation_denied = 0x15;
inline constexpr uint8_t sgl_offset_invalid = 0x16;
// Defined in NVMe 1.3, reserved since 1.4; Linux nvmet still sends it for unknown SGL
// subtypes, so hosts must be able to name it. Prefer sgl_descriptor_type_invalid when sending.
inline constexpr uint8_t sgl_subtype_invalid = 0x17;
inline constexpr uint8_t host_identifier_inconsistent_format = 0x18;
inline constexpr uint8_t keep_alive_timer_expired = 0x19;
inline constexpr uint8_t keep_alive_timeout_invalid = 0x1A;
inline constexpr uint8_t aborted_preempt_and_abort = 0x1B;
inline constexpr uint8_t sanitize_failed = 0x1C;
inline constexpr uint8_t sanitize_in_progress = 0x1D;
inline constexpr uint8_t sgl_data_block_granularity_invalid = 0x1E;
inline constexpr uint8_t command_not_supported_for_queue_in_cmb = 0x1F;
inline constexpr uint8_t namespace_write_protected = 0x20;
inline constexpr uint8_t command_interrupted = 0x21;
inline constexpr uint8_t transient_transport_error = 0x22;
// 80h..BFh: generic values of the NVM Command Set.
inline constexpr uint8_t lba_out_of_range = 0x80;
inline constexpr uint8_t capacity_exceeded = 0x81;
inline constexpr uint8_t namespace_not_ready = 0x82;
inline constexpr uint8_t reservation_conflict = 0x83;
inline constexpr uint8_t format_in_progress = 0x84;
}  // namespace sc_generic

// Command Specific Status Values (SCT 1) of admin commands (00h..7Fh).
namespace sc_command {
inline constexpr uint8_t completion_queue_invalid = 0x00;
inline constexpr uint8_t invalid_queue_identifier = 0x01;
inline constexpr uint8_t invalid_queue_size = 0x02;
inline constexpr uint8_t abort_command_limit_exceeded = 0x03;
inline constexpr uint8_t async_event_request_limit_exceeded = 0x05;
inline constexpr uint8_t invalid_firmware_slot = 0x06;
inline constexpr uint8_t invalid_firmware_image = 0x07;
inline constexpr uint8_t invalid_interrupt_vector = 0x08;
inline constexpr uint8_t invalid_log_page = 0x09;
inline constexpr uint8_t invalid_format = 0x0A;
inline constexpr uint8_t firmware_requires_conventional_reset = 0x0B;
inline constexpr uint8_t invalid_queue_deletion = 0x0C;
inline constexpr uint8_t feature_id_not_saveable = 0x0D;
inline constexpr uint8_t feature_not_changeable = 0x0E;
inline constexpr uint8_t feature_not_namespace_specific = 0x0F;
inline constexpr uint8_t firmware_requires_nvm_subsystem_reset = 0x10;
inline constexpr uint8_t firmware_requires_controller_reset = 0x11;
inline constexpr uint8_t firmware_requires_max_time_violation = 0x12;
inline constexpr uint8_t firmware_activation_prohibited = 0x13;
inline constexpr uint8_t overlapping_range = 0x14;
inline constexpr uint8_t namespace_insufficient_capacity = 0x15;
inline constexpr uint8_t namespace_id_unavailable = 0x16;
inline constexpr uint8_t namespace_already_attached = 0x18;
inline constexpr uint8_t namespace_is_private = 0x19;
inline constexpr uint8_t namespace_not_attached = 0x1A;
inline constexpr uint8_t thin_provisioning_not_supported = 0x1B;
inline constexpr uint8_t controller_list_invalid = 0x1C;
inline constexpr uint8_t device_self_test_in_progress = 0x1D;
inline constexpr uint8_t boot_partition_write_prohibited = 0x1E;
inline constexpr uint8_t invalid_controller_identifier = 0x1F;
inline constexpr uint8_t invalid_secondary_controller_state = 0x20;
inline constexpr uint8_t invalid_number_of_controller_resources = 0x21;
inline constexpr uint8_t invalid_resource_identifier = 0x22;
inline constexpr uint8_t ana_group_identifier_invalid = 0x24;
inline constexpr uint8_t ana_attach_failed = 0x25;
}  // namespace sc_command

// Command Specific Status Values (SCT 1) of NVM Command Set I/O commands (80h..BFh).
// They share numbers with sc_fabrics: the opcode of the failed command tells them apart.
namespace sc_nvm {
inline constexpr uint8_t conflicting_attributes = 0x80;
inline constexpr uint8_t invalid_protection_information = 0x81;
inline constexpr uint8_t attempted_write_to_read_only_range = 0x82;
inline constexpr uint8_t command_size_limit_exceeded = 0x83;
}  // namespace sc_nvm

// Fabrics Command Status Values (SCT 1) of Fabrics commands (opcode 7Fh).
namespace sc_fabrics {
inline constexpr uint8_t incompatible_format = 0x80;
inline constexpr uint8_t controller_busy = 0x81;
inline constexpr uint8_t connect_invalid_parameters = 0x82;
inline constexpr uint8_t connect_restart_discovery = 0x83;
inline constexpr uint8_t connect_invalid_host = 0x84;
// Base 2.0: a command sent on a queue type that does not allow it (e.g. Disconnect on the
// admin queue). Linux calls it NVME_SC_DISCONNECT_INVALID_QTYPE.
inline constexpr uint8_t invalid_queue_type = 0x85;
inline constexpr uint8_t discover_restart = 0x90;
inline constexpr uint8_t authentication_required = 0x91;
}  // namespace sc_fabrics

// Media and Data Integrity Errors (SCT 2).
namespace sc_media {
inline constexpr uint8_t write_fault = 0x80;
inline constexpr uint8_t unrecovered_read_error = 0x81;
inline constexpr uint8_t guard_check_error = 0x82;
inline constexpr uint8_t application_tag_check_error = 0x83;
inline constexpr uint8_t reference_tag_check_error = 0x84;
inline constexpr uint8_t compare_failure = 0x85;
inline constexpr uint8_t access_denied = 0x86;
inline constexpr uint8_t deallocated_or_unwritten_block = 0x87;
inline constexpr uint8_t storage_tag_check_error = 0x88;
}  // namespace sc_media

// Path Related Status (SCT 3).
namespace sc_path {
inline constexpr uint8_t internal_path_error = 0x00;
inline constexpr uint8_t asymmetric_access_persistent_loss = 0x01;
inline constexpr uint8_t asymmetric_access_inaccessible = 0x02;
inline constexpr uint8_t asymmetric_access_transition = 0x03;
inline constexpr uint8_t controller_pathing_error = 0x60;
inline constexpr uint8_t host_pathing_error = 0x70;
inline constexpr uint8_t aborted_by_host = 0x71;
}  // namespace sc_path

// A decoded Status Field (without the phase tag, which belongs to the queue, not the status).
struct Status {
  uint8_t sct = sct::generic;
  uint8_t sc = sc_generic::success;
  uint8_t crd = 0;    // Command Retry Delay: 0 none, 1..3 select CRDT1..3 of Identify Controller
  bool more = false;  // M: more information in the Error Information log page
  bool dnr = false;   // DNR: the same command will fail again; do not retry

  constexpr bool is_success() const noexcept {
    return sct == sct::generic && sc == sc_generic::success;
  }
  friend constexpr bool operator==(const Status&, const Status&) = default;
};

constexpr Status make_status(uint8_t type, uint8_t code, bool dnr = false) noexcept {
  Status status;
  status.sct = type;
  status.sc = code;
  status.dnr = dnr;
  return status;
}
constexpr Status generic_status(uint8_t code, bool dnr = false) noexcept {
  return make_status(sct::generic, code, dnr);
}
constexpr Status command_specific_status(uint8_t code, bool dnr = false) noexcept {
  return make_status(sct::command_specific, code, dnr);
}
inline constexpr Status status_success{};

inline const char* status_code_type_name(uint8_t type) noexcept {
  switch (type) {
    case sct::generic:
      return "Generic Command Status";
    case sct::command_specific:
      return "Command Specific Status";
    case sct::media_data_integrity:
      return "Media and Data Integrity Errors";
    case sct::path_related:
      return "Path Related Status";
    case sct::vendor_specific:
      return "Vendor Specific";
    default:
      return "Reserved Status Code Type";
  }
}

namespace detail {

inline const char* generic_status_name(uint8_t code) noexcept {
  using namespace sc_generic;
  switch (code) {
    case success:
      return "Successful Completion";
    case invalid_opcode:
      return "Invalid Command Opcode";
    case invalid_field:
      return "Invalid Field in Command";
    case command_id_conflict:
      return "Command ID Conflict";
    case data_transfer_error:
      return "Data Transfer Error";
    case aborted_power_loss:
      return "Commands Aborted due to Power Loss Notification";
    case internal_error:
      return "Internal Error";
    case abort_requested:
      return "Command Abort Requested";
    case aborted_sq_deletion:
      return "Command Aborted due to SQ Deletion";
    case aborted_failed_fused:
      return "Command Aborted due to Failed Fused Command";
    case aborted_missing_fused:
      return "Command Aborted due to Missing Fused Command";
    case invalid_namespace_or_format:
      return "Invalid Namespace or Format";
    case command_sequence_error:
      return "Command Sequence Error";
    case invalid_sgl_segment_descriptor:
      return "Invalid SGL Segment Descriptor";
    case invalid_number_of_sgl_descriptors:
      return "Invalid Number of SGL Descriptors";
    case data_sgl_length_invalid:
      return "Data SGL Length Invalid";
    case metadata_sgl_length_invalid:
      return "Metadata SGL Length Invalid";
    case sgl_descriptor_type_invalid:
      return "SGL Descriptor Type Invalid";
    case invalid_use_of_cmb:
      return "Invalid Use of Controller Memory Buffer";
    case prp_offset_invalid:
      return "PRP Offset Invalid";
    case atomic_write_unit_exceeded:
      return "Atomic Write Unit Exceeded";
    case operation_denied:
      return "Operation Denied";
    case sgl_offset_invalid:
      return "SGL Offset Invalid";
    case sgl_subtype_invalid:
      return "SGL Sub Type Invalid";
    case host_identifier_inconsistent_format:
      return "Host Identifier Inconsistent Format";
    case keep_alive_timer_expired:
      return "Keep Alive Timer Expired";
    case keep_alive_timeout_invalid:
      return "Keep Alive Timeout Invalid";
    case aborted_preempt_and_abort:
      return "Command Aborted due to Preempt and Abort";
    case sanitize_failed:
      return "Sanitize Failed";
    case sanitize_in_progress:
      return "Sanitize In Progress";
    case sgl_data_block_granularity_invalid:
      return "SGL Data Block Granularity Invalid";
    case command_not_supported_for_queue_in_cmb:
      return "Command Not Supported for Queue in CMB";
    case namespace_write_protected:
      return "Namespace is Write Protected";
    case command_interrupted:
      return "Command Interrupted";
    case transient_transport_error:
      return "Transient Transport Error";
    case lba_out_of_range:
      return "LBA Out of Range";
    case capacity_exceeded:
      return "Capacity Exceeded";
    case namespace_not_ready:
      return "Namespace Not Ready";
    case reservation_conflict:
      return "Reservation Conflict";
    case format_in_progress:
      return "Format In Progress";
    default:
      return "Unknown Generic Status";
  }
}

inline const char* command_specific_status_name(uint8_t code, bool fabrics_command) noexcept {
  if (code >= 0x80) {
    if (fabrics_command) {
      using namespace sc_fabrics;
      switch (code) {
        case incompatible_format:
          return "Incompatible Format";
        case controller_busy:
          return "Controller Busy";
        case connect_invalid_parameters:
          return "Connect Invalid Parameters";
        case connect_restart_discovery:
          return "Connect Restart Discovery";
        case connect_invalid_host:
          return "Connect Invalid Host";
        case invalid_queue_type:
          return "Invalid Queue Type";
        case discover_restart:
          return "Discover Restart";
        case authentication_required:
          return "Authentication Required";
        default:
          return "Unknown Fabrics Command Status";
      }
    }
    using namespace sc_nvm;
    switch (code) {
      case conflicting_attributes:
        return "Conflicting Attributes";
      case invalid_protection_information:
        return "Invalid Protection Information";
      case attempted_write_to_read_only_range:
        return "Attempted Write to Read Only Range";
      case command_size_limit_exceeded:
        return "Command Size Limit Exceeded";
      default:
        return "Unknown I/O Command Specific Status";
    }
  }
  using namespace sc_command;
  switch (code) {
    case completion_queue_invalid:
      return "Completion Queue Invalid";
    case invalid_queue_identifier:
      return "Invalid Queue Identifier";
    case invalid_queue_size:
      return "Invalid Queue Size";
    case abort_command_limit_exceeded:
      return "Abort Command Limit Exceeded";
    case async_event_request_limit_exceeded:
      return "Asynchronous Event Request Limit Exceeded";
    case invalid_firmware_slot:
      return "Invalid Firmware Slot";
    case invalid_firmware_image:
      return "Invalid Firmware Image";
    case invalid_interrupt_vector:
      return "Invalid Interrupt Vector";
    case invalid_log_page:
      return "Invalid Log Page";
    case invalid_format:
      return "Invalid Format";
    case firmware_requires_conventional_reset:
      return "Firmware Activation Requires Conventional Reset";
    case invalid_queue_deletion:
      return "Invalid Queue Deletion";
    case feature_id_not_saveable:
      return "Feature Identifier Not Saveable";
    case feature_not_changeable:
      return "Feature Not Changeable";
    case feature_not_namespace_specific:
      return "Feature Not Namespace Specific";
    case firmware_requires_nvm_subsystem_reset:
      return "Firmware Activation Requires NVM Subsystem Reset";
    case firmware_requires_controller_reset:
      return "Firmware Activation Requires Controller Reset";
    case firmware_requires_max_time_violation:
      return "Firmware Activation Requires Maximum Time Violation";
    case firmware_activation_prohibited:
      return "Firmware Activation Prohibited";
    case overlapping_range:
      return "Overlapping Range";
    case namespace_insufficient_capacity:
      return "Namespace Insufficient Capacity";
    case namespace_id_unavailable:
      return "Namespace Identifier Unavailable";
    case namespace_already_attached:
      return "Namespace Already Attached";
    case namespace_is_private:
      return "Namespace Is Private";
    case namespace_not_attached:
      return "Namespace Not Attached";
    case thin_provisioning_not_supported:
      return "Thin Provisioning Not Supported";
    case controller_list_invalid:
      return "Controller List Invalid";
    case device_self_test_in_progress:
      return "Device Self-test In Progress";
    case boot_partition_write_prohibited:
      return "Boot Partition Write Prohibited";
    case invalid_controller_identifier:
      return "Invalid Controller Identifier";
    case invalid_secondary_controller_state:
      return "Invalid Secondary Controller State";
    case invalid_number_of_controller_resources:
      return "Invalid Number of Controller Resources";
    case invalid_resource_identifier:
      return "Invalid Resource Identifier";
    case ana_group_identifier_invalid:
      return "ANA Group Identifier Invalid";
    case ana_attach_failed:
      return "ANA Attach Failed";
    default:
      return "Unknown Command Specific Status";
  }
}

inline const char* media_status_name(uint8_t code) noexcept {
  using namespace sc_media;
  switch (code) {
    case write_fault:
      return "Write Fault";
    case unrecovered_read_error:
      return "Unrecovered Read Error";
    case guard_check_error:
      return "End-to-end Guard Check Error";
    case application_tag_check_error:
      return "End-to-end Application Tag Check Error";
    case reference_tag_check_error:
      return "End-to-end Reference Tag Check Error";
    case compare_failure:
      return "Compare Failure";
    case access_denied:
      return "Access Denied";
    case deallocated_or_unwritten_block:
      return "Deallocated or Unwritten Logical Block";
    case storage_tag_check_error:
      return "End-to-end Storage Tag Check Error";
    default:
      return "Unknown Media and Data Integrity Error";
  }
}

inline const char* path_status_name(uint8_t code) noexcept {
  using namespace sc_path;
  switch (code) {
    case internal_path_error:
      return "Internal Path Error";
    case asymmetric_access_persistent_loss:
      return "Asymmetric Access Persistent Loss";
    case asymmetric_access_inaccessible:
      return "Asymmetric Access Inaccessible";
    case asymmetric_access_transition:
      return "Asymmetric Access Transition";
    case controller_pathing_error:
      return "Controller Pathing Error";
    case host_pathing_error:
      return "Host Pathing Error";
    case aborted_by_host:
      return "Command Aborted By Host";
    default:
      return "Unknown Path Related Status";
  }
}

}  // namespace detail

// A static, human-readable name of (SCT, SC) for logs; never null. Command specific codes
// 80h and above mean different things for Fabrics commands (opcode 7Fh) and NVM I/O commands:
// pass fabrics_command = true when the failed command was a Fabrics command.
inline const char* status_name(uint8_t type, uint8_t code, bool fabrics_command = false) noexcept {
  switch (type) {
    case sct::generic:
      return detail::generic_status_name(code);
    case sct::command_specific:
      return detail::command_specific_status_name(code, fabrics_command);
    case sct::media_data_integrity:
      return detail::media_status_name(code);
    case sct::path_related:
      return detail::path_status_name(code);
    case sct::vendor_specific:
      return "Vendor Specific Status";
    default:
      return "Reserved Status Code Type";
  }
}

inline const char* status_name(const Status& status, bool fabrics_command = false) noexcept {
  return status_name(status.sct, status.sc, fabrics_command);
}

}  // namespace nvmf::spec
