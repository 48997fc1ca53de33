// libnvmf_host: the NVMe-over-Fabrics (RDMA) initiator library.
//
// Objects: a Host (the library context: verbs provider, registered DMA memory) connects
// Controllers; a Controller has Namespaces and hands out IoQpairs (one NVMe I/O queue = one
// RDMA queue pair each). Nothing is shared on the data path.
//
// Threads (SPDK's model): an IoQpair belongs to the thread that allocated it; only that
// thread submits on it and calls process_completions() (or, in event mode, the
// wait_for_completions() that runs it), and callbacks run inside process_completions(), never
// inside a submit call. A Controller's admin queue belongs to the
// thread that connected it: it calls process_admin_completions() regularly (keep-alive, async
// events) and disconnect(). Blocking calls (discover, connect, alloc_io_qpair, disconnect)
// poll until done, calling HostOpts::idle between rounds.
//
// The data path allocates nothing, takes no lock and throws nothing: a full queue answers
// `busy`, and the caller retries after process_completions().
//
// Errors: calls that can fail return nvmf::Result<T> (nvmf/result.h: an Errc, the errno
// behind it, a static detail string); a command's own outcome is the NVMe status in its
// callback (nvmf/status.h). Build with C++20; link libnvmf_host (pkg-config nvmf_host, or
// find_package(nvmf) and the target nvmf::host).
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nvmf/export.h"
#include "nvmf/result.h"
#include "nvmf/status.h"

namespace nvmf {
class Clock;
}
namespace nvmf::verbs {
class Provider;
}

namespace nvmf::host {

// ---------------------------------------------------------------------------------------
// Addresses

inline constexpr const char* kDiscoveryNqn = "nqn.2014-08.org.nvmexpress.discovery";

// A transport ID in SPDK's string form:
//   "trtype:RDMA adrfam:IPv4 traddr:10.0.0.1 trsvcid:4420 subnqn:nqn.2026-01.io.example:disk1"
// Keys are case-insensitive, written key:value or key=value, separated by any whitespace;
// trtype must be RDMA, adrfam IPv4 (default) or IPv6, trsvcid defaults to 4420, subnqn to the
// discovery NQN and must be a valid NQN.
struct TransportId {
  std::string trtype = "RDMA";
  std::string adrfam = "IPv4";
  std::string traddr;
  std::string trsvcid = "4420";
  std::string subnqn = kDiscoveryNqn;
  friend bool operator==(const TransportId&, const TransportId&) = default;

  // invalid_argument with a one-line reason in *message (naming the key) on bad input.
  NVMF_API static Result<TransportId> parse(std::string_view text, std::string* message);
  NVMF_API std::string to_string() const;
  NVMF_API uint16_t port() const noexcept;  // trsvcid as a number (parse() checked it)
};

// The host's identity, as nvme-cli finds it: /etc/nvme/hostnqn and /etc/nvme/hostid, else a
// generated "nqn.2014-08.org.nvmexpress:uuid:<uuid>" whose UUID is also the host ID.
struct HostIdentity {
  std::string hostnqn;
  std::array<uint8_t, 16> hostid{};
};
// `etc_dir`: where hostnqn/hostid live (tests pass a temporary directory). Reads only: a
// generated identity is new on every call (ControllerOpts' default).
NVMF_API HostIdentity default_host_identity(const std::string& etc_dir = "/etc/nvme");

// The identity as nvme-cli (libnvme's nvme_host_get_ids) resolves it, each piece in turn:
//   1. `given` (a non-empty hostnqn, a non-zero hostid: the command line's -q / -I);
//   2. etc_dir/hostnqn, etc_dir/hostid (a hostid file that is not a UUID is ignored);
//   3. derived from the other piece: the host ID is the UUID of a "...:uuid:<uuid>" host NQN,
//      the host NQN is "nqn.2014-08.org.nvmexpress:uuid:<host ID>";
//   4. generated: one random UUID as the host ID and in the host NQN.
// With `save`, each piece that came from 3 or 4 is written to its file (one line, mode 0644;
// etc_dir and its missing parents are created, mode 0755), so that later runs (and nvme-cli)
// find the same identity. A file is never overwritten: one that appears meanwhile (another
// process saved first) is read and used instead. A file that cannot be written is not an
// error: `*warning` (may be null) gets one line naming it and why, and the identity is still
// returned. Configuration path; any thread.
NVMF_API HostIdentity resolve_host_identity(const HostIdentity& given, const std::string& etc_dir,
                                            bool save, std::string* warning);
NVMF_API std::string uuid_to_string(const std::array<uint8_t, 16>& uuid);
NVMF_API bool uuid_parse(std::string_view text, std::array<uint8_t, 16>* uuid);

// ---------------------------------------------------------------------------------------
// Options

// How each I/O's buffer gets the key the target uses (src/memreg, docs/architecture.md).
enum class MemregPolicy : uint8_t {
  global,    // one MR key for all DMA memory, keyed SGL subtype ADDRESS (SPDK's way)
  unsafe,    // per-I/O window, unsignaled LOCAL_INV, reused at once: the 2017 race
  sagi,      // per-I/O window, signaled LOCAL_INV, the I/O completes after it
  max,       // per-I/O window, unsignaled LOCAL_INV, the next bind of the window fenced
  deferred,  // per-I/O window, signaled LOCAL_INV off the completion path
};
NVMF_API const char* memreg_policy_name(MemregPolicy policy) noexcept;
NVMF_API bool memreg_policy_parse(std::string_view text, MemregPolicy* policy) noexcept;

// ControllerOpts::fast_io_fail_timeout_ms: I/O waits for the reconnect (or ctrl loss).
inline constexpr uint32_t kFastIoFailOff = UINT32_MAX;

struct ControllerOpts {
  std::string hostnqn;              // empty: default_host_identity()
  std::array<uint8_t, 16> hostid{}; // all zero: default_host_identity()
  uint16_t io_queue_count = 1;      // I/O queues asked for with Set Features Number of Queues
  uint16_t io_queue_size = 128;     // entries per I/O queue (kernel and SPDK default); the
                                    // target may grant fewer (CRQSIZE); depth = entries - 1
  uint16_t admin_queue_size = 32;   // kernel's NVME_AQ_DEPTH
  uint32_t keep_alive_timeout_ms = 10000;  // KATO; Keep Alive sent every KATO/2; 0 = none
  uint32_t in_capsule_data_bytes = 4096;   // writes up to min(this, target's IOCCSZ - 64)
                                           // travel in the command capsule; 0 = never
  MemregPolicy memreg = MemregPolicy::global;  // key policy of the I/O queues (the admin
                                               // queue always uses `global`)
  // Error recovery of an I/O queue whose queue pair failed: reconnect after this delay, resend
  // what was in flight; give up (those commands fail, aborted) after ctrl_loss_timeout_ms.
  uint32_t reconnect_delay_ms = 10000;        // kernel's default
  uint32_t ctrl_loss_timeout_ms = 600000;     // kernel's default
  uint32_t connect_timeout_ms = 5000;         // CM resolve + connect + Fabrics Connect
  uint32_t admin_timeout_ms = 60000;          // one admin command (kernel's admin_timeout)
  // Per-I/O timeout (the kernel's nvme_core io_timeout); 0 = none. A command outstanding on an
  // I/O qpair this long gets an Abort (admin opcode 08h, sent by the admin thread's
  // process_admin_completions(); one log line, IoQpairStats::timeouts and aborts_sent). If the
  // target aborts it, it completes with Command Abort Requested (the caller may resend it). If
  // it has not completed one more io_timeout_ms later, or the Abort failed (refused, no admin
  // queue, more than 64 Aborts waiting), the controller is reset as after a lost admin queue
  // (controller_recovery: every queue reconnects to the new controller and resends what it
  // held; the kernel host's error recovery), or without controller_recovery that qpair alone
  // goes to error recovery as after a QP error ("I/O timeout": reconnect, resend). The owner's process_completions()
  // checks at most every min(1 s, io_timeout_ms / 8), starting a command's timer at the first
  // check after its submit: a command times out between io_timeout_ms and io_timeout_ms + 2
  // check intervals after it was submitted, never earlier.
  uint32_t io_timeout_ms = 30000;
  // The kernel's fast_io_fail_tmo: while an I/O queue is reconnecting, once this long has
  // passed since the loss, the commands held for resending complete with Host Pathing Error
  // (SCT 3h, SC 70h: the kernel's NVME_SC_HOST_PATH_ERROR; IoQpairStats::fast_failed) and new
  // submits answer bad_state instead of busy (reconnecting() stays true), while the reconnect
  // goes on until ctrl_loss_timeout_ms; once reconnected, submits are taken again. 0 = fail at
  // once; kFastIoFailOff (default) = wait for the reconnect or the controller loss timeout.
  uint32_t fast_io_fail_timeout_ms = kFastIoFailOff;
  // Controller reset when the admin queue is lost (its queue pair failed, a Keep Alive went
  // unanswered for KATO, the target restarted), as the kernel host's error recovery: after
  // reconnect_delay_ms the admin thread's process_admin_completions() connects a new admin
  // queue (Fabrics Connect for a new controller ID; blocking, up to connect_timeout_ms plus the
  // bring-up's admin commands per attempt), enables and identifies the controller and rescans
  // its namespaces; then every I/O qpair, at its owner's next process_completions(), reconnects
  // to the new controller ID and resends what it held. An I/O qpair whose queue pair was still
  // up is reset too: a new controller knows none of the old one's queues. Attempts repeat
  // every reconnect_delay_ms until ctrl_loss_timeout_ms after the loss; then the controller is
  // given up and the I/O it held fails (aborted). false: a lost admin queue leaves the
  // controller disconnected and its owner reconnects it (nvmf_hostd does).
  bool controller_recovery = true;
};

struct HostOpts {
  // The RDMA provider; nullptr = rdma-core (ibverbs). Tests and nvmf_perf --sim pass the
  // simulated HCA's peer provider. Must outlive the Host.
  verbs::Provider* provider = nullptr;
  // Called between polling rounds of every blocking call. Tests that run the target on the
  // same thread pump it here; nullptr = spin.
  void (*idle)(void* ctx) = nullptr;
  void* idle_ctx = nullptr;
  // Time for keep-alive and timeouts; nullptr = the monotonic clock. Tests pass the FakeClock
  // their target runs on. Must outlive the Host.
  const Clock* clock = nullptr;
};

// ---------------------------------------------------------------------------------------
// Results

struct DiscoveryEntry {
  uint8_t trtype = 0;      // 1 = RDMA
  uint8_t adrfam = 0;      // 1 = IPv4, 2 = IPv6
  uint8_t subtype = 0;     // 1 = discovery subsystem (referral), 2 = NVM subsystem
  uint16_t portid = 0;
  uint16_t cntlid = 0;
  std::string trsvcid;
  std::string traddr;
  std::string subnqn;
  // The entry as a TransportId (to pass to connect()).
  NVMF_API TransportId trid() const;
};

struct ControllerData {
  uint16_t cntlid = 0;
  uint16_t vid = 0;
  std::string serial_number;
  std::string model_number;
  std::string firmware_revision;
  std::string subnqn;
  uint64_t cap = 0;                 // CAP property
  uint32_t vs = 0;                  // VS property
  uint32_t max_transfer_bytes = 0;  // from MDTS; 0 = no limit reported
  uint32_t in_capsule_data_bytes = 0;  // IOCCSZ * 16 - 64: what the target accepts in-capsule
  uint32_t namespace_count = 0;     // NN
  uint16_t io_queues_granted = 0;   // from Set Features Number of Queues
  uint16_t io_queue_size = 0;       // entries the target granted per I/O queue
  uint8_t aerl = 0;
  uint8_t acl = 0;                  // Abort Command Limit, 0's based: Aborts outstanding at once
};

struct ControllerStats {
  uint64_t keep_alives_sent = 0;
  uint64_t async_events = 0;
  uint64_t reconnects = 0;           // I/O queue reconnects, summed over the qpairs
  uint64_t io_qpairs_allocated = 0;  // ever allocated (not the number alive now)
  uint64_t resets = 0;               // controller resets done (ControllerOpts::controller_recovery)
  uint64_t reset_attempts_failed = 0;
  uint64_t namespace_rescans = 0;    // namespace lists read again (reset or Namespace Attribute
                                     // Changed)
};

// Every command's completion. `status` is the NVMe status; a command that never reached the
// controller (the queue was disconnected) completes with Command Aborted due to SQ Deletion.
using IoCallback = void (*)(void* ctx, const spec::Status& status);

class Controller;
class Namespace;
class IoQpair;

// ---------------------------------------------------------------------------------------
// Host

class NVMF_API Host {
 public:
  static Result<std::unique_ptr<Host>> create(const HostOpts& opts);
  ~Host();
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  // DMA memory for I/O buffers: registered (by src/memreg) with every RDMA device the host
  // uses, now and later. Page aligned. nullptr when out of memory. Any thread.
  void* dma_alloc(size_t bytes);
  void dma_free(void* buffer);

  // Connects to the discovery controller at `trid` (subnqn ignored), reads the discovery log
  // (again while its generation counter changes), disconnects. Errors name what failed:
  // unreachable, rejected (with the NVMe/RDMA or NVMe status), timeout.
  Result<std::vector<DiscoveryEntry>> discover(const TransportId& trid,
                                               const ControllerOpts& opts = {},
                                               std::string* message = nullptr);

  // The whole bring-up: admin Connect, Property Get CAP and VS, CC.EN = 1, wait CSTS.RDY,
  // Identify Controller, Set Features Number of Queues, Identify active namespaces and each
  // namespace, Async Event Requests, keep-alive. On failure *message says which step and
  // what the target answered (e.g. "connect refused: Connect Invalid Host").
  Result<std::unique_ptr<Controller>> connect(const TransportId& trid,
                                              const ControllerOpts& opts = {},
                                              std::string* message = nullptr);

  struct NVMF_LOCAL Impl;  // the library's own (src/initiator), not exported
  Impl& impl() noexcept { return *impl_; }

 private:
  NVMF_LOCAL explicit Host(std::unique_ptr<Impl> impl);  // made by the library
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------
// Controller

struct IoQpairOpts {
  uint16_t queue_size = 0;  // 0 = ControllerOpts::io_queue_size
  // Event mode: IoQpair::event_fd() and wait_for_completions(), so that the owner can sleep
  // while it waits (the kernel's and SPDK's interrupt mode). process_completions() is the same
  // either way: event mode costs no system call and no work per I/O until the owner waits.
  // false (default): poll mode only, event_fd() is -1.
  bool completion_events = false;
};

class NVMF_API Controller {
 public:
  ~Controller();  // disconnect() if still connected
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // data() is read again at a controller reset (cntlid changes; the admin thread writes it).
  const ControllerData& data() const noexcept;
  const TransportId& trid() const noexcept;
  ControllerStats stats() const noexcept;
  // The admin queue is up: false while a controller reset is under way and once lost.
  bool connected() const noexcept;
  // A controller reset is under way or waiting for its next attempt
  // (ControllerOpts::controller_recovery); false once connected again or given up.
  bool recovering() const noexcept;

  // Active namespaces, ascending NSID. Identified at connect and again at each controller reset
  // and each Namespace Attribute Changed notice (the admin thread's process_admin_completions()
  // reads the lists; admin thread calls, like these two). A Namespace object stays valid until
  // the Controller goes: one that was removed or changed (size, block size, UUID, NGUID) is
  // replaced by a new object and ns() no longer returns it; I/O still submitted through it
  // reaches the target with its NSID (which answers what it answers for that NSID).
  const std::vector<uint32_t>& active_namespaces() const noexcept;
  Namespace* ns(uint32_t nsid) noexcept;  // nullptr when not active

  // Connects one more I/O queue (QID 1, 2, ...) owned by the calling thread. busy when the
  // controller's granted I/O queues are all in use. May run on any thread, concurrently with
  // the admin thread's process_admin_completions() and with other threads' alloc_io_qpair()
  // and IoQpair destruction (a mutex guards the queue registry); not with disconnect().
  // Called on the admin thread, it keeps the controller's keep-alive going while it blocks
  // (polls the admin queue, sends a Keep Alive when due), so that connecting many queues does
  // not outlast KATO; on another thread the admin thread's own polling does that.
  Result<std::unique_ptr<IoQpair>> alloc_io_qpair(const IoQpairOpts& opts = {},
                                                  std::string* message = nullptr);

  // Admin thread: keep-alive, async events, admin completions. Returns completions handled.
  int process_admin_completions();

  // Asks every I/O qpair of the controller, those allocated later included, to switch to
  // `policy` (IoQpair::set_memreg_policy): each qpair's owner thread takes the request at its
  // next process_completions() (one atomic load there; no lock on the data path), so
  // a qpair switches only while its owner polls. A later call replaces an earlier one.
  // Errors, asking nothing: invalid_argument (not a MemregPolicy), not_supported (the
  // device cannot do `policy`), bad_state (not connected). Any thread, like alloc_io_qpair().
  Result<void> set_memreg_policy(MemregPolicy policy);

  // Shuts the controller down: every I/O qpair still allocated is disconnected (each
  // outstanding callback runs once, aborted; call from the thread that owns them, or free them
  // first), CC.SHN = normal and wait for CSTS.SHST, then the admin queue goes. Idempotent.
  Result<void> disconnect();

  struct NVMF_LOCAL Impl;  // the library's own (src/initiator), not exported
  Impl& impl() noexcept { return *impl_; }
  NVMF_LOCAL explicit Controller(std::unique_ptr<Impl> impl);  // made by the library

 private:
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------
// Namespace: geometry and the I/O commands. Submit calls return `busy` when the qpair is full,
// `invalid_argument` for a range outside the namespace, 0 or more than 65536 blocks, a length
// that is not whole blocks, a transfer above the controller's MDTS (data().max_transfer_bytes;
// the library does not split I/O) or a buffer not from Host::dma_alloc(), `bad_state` when the
// qpair is disconnected (or reconnecting past fast_io_fail_timeout_ms). On error the callback
// is not called; on success it is called exactly once, from process_completions().

class NVMF_API Namespace {
 public:
  uint32_t id() const noexcept { return nsid_; }
  uint32_t block_size() const noexcept { return block_size_; }
  uint64_t block_count() const noexcept { return block_count_; }
  uint64_t capacity_bytes() const noexcept { return block_count_ * block_size_; }
  const std::array<uint8_t, 16>& uuid() const noexcept { return uuid_; }  // zero if none
  const std::array<uint8_t, 16>& nguid() const noexcept { return nguid_; }

  Result<void> read(IoQpair& qpair, void* buffer, uint64_t lba, uint32_t blocks, IoCallback cb,
                    void* cb_ctx) noexcept;
  Result<void> write(IoQpair& qpair, const void* buffer, uint64_t lba, uint32_t blocks,
                     IoCallback cb, void* cb_ctx) noexcept;
  // Up to 16 iovecs; total length = blocks * block_size. Several iovecs travel as a Last
  // Segment list of keyed descriptors (SPDK and this project's target take it; the Linux
  // kernel target takes one descriptor only).
  Result<void> readv(IoQpair& qpair, const iovec* iov, int iovcnt, uint64_t lba, uint32_t blocks,
                     IoCallback cb, void* cb_ctx) noexcept;
  Result<void> writev(IoQpair& qpair, const iovec* iov, int iovcnt, uint64_t lba,
                      uint32_t blocks, IoCallback cb, void* cb_ctx) noexcept;
  Result<void> flush(IoQpair& qpair, IoCallback cb, void* cb_ctx) noexcept;
  Result<void> write_zeroes(IoQpair& qpair, uint64_t lba, uint32_t blocks, IoCallback cb,
                            void* cb_ctx) noexcept;
  // Dataset Management, deallocate (TRIM) of one range.
  Result<void> deallocate(IoQpair& qpair, uint64_t lba, uint32_t blocks, IoCallback cb,
                          void* cb_ctx) noexcept;

  Namespace(uint32_t nsid, uint32_t block_size, uint64_t block_count,
            const std::array<uint8_t, 16>& uuid, const std::array<uint8_t, 16>& nguid) noexcept
      : nsid_(nsid), block_size_(block_size), block_count_(block_count), uuid_(uuid),
        nguid_(nguid) {}

 private:
  NVMF_LOCAL Result<void> check_range(uint64_t lba, uint32_t blocks) const noexcept;
  NVMF_LOCAL Result<void> check_transfer(const IoQpair& qpair, const iovec* iov, int iovcnt,
                                         uint64_t lba, uint32_t blocks) const noexcept;
  uint32_t nsid_;
  uint32_t block_size_;
  uint64_t block_count_;
  std::array<uint8_t, 16> uuid_;
  std::array<uint8_t, 16> nguid_;
};

// ---------------------------------------------------------------------------------------
// IoQpair

struct IoQpairStats {
  uint64_t submitted = 0;
  uint64_t completed = 0;
  uint64_t errors = 0;        // completions with a non-success status
  uint64_t busy = 0;          // submits refused: the queue was full, reconnecting or switching
  uint64_t in_capsule_writes = 0;
  uint64_t qp_errors = 0;     // the queue pair failed (a bind's status 6 included)
  uint64_t bind_errors = 0;   // memory window binds that failed
  uint64_t reconnects = 0;    // successful reconnects of this queue
  uint64_t resubmitted = 0;   // commands sent again after a reconnect
  uint64_t timeouts = 0;      // commands outstanding longer than io_timeout_ms
  uint64_t aborts_sent = 0;   // Aborts the admin queue sent for them
  uint64_t fast_failed = 0;   // commands failed by fast_io_fail_timeout_ms while reconnecting
  // The work behind the I/Os, counted as posted (reconnects included): divided by the I/Os
  // completed, what a memory-registration policy costs per I/O, free of timing noise (the
  // doorbells aside: how many WRs share one depends on how many completions a poll finds).
  uint64_t sends_posted = 0;              // SEND work requests (command capsules)
  uint64_t binds_posted = 0;              // BIND_MW (window policies)
  uint64_t local_invalidates_posted = 0;  // LOCAL_INV (window policies)
  uint64_t signaled_posted = 0;           // send-queue WRs asking for a completion
  uint64_t fenced_posted = 0;             // send-queue WRs with IBV_SEND_FENCE
  uint64_t doorbells = 0;                 // flushes of posted WRs to the HCA
  uint64_t cqes_reaped = 0;               // work completions polled, receives included
  uint64_t memreg_switches = 0;           // set_memreg_policy() switches done
  uint64_t memreg_switch_failures = 0;    // ... whose new policy could not be built
  // Event mode (IoQpairOpts::completion_events): what waiting cost.
  uint64_t waits = 0;          // wait_for_completions() calls
  uint64_t arms = 0;           // CQ notification requests (one per event taken at most)
  uint64_t sleeps = 0;         // epoll_wait() calls on event_fd() (timeout 0 included)
  uint64_t wakeups = 0;        // ... that returned with event_fd() readable, not at the timeout
  uint64_t timer_wakeups = 0;  // ... because the qpair's next timer was due
};

class NVMF_API IoQpair {
 public:
  ~IoQpair();  // disconnect()
  IoQpair(const IoQpair&) = delete;
  IoQpair& operator=(const IoQpair&) = delete;

  // Sends what was submitted since the last call (one doorbell for the batch, like SPDK's
  // delay_cmd_submit: a command reaches the target only once this runs), then reaps
  // completions and runs callbacks; at most `max_completions` callbacks (0 = no limit).
  // Returns how many ran. Owner thread only.
  int process_completions(uint32_t max_completions = 0) noexcept;

  // Event mode (IoQpairOpts::completion_events). Owner thread only, like process_completions().
  //
  // wait_for_completions() runs process_completions() (so what was submitted is sent first, as
  // always) and returns if a callback ran. Otherwise it arms the CQ, polls once more (a
  // completion that landed before the arm raised no event) and sleeps on event_fd() until a
  // completion, a CM event or the qpair's next timer, at most `timeout_ms` (-1: no limit, 0: no
  // sleep, only the arm); then it runs what woke it. The timers are those of
  // process_completions(): the I/O timeout scan (io_timeout_ms, while commands are
  // outstanding), a reconnect's delay, its CM steps and fast_io_fail, so they keep working
  // while the owner sleeps. A wake that completes nothing (an event left by an earlier arm, a
  // CM event) sleeps again; a timer that completes nothing returns 0. Keep-alive and Aborts are
  // the admin thread's (process_admin_completions()); a controller reset or a
  // Controller::set_memreg_policy() is taken at this qpair's next wake-up or call.
  // Returns the callbacks run: 0 when timeout_ms passed, a timer was due with nothing to
  // complete, or a signal interrupted the sleep (EINTR). A return of 0 leaves the CQ and the
  // timer armed. timeout_ms is monotonic time; the timers run on HostOpts::clock.
  // Errors: bad_state (event mode off); when arming the CQ or epoll_wait() failed, the code
  // of its errno (Error::os_errno holds it).
  Result<int> wait_for_completions(int timeout_ms) noexcept;
  // An epoll fd the qpair owns, for the application's own epoll set (or poll()); -1 in poll
  // mode. It holds the CQ's completion channel, the CM channel and a timerfd set for the
  // qpair's next timer; a reconnect makes a new CQ and CM channel and adds them to the same
  // set, so the fd stays the same for the qpair's life (closed with it). Readable once a
  // wait_for_completions() that returned 0 armed it and a completion, a CM event or the timer
  // came; possibly once spuriously per arm (a completion a poll already took). The loop: call
  // wait_for_completions(0) until it returns 0, sleep until event_fd() is readable, repeat.
  int event_fd() const noexcept;

  uint16_t qid() const noexcept;
  uint32_t depth() const noexcept;        // commands that may be outstanding at once
  uint32_t outstanding() const noexcept;  // submitted, callback not yet run
  bool connected() const noexcept;
  // The queue pair failed (or an I/O timed out) and the qpair is reconnecting (submits answer
  // busy meanwhile, bad_state once fast_io_fail_timeout_ms passed; the commands in flight are
  // resent once it is back, or fail at fast_io_fail_timeout_ms or ctrl_loss_timeout_ms).
  bool reconnecting() const noexcept;
  IoQpairStats stats() const noexcept;

  // Switches the queue's memory-registration key policy while it runs, without a reconnect
  // (ControllerOpts::memreg chose the first). Asynchronous, like all of the data path: from
  // this call on, submits answer `busy` (as while reconnecting; switching() is true); the
  // commands in flight complete as usual, and so do the policy's LOCAL_INVs (sagi, deferred);
  // then process_completions() builds the new policy (allocating its windows: a set-up step)
  // and submits are taken again. The old windows are deallocated once no work request names
  // them. No I/O fails because of a switch; stats().memreg_switches counts the switches done.
  //   - `policy` already in use: nothing to do, success. A request while a switch is pending
  //     replaces its target; asking for the policy in use then calls the switch off.
  //   - While reconnecting (or when a QP error ends the drain: recovery wins), the switch
  //     takes effect with the reconnect: the new queue pair comes up with the new policy and
  //     the commands it resends use it. A request once the new queue pair is up (Connect
  //     under way) drains the resent commands first.
  //   - If the new policy cannot be built (the device is out of memory windows), the old one
  //     stays: an error is logged and stats().memreg_switch_failures counted.
  //   - disconnect() during a switch drops the switch; every I/O is still called back once.
  // Errors, changing nothing: invalid_argument (not a MemregPolicy), not_supported (the
  // device cannot do `policy`: the window policies need type-2 memory windows), bad_state
  // (disconnected, or given up after ctrl_loss_timeout_ms). Owner thread.
  Result<void> set_memreg_policy(MemregPolicy policy) noexcept;
  // The policy in use (until a switch completes, the old one).
  MemregPolicy memreg_policy() const noexcept;
  // A switch was asked for and is not done yet (submits answer busy meanwhile).
  bool switching() const noexcept;

  // Disconnects the queue: every outstanding callback runs once, aborted (SQ deletion), before
  // this returns. Idempotent.
  void disconnect() noexcept;

  struct NVMF_LOCAL Impl;  // the library's own (src/initiator), not exported
  Impl& impl() noexcept { return *impl_; }
  const Impl& impl_const() const noexcept { return *impl_; }
  NVMF_LOCAL explicit IoQpair(std::unique_ptr<Impl> impl);  // made by the library

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace nvmf::host
