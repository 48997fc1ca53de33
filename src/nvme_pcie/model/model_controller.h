// A register-level model of an NVMe 1.4 PCIe controller, in this process: BAR0 registers and
// doorbells behind nvme_pcie::PciDevice, queues and data in host memory reached by IOVA, one
// or more namespaces kept in RAM. For driver unit tests and nvmf_perf --sim. See README.md.
//
// Execution model: synchronous, no threads. A SQ tail doorbell write fetches every new SQE,
// executes it and posts its CQE before write32() returns; a CQ head doorbell write posts the
// completions that were waiting for room. Nothing happens between register accesses, except
// what the fault-injection calls below do (release_stalled, raise_namespace_changed).
//
// Where the model had to choose (the spec leaves it open or says "undefined"):
// - Memory: the model sees host memory only through IOVAs that lie in a live region of
//   dma_memory() or in a range given to allow_dma() (an IOMMU). In this process IOVA ==
//   virtual address. Any other IOVA (queue base, PRP entry, PRP list, SGL) counts a dma_fault:
//   a data command fails with Data Transfer Error, a queue creation with Invalid Field, and
//   an admin queue outside DMA memory makes CC.EN = 1 fail with CSTS.CFS.
// - Data commands are validated in full (every PRP / SGL entry translated) before any byte
//   moves, so a failed command leaves namespace and host memory untouched.
// - A doorbell write with a value >= the queue size, a CQ head beyond what was posted, a
//   doorbell of a queue that does not exist, or any doorbell unless CC.EN = 1 and CSTS.RDY = 1
//   is counted in invalid_doorbell_writes and ignored (hardware would report an Invalid Doorbell
//   asynchronous event; the model sends none).
// - Admin commands that move data must use PRPs (PSDT 00b): "SGLs shall not be used for Admin
//   commands". Commands without data ignore PSDT.
// - CC.EN 0->1 checks AQA (2..4096 entries each), ASQ/ACQ (page-aligned, in DMA memory),
//   MPS (MPSMIN..MPSMAX), CSS (NVM) and AMS (round robin); a bad value sets CSTS.CFS, not RDY.
//   IOSQES / IOCQES are checked when an I/O queue is created (must be 6 / 4: Invalid Field).
// - A queue base that is not page-aligned fails its Create with PRP Offset Invalid (as QEMU).
// - Namespace attribute notices are sent whatever Set Features Asynchronous Event
//   Configuration says; as the spec requires, a sent notice masks further ones until the host
//   reads log page 04h without RAE. Changes are kept in the log page meanwhile.
// - Set Features Number of Queues grants min(requested, io_queue_pairs_max) and may be sent
//   again until an I/O queue exists; Create I/O queue accepts QIDs up to the granted count.
// - After CC.SHN the model fetches no more commands; it takes CC.EN 1->0 to start again.
//
// Threading: every public method may be called from any thread. One mutex guards all state
// (a test model: correct, not fast); dma_address() and namespace_data() take no lock. No user
// code is called with the lock held.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "env/posix_memory.h"
#include "nvme_pcie/device.h"
#include "spec/admin.h"
#include "spec/nvme.h"
#include "spec/status.h"

namespace nvmf::nvme_pcie::model {

// One namespace of the model, LBA format 0 only, no metadata, zero-filled at creation.
struct ModelNamespace {
  uint32_t nsid = 1;
  uint32_t block_size_bytes = 512;                    // 512 or 4096
  uint64_t block_count = (uint64_t{64} << 20) / 512;  // 64 MiB of 512-byte blocks
  std::array<uint8_t, 16> nguid{};  // reported (Identify, descriptor list) when nonzero
  std::array<uint8_t, 8> eui64{};   // reported when nonzero
  bool active = true;               // false: configured (counts in NN) but not attached
};

struct ModelOpts {
  std::string name = "nvme-model0";                    // address()
  std::string serial = "MODEL0000001";                 // SN, at most 20 characters
  std::string model_number = "nvmf model controller";  // MN, at most 40 characters
  std::string firmware = "1.0";                        // FR, at most 8 characters
  uint16_t cntlid = 1;

  // CAP.
  uint32_t mqes = 1023;         // 0's based: 1024 entries per queue at most (1..65535)
  uint8_t dstrd = 0;            // doorbell stride 4 << dstrd bytes (0..15)
  uint8_t timeout_500ms = 20;   // CAP.TO: 10 s for RDY to follow CC.EN
  uint8_t mpsmin = 0;           // smallest memory page 4 KiB << mpsmin
  uint8_t mpsmax = 0;           // largest memory page 4 KiB << mpsmax (>= mpsmin, <= 15)
  bool nssr_supported = false;  // CAP.NSSRS: NSSR writes of "NVMe" reset the controller

  // Identify Controller.
  uint8_t mdts = 5;  // 2^mdts pages of 4 KiB << mpsmin per command; 0 = no limit (5: 128 KiB)
  uint16_t io_queue_pairs_max = 64;  // I/O SQs and CQs the controller can grant (1..65534)
  bool sgl_supported = false;        // SGLS bit 0; PSDT 01b/10b commands accepted on I/O queues
  bool volatile_write_cache = true;  // VWC present, Flush with NSID FFFFFFFFh supported

  std::vector<ModelNamespace> namespaces = {ModelNamespace{}};

  // Test knobs: CSTS.RDY follows CC.EN only after this many CSTS reads (both directions);
  // CC.SHN shows SHST = occurring for this many CSTS reads before complete.
  unsigned ready_delay_reads = 0;
  unsigned shutdown_delay_reads = 0;

  // Another backend whose live regions the device reaches as well (as DPDK memory is mapped
  // in a real VFIO container): nvmf_perf --sim shares the RDMA transport's buffers this way,
  // the zero-copy path in process. Must outlive the model. Its IOVAs must equal addresses.
  const env::MemoryBackend* shared_dma_memory = nullptr;
};

// Counters, a consistent snapshot taken under the lock.
struct ModelStats {
  std::array<uint64_t, 256> admin_commands{};  // fetched from the admin SQ, by opcode
  std::array<uint64_t, 256> io_commands{};     // fetched from I/O SQs, by opcode
  uint64_t sq_tail_doorbell_writes = 0;        // accepted ones
  uint64_t cq_head_doorbell_writes = 0;        // accepted ones
  uint64_t completions_posted = 0;             // CQEs written into host memory
  uint64_t resets = 0;                         // CC.EN 1->0 and NSSR
  uint64_t dma_faults = 0;                     // accesses to IOVAs the device cannot reach
  uint64_t invalid_doorbell_writes = 0;        // ignored doorbell writes (see the header)
  uint64_t read_bytes = 0;                     // data of successful Read commands
  uint64_t written_bytes = 0;                  // data of successful Write commands
};

class ModelController final : public PciDevice {
 public:
  // A controller in reset (CC = 0, CSTS = 0), its DMA memory (posix, hugepages off) and its
  // namespaces. Errors: invalid_argument (an option out of the range documented above, a
  // duplicate or out-of-range NSID, a block size other than 512 / 4096, an empty or overflowing
  // namespace, SN/MN/FR too long), no_memory (namespace storage or the backend).
  static Result<std::unique_ptr<ModelController>> create(const ModelOpts& opts);

  ModelController(const ModelController&) = delete;
  ModelController& operator=(const ModelController&) = delete;
  // Every region allocated from dma_memory() must be freed before.
  ~ModelController() override;

  // --- RegisterIo (BAR0) ---
  // 32-bit reads of CAP, ASQ and ACQ return their halves; 64-bit accesses elsewhere are two
  // 32-bit ones, low first. Unknown offsets read 0 and ignore writes.
  uint32_t read32(uint32_t offset) noexcept override;
  uint64_t read64(uint32_t offset) noexcept override;
  void write32(uint32_t offset, uint32_t value) noexcept override;
  void write64(uint32_t offset, uint64_t value) noexcept override;

  // --- PciDevice ---
  const std::string& address() const noexcept override { return opts_.name; }
  env::MemoryBackend& dma_memory() noexcept override { return *dma_memory_; }
  // dma_memory()'s iova_of(), else the range's own address when it lies in one allow_dma()
  // range. Lock-free.
  uint64_t dma_address(const void* p, size_t length) const noexcept override;

  // --- IOMMU emulation (any thread) ---
  // Lets the device reach [p, p + length) too (IOVA == address). At most kAllowedRangesMax
  // ranges at once: out_of_range beyond; invalid_argument for a null or empty range.
  Result<void> allow_dma(const void* p, size_t length) noexcept;
  // Removes the range that starts at `p` (no-op if none). In-flight commands are synchronous,
  // so none can be using it when this returns.
  void revoke_dma(const void* p) noexcept;
  static constexpr size_t kAllowedRangesMax = 16;

  // --- Fault injection (any thread) ---
  // The next `count` commands with `opcode` fetched from I/O queues (admin = false) or the
  // admin queue are held without a completion until release_stalled() executes them, an
  // Abort completes one with Command Abort Requested, deleting its SQ completes them with
  // Command Aborted due to SQ Deletion, or a reset drops them silently. count 0 clears. A
  // held command has not executed yet: its data moves when it is released. Armed stall() and
  // fail_next() counts survive controller resets.
  void stall(uint8_t opcode, bool admin, unsigned count) noexcept;
  // Executes every held command in arrival order and posts their completions. Returns how
  // many were released.
  unsigned release_stalled() noexcept;
  // Commands held by stall() right now.
  unsigned stalled_count() const noexcept;
  // The next `count` commands with `opcode` on I/O queues (admin = false) or the admin queue
  // complete with `status` without executing. count 0 clears.
  void fail_next(uint8_t opcode, spec::Status status, unsigned count, bool admin = false) noexcept;
  // Controller Fatal Status: CSTS.CFS = 1; nothing is fetched or completed until CC.EN 1->0.
  void inject_fatal() noexcept;
  // Surprise removal, for good: reads return all ones, writes are ignored, nothing moves.
  void remove() noexcept;
  bool removed() const noexcept;
  // Records `nsid` in the Changed Namespace List log and completes an outstanding
  // Asynchronous Event Request with a Notice / Namespace Attribute Changed (log page 04h), now
  // or when the host next sends one, unless a notice is still unacknowledged (see above).
  void raise_namespace_changed(uint32_t nsid) noexcept;
  // Attaches or detaches a configured namespace (hot add / remove) and raises the namespace
  // changed event for it. not_found for an NSID the model was not created with.
  Result<void> set_namespace_active(uint32_t nsid, bool active) noexcept;

  // --- Observation (any thread) ---
  ModelStats stats() const noexcept;
  // The namespace's bytes (block_count * block_size_bytes), or an empty span for an NSID the
  // model was not created with. Unlocked: read it while no command runs on that namespace.
  std::span<uint8_t> namespace_data(uint32_t nsid) noexcept;
  const ModelOpts& opts() const noexcept { return opts_; }
  // The BAR0 size the doorbells need: 0x1000 + 2 * (1 + io_queue_pairs_max) * stride.
  uint32_t bar0_size_bytes() const noexcept;

 private:
  // Controller enable state as CC.EN and CSTS.RDY show it.
  enum class State : uint8_t {
    disabled,   // CC.EN = 0, RDY = 0: the host programs AQA / ASQ / ACQ / CC
    enabling,   // CC.EN = 1, RDY = 0: waits for ready_delay_reads CSTS reads
    ready,      // CC.EN = 1, RDY = 1: doorbells are processed
    failed,     // CC.EN = 1, RDY = 0, CFS = 1: the configuration was bad; waits for CC.EN = 0
    disabling,  // CC.EN = 0, RDY = 1: queues are gone; waits for ready_delay_reads CSTS reads
  };
  // CSTS.SHST as the model walks it after a CC.SHN write.
  enum class Shutdown : uint8_t {
    none,       // SHST 00b
    occurring,  // SHST 01b: waits for shutdown_delay_reads CSTS reads
    complete,   // SHST 10b: until CC.EN 1->0
  };
  // Why a command sits in held_ instead of being completed.
  enum class HeldKind : uint8_t {
    stalled,      // stall(): waits for release_stalled(), Abort, SQ deletion or reset
    async_event,  // Asynchronous Event Request: waits for an event
  };

  struct SubmissionQueue {
    bool exists = false;
    uint16_t cqid = 0;
    uint32_t entries = 0;
    uint8_t* base = nullptr;  // translated once at creation (IOVA == address here)
    uint32_t head = 0;        // next entry the controller fetches
    uint32_t tail = 0;        // last tail doorbell value
  };
  struct CompletionQueue {
    bool exists = false;
    uint32_t entries = 0;
    uint8_t* base = nullptr;
    uint32_t tail = 0;  // next slot the controller writes
    uint32_t head = 0;  // last head doorbell value
    bool phase = true;  // phase tag of the next CQE written; flips at every wrap
    uint32_t sq_users = 0;
    // CQEs waiting for room, a FIFO ring. Sized at creation; grows only for a host that
    // keeps more commands outstanding than its SQs hold.
    std::vector<spec::Cqe> waiting;
    uint32_t waiting_first = 0;
    uint32_t waiting_count = 0;
  };
  struct HeldCommand {
    spec::Sqe sqe;
    uint16_t sqid;
    HeldKind kind;
  };
  // What executing a command produced.
  struct Outcome {
    spec::Status status = spec::status_success;
    uint32_t cdw0 = 0;
    bool held = false;  // the command went to held_: no completion now
  };
  struct Injection {
    unsigned stall_count = 0;
    unsigned fail_count = 0;
    spec::Status fail_status{};
  };
  struct NamespaceState {
    ModelNamespace config;
    bool active = true;
    env::DmaRegion storage;  // from storage_memory_: not reachable by DMA
  };
  struct AllowedRange {
    std::atomic<uintptr_t> base{0};  // 0 = free slot; published last (release)
    std::atomic<size_t> length_bytes{0};
  };

  ModelController(const ModelOpts& opts, std::unique_ptr<env::PosixMemoryBackend> dma_memory,
                  std::unique_ptr<env::PosixMemoryBackend> storage_memory) noexcept;
  Result<void> create_namespaces() noexcept;

  // Registers (model_controller.cpp). All *_locked functions expect mutex_ held.
  uint32_t read32_locked(uint32_t offset) noexcept;
  uint32_t read_csts_locked() noexcept;
  void write_cc_locked(uint32_t value) noexcept;
  void write_nssr_locked(uint32_t value) noexcept;
  void write_doorbell_locked(uint32_t offset, uint32_t value) noexcept;
  const char* doorbell_problem_locked(uint32_t offset, uint32_t value) const noexcept;
  void enable_locked() noexcept;
  const char* check_enable_config_locked() noexcept;
  void reset_locked() noexcept;

  // Queues and completions.
  bool fetching_allowed_locked() const noexcept;
  void process_sq_locked(uint16_t sqid) noexcept;
  void process_command_locked(uint16_t sqid, const spec::Sqe& sqe) noexcept;
  Outcome execute_locked(uint16_t sqid, const spec::Sqe& sqe) noexcept;
  void post_locked(uint16_t sqid, uint16_t cid, const Outcome& outcome) noexcept;
  void write_cqe_locked(CompletionQueue& cq, const spec::Cqe& cqe) noexcept;
  void flush_waiting_locked(CompletionQueue& cq) noexcept;
  static bool cq_full(const CompletionQueue& cq) noexcept;
  bool take_injection_locked(bool admin, uint8_t opcode, Outcome* outcome) noexcept;
  void complete_held_locked(size_t index, spec::Status status) noexcept;
  void deliver_namespace_event_locked() noexcept;

  // Memory (IOMMU).
  bool dma_reachable_locked(uint64_t iova, uint64_t length_bytes) const noexcept;
  uint8_t* dma_pointer_locked(uint64_t iova, uint64_t length_bytes) noexcept;

  // Admin commands (model_admin.cpp).
  Outcome execute_admin_locked(const spec::Sqe& sqe) noexcept;
  Outcome identify_locked(const spec::Sqe& sqe) noexcept;
  void fill_identify_controller_locked(spec::IdentifyController* id) const noexcept;
  spec::Status fill_identify_namespace_locked(uint32_t nsid,
                                              spec::IdentifyNamespace* id) const noexcept;
  spec::Status fill_namespace_list_locked(uint32_t after_nsid,
                                          spec::ActiveNamespaceList* list) const noexcept;
  spec::Status fill_descriptor_list_locked(uint32_t nsid, uint8_t* out) const noexcept;
  Outcome get_log_page_locked(const spec::Sqe& sqe) noexcept;
  Outcome set_features_locked(const spec::Sqe& sqe) noexcept;
  Outcome get_features_locked(const spec::Sqe& sqe) noexcept;
  Outcome create_io_cq_locked(const spec::Sqe& sqe) noexcept;
  Outcome create_io_sq_locked(const spec::Sqe& sqe) noexcept;
  spec::Status check_new_queue_locked(const spec::Sqe& sqe, bool is_sq) noexcept;
  Outcome delete_io_sq_locked(const spec::Sqe& sqe) noexcept;
  Outcome delete_io_cq_locked(const spec::Sqe& sqe) noexcept;
  Outcome abort_locked(const spec::Sqe& sqe) noexcept;
  Outcome async_event_request_locked(const spec::Sqe& sqe) noexcept;
  bool io_queues_exist_locked() const noexcept;

  // NVM commands and data transfer (model_io.cpp).
  Outcome execute_io_locked(const spec::Sqe& sqe) noexcept;
  NamespaceState* active_namespace_locked(uint32_t nsid) noexcept;
  const NamespaceState* find_namespace_locked(uint32_t nsid) const noexcept;
  Outcome read_write_locked(const spec::Sqe& sqe, NamespaceState& ns) noexcept;
  Outcome write_zeroes_locked(const spec::Sqe& sqe, NamespaceState& ns) noexcept;
  Outcome dataset_management_locked(const spec::Sqe& sqe, NamespaceState& ns) noexcept;
  // MDTS in bytes; 0 = no limit.
  uint64_t transfer_limit_bytes() const noexcept;
  // Moves a command's `length_bytes` of data between host memory (the SQE's PRPs, or its
  // SGL when `allow_sgl` and PSDT says so) and the device buffer [device, device +
  // device_bytes): to_host copies the buffer and zero-fills the rest; from the host, bytes
  // beyond the buffer are dropped. Every entry is validated before a byte moves. Errors: the
  // NVMe status (PRP Offset Invalid, Data Transfer Error, SGL errors, Invalid Field).
  spec::Status transfer_locked(const spec::Sqe& sqe, uint64_t length_bytes, bool allow_sgl,
                               bool to_host, uint8_t* device, uint64_t device_bytes) noexcept;
  // Walkers call segment(host pointer, bytes) for each piece of the transfer, in order, after
  // translating it; they stop at the first invalid entry. Defined in model_io.cpp.
  template <typename SegmentFn>
  spec::Status walk_prps_locked(const spec::Sqe& sqe, uint64_t length_bytes,
                                SegmentFn&& segment) noexcept;
  template <typename SegmentFn>
  spec::Status walk_sgl_locked(const spec::Sqe& sqe, uint64_t length_bytes,
                               SegmentFn&& segment) noexcept;
  // Where an SGL walk stands between segment lists.
  struct SglWalk {
    uint64_t remaining_bytes = 0;  // of the transfer, not yet described
    unsigned descriptors = 0;      // walked so far (bounded: a list may point at itself)
    spec::SglDescriptor next{};    // the Segment / Last Segment to walk next
    bool done = false;             // a Last Segment was walked
  };
  template <typename SegmentFn>
  spec::Status sgl_segment_locked(SglWalk* walk, SegmentFn& segment) noexcept;
  template <typename SegmentFn>
  spec::Status sgl_data_block_locked(const spec::SglDescriptor& d, SglWalk* walk,
                                     SegmentFn& segment) noexcept;

  const ModelOpts opts_;
  const uint64_t cap_;
  const uint32_t vs_;
  const uint32_t doorbell_stride_bytes_;
  uint32_t nn_ = 0;  // the highest configured NSID

  std::unique_ptr<env::PosixMemoryBackend> dma_memory_;
  std::unique_ptr<env::PosixMemoryBackend> storage_memory_;
  std::vector<NamespaceState> namespaces_;  // sorted by NSID; never resized after create()
  std::array<AllowedRange, kAllowedRangesMax> allowed_;

  mutable std::mutex mutex_;
  std::atomic<bool> removed_{false};
  State state_ = State::disabled;
  Shutdown shutdown_ = Shutdown::none;
  bool fatal_ = false;          // inject_fatal(): CFS until CC.EN 1->0
  bool nssr_occurred_ = false;  // CSTS.NSSRO, write 1 to clear
  unsigned ready_countdown_reads_ = 0;
  unsigned shutdown_countdown_reads_ = 0;
  uint32_t cc_ = 0;
  uint32_t aqa_ = 0;
  uint64_t asq_ = 0;
  uint64_t acq_ = 0;
  uint32_t page_size_bytes_ = 4096;  // CC.MPS as latched at enable

  // Queue state, indexed by QID (0 = admin), sized 1 + io_queue_pairs_max at creation.
  std::vector<SubmissionQueue> sqs_;
  std::vector<CompletionQueue> cqs_;
  std::vector<HeldCommand> held_;  // arrival order; capacity reserved at creation

  // Features (reset with the controller).
  uint32_t queues_granted_sq_ = 0;  // 1's based
  uint32_t queues_granted_cq_ = 0;
  bool write_cache_enabled_ = false;
  uint32_t async_event_config_ = 0;
  uint32_t keep_alive_timeout_ms_ = 0;

  // Namespace change events: the log page 04h contents and the notice mask.
  std::vector<uint32_t> changed_nsids_;  // capacity 1024 reserved; overflow flag beyond
  bool changed_overflow_ = false;
  bool namespace_event_pending_ = false;  // raised, not yet sent in an AER completion
  bool namespace_event_masked_ = false;   // sent, not yet acknowledged by reading log 04h

  std::array<Injection, 256> admin_injections_{};
  std::array<Injection, 256> io_injections_{};
  ModelStats stats_;
};

}  // namespace nvmf::nvme_pcie::model
