// The simulated HCA and fabric ("sim" provider): an in-process implementation of verbs.h that
// moves data between the registered memory of two endpoints, enforces keys, byte ranges and
// access rights like hardware, and models the ordering of memory-management work requests
// with hardware profiles (memreg-2017-race.md section 4). See README.md for the execution and
// locking model.
//
// Execution model: no hidden threads. Work requests make progress only inside calls on sim
// objects (QueuePair/SharedReceiveQueue flush, CompletionQueue::poll, move_to_error,
// CmChannel::poll_event, SimProvider::progress). Each such call runs the whole fabric: every
// queue pair with pending work advances, whichever thread called. One test thread that polls
// the initiator and target CQs in turn therefore sees everything complete, deterministically
// for a given seed.
//
// Data path, where the sim had to choose:
// - A remote access with a bad key, range or right: requester remote_access_error, both QPs to
//   error, the responder sees only flushes of its receives (rxe, VM.md). A window is checked
//   against its own range (stricter than rxe) and must be bound to the QP the access came on.
// - SEND_WITH_INV of a key that is not a VALID window bound to the receiving QP: under rxe the
//   receiver's RECV fails (remote_invalid_request_error) and the sender succeeds (as rxe does);
//   under the mlx5 profiles the sender fails with remote_invalid_request_error.
// - A receive too small: its RECV fails with local_length_error, the sender gets
//   remote_invalid_request_error; a bad receive lkey: local_protection_error / remote_operation_
//   error. Both QPs go to error.
// - Sending to a peer QP in error (or gone): retry_exceeded_error at once (no transport timer).
// - RNR: retried every rnr_timer_ns of the clock; rnr_retry_count 7 waits forever.
// - Memory-management WRs (BIND_MW, LOCAL_INV) change the key at once for remote accesses (a
//   bind's key may travel in the SEND behind it; an invalidated key is refused at once), but
//   later BIND_MW checks ("is the window FREE?") see the change only after the WR's commit lag
//   (SimOpts::mkey_commit_lag_steps, drawn per WR from the profile's distribution), signaled or
//   not, and the WR completes (CQE or not) only then. So waiting for a signaled LOCAL_INV's CQE
//   is what makes a rebind safe, not the signal bit. A LOCAL_INV checks the committed key.
// - Fences, as separate rules (SendFence, SimProfile): IBTA fence (prior RDMA READs complete),
//   local-invalidate fence (every prior WR complete), strong fence (every prior WR complete and
//   its key change visible: the mlx5 umr_fence), mlx5 INITIATOR_SMALL (prior READs complete).
//   A WR completes only after its key change is visible, so here the local-invalidate and the
//   strong fence wait for the same thing; they differ in which WRs they apply to.
// - Only a QP's own receive queue is flushed when it enters error; an SRQ keeps its receives.
// - Destroying a QP frees the windows bound to it; destroying an MR with bound windows frees
//   them (hardware would refuse with EBUSY) and logs a warning.
// - Async events (Device::poll_async_event, an eventfd per device): a failed WQE is reported by
//   its error CQE only, as on hardware (QP_FATAL is for errors no CQE can carry). The
//   responder of a NAK (a refused rkey or range, a bad SEND_WITH_INV key, an injected remote
//   status) raises QP_ACCESS_ERR / QP_REQ_ERR / QP_FATAL under the mlx5-like profiles, none
//   under rxe (which moves the QP to error silently). A CQ overrun raises CQ_ERR and the CQ
//   writes nothing more. SimProvider::inject_async_event raises any event with its effect.
//
// CM: listen / resolve / connect / accept / reject / disconnect as rdma_cm on IB or RoCE.
// Private-data lengths are reported as rdma_cm reports them: the CM message's maximum, not what
// was sent (56 on connect_request, 196 on the active side's established, 148 on rejected; 0 on
// the passive side's established). A consumer's reject() arrives as `rejected` with status 28
// (IB_CM_REJ_CONSUMER_DEFINED) and its private data; no listener on address:port (or a
// listener refusing by fault injection) gives `rejected` with status ECONNREFUSED and no
// private data; a request nobody answers gives `unreachable` with ETIMEDOUT after
// SimOpts::cm_connect_timeout_ms. Timeouts are evaluated in poll_event() and progress() on the
// SimOpts clock: a caller sleeping on event_fd() alone does not see one fire.
//
// Threading: everything in the sim is guarded by one mutex per fabric, so both sides of a
// connection may be driven from different threads at once. Post calls do not take it (they
// touch only owner-thread state); flush, poll and the CM do. Unlike the ibverbs provider, the
// sim locks on the data path: it is a test device, not a production one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "verbs/verbs.h"

namespace nvmf::verbs::sim {

// The most address ranges one device's SimProvider::skip_payloads may mark (a fixed table:
// the check runs for every RDMA READ and WRITE).
inline constexpr uint32_t kPayloadSkipRangesMax = 16;

// How memory-management WQEs (BIND_MW, LOCAL_INV) are ordered against later WQEs, and how
// long their key changes take to become visible (memreg-2017-race.md sections 3, 4 and 6).
// Every profile: a BIND_MW, a LOCAL_INV and a remote SEND_WITH_INV change the key for remote
// accesses when they execute; a BIND_MW's check that the window is FREE sees a BIND_MW's or
// LOCAL_INV's change only after that WR's commit lag (from mkey_commit_lag_steps, per profile),
// signaled or not, and the WR completes (CQE or not) only after that. A SEND_WITH_INV's change
// is visible at once (IBTA o9-5.2.1: before the receive completes).
enum class SimProfile : uint8_t {
  // Soft-RoCE (kernel 6.1): memory operations execute in order and take effect at once (no
  // lag); LOCAL_INV waits for all prior WRs (the IBTA local-invalidate fence, IBA 10.6.5.1,
  // mandatory in rxe); FENCE is the IBTA fence: prior RDMA READs complete (IBA 10.8.3.3).
  // Unlike rxe, windows restrict the byte range (stricter, see VM.md G4).
  rxe,
  // ConnectX before the 2017 UMR fence: every BIND_MW and LOCAL_INV lags
  // `mkey_commit_lag_steps` WQE steps (certain: the canonical trace always fails), and a
  // BIND_MW or LOCAL_INV may start before an earlier one has landed. A bind of a window that
  // still looks VALID fails with mw_bind_error (6), the QP goes to error and everything
  // outstanding is flushed. FENCE orders key updates unless SimOpts::send_fence says
  // otherwise: it waits for all prior WRs to complete and take effect (the strong fence); the
  // WQE after a BIND/LOCAL_INV waits for prior RDMA READs (mlx5 next_fence = INITIATOR_SMALL).
  mlx5_2017,
  // As mlx5_2017, but the hardware puts the strong fence on every BIND_MW (the umr_fence fix,
  // "Max's patch": a driver change, the host's work requests unchanged).
  mlx5_fenced,
  // The mlx5_2017 rules with the most reordering they allow, random but reproducible from
  // the seed: a random lag in [0, mkey_commit_lag_steps] per BIND_MW and LOCAL_INV, random
  // in-order completion delays, and a random execution budget and QP order per call.
  adversarial,
  // The mlx5_2017 rules with a rare slow commit, as the seed saw the race (about 30 errors in
  // 48 two-minute runs): a BIND_MW or LOCAL_INV lags mkey_commit_lag_steps with probability
  // 1 / mkey_commit_slow_one_in and lands at once otherwise, drawn per WR from a stream per QP
  // (seed and QP number), so a run is reproducible from the seed.
  mlx5_2017_rare,
};
// "rxe", "mlx5-2017", "mlx5-fenced", "adversarial", "mlx5-2017-rare".
const char* sim_profile_name(SimProfile profile) noexcept;
bool sim_profile_parse(const char* text, SimProfile* profile) noexcept;

// What a WR posted with kWrFenced (IBV_SEND_FENCE) waits for before it starts. Whether mlx5's
// IBV_SEND_FENCE (MLX5_WQE_CTRL_FENCE) orders key updates is not documented
// (memreg-2017-race.md section 3): `max` is safe only where it does.
enum class SendFence : uint8_t {
  profile,      // the profile's rule: rxe `reads`; the mlx5 profiles and adversarial `key_updates`
  reads,        // the IBTA fence: prior RDMA READs complete; a pending key change is not waited for
  key_updates,  // the strong fence: every prior WR complete and its key change visible
};
// "profile", "reads", "key-updates".
const char* send_fence_name(SendFence fence) noexcept;
bool send_fence_parse(const char* text, SendFence* fence) noexcept;

// mlx5-like capabilities (ConnectX-5 as reported by ibv_devinfo -v), used unless overridden.
DeviceCaps sim_default_caps();

struct SimOpts {
  SimProfile profile = SimProfile::rxe;
  uint64_t seed = 1;  // drives key bytes, the random choices of adversarial and mlx5_2017_rare
  // The commit lag of a BIND_MW or LOCAL_INV, signaled or not: steps from its execution until
  // its key change is visible to later binds and it completes. mlx5_2017 / mlx5_fenced: always
  // this; mlx5_2017_rare: this for one WR in mkey_commit_slow_one_in, else 0; adversarial: the
  // most (uniform in [0, this]); rxe: 0. A step is one executed WQE on the QP, or one sim call
  // while the QP has WQEs waiting to complete.
  uint32_t mkey_commit_lag_steps = 8;
  // mlx5_2017_rare: one BIND_MW / LOCAL_INV in this many lags (1: every one, as mlx5_2017).
  // A late LOCAL_INV fails a bind only when the window's rebind starts within the lag, so under
  // `unsafe` without remote invalidation at most about one read in this many fails: rare, yet
  // seen within seconds at the sim's rates (the seed: about 30 in 48 two-minute runs).
  uint32_t mkey_commit_slow_one_in = 1000000;
  // What kWrFenced waits for; SendFence::profile: the profile's rule (see SendFence).
  SendFence send_fence = SendFence::profile;
  // adversarial: the most steps a successful completion may be held back (still in order).
  uint32_t adversarial_completion_delay_steps = 4;
  // Time between RNR retries of a SEND that found no receive (the responder's RNR NAK timer;
  // 1 ms is within the IBTA 0.01..655 ms range). rnr_retry_count 7 waits forever.
  uint64_t rnr_timer_ns = 1000 * 1000;
  // A CM REQ that no one answers (listener refusing with no_answer, or never accepted or
  // rejected) ends in `unreachable` (status ETIMEDOUT) after this long.
  uint64_t cm_connect_timeout_ms = 1000;
  // Largest inline payload a QP may ask for (mlx5 gives a few hundred bytes).
  uint32_t max_inline_data = 256;
  // Time source for RNR timers, CM timeouts and time-delayed completions; nullptr = the
  // monotonic clock. Tests pass a FakeClock. Read under the sim lock: must not block.
  const Clock* clock = nullptr;
  DeviceCaps caps = sim_default_caps();  // caps.name is the device name ("sim0")
};
std::string opts_to_json(const SimOpts& opts);
// The rule kWrFenced follows under `opts` (SendFence::profile resolved): reads or key_updates.
SendFence sim_send_fence(const SimOpts& opts) noexcept;

// Per-device counters, readable at any time (a consistent snapshot taken under the lock).
struct SimCounters {
  // Work requests accepted by post_send / post_recv (SRQ included), by opcode.
  uint64_t send = 0;
  uint64_t send_with_inv = 0;
  uint64_t rdma_write = 0;
  uint64_t rdma_read = 0;
  uint64_t local_inv = 0;
  uint64_t bind_mw = 0;
  uint64_t recv = 0;
  uint64_t doorbells = 0;             // flush() calls that handed new WRs to the device
  uint64_t completions = 0;           // CQEs written (any status)
  uint64_t error_completions = 0;     // CQEs with an error other than wr_flush_error
  uint64_t flush_completions = 0;     // CQEs with wr_flush_error
  uint64_t qp_errors = 0;             // times a QP of this device entered the error state
  uint64_t rnr_naks = 0;              // SENDs that found no receive posted at this device
  uint64_t remote_access_errors = 0;  // remote accesses this device refused
  uint64_t injected_faults = 0;       // WRs failed by fail_next_wrs()
  uint64_t bytes_moved = 0;           // payload bytes of successful SEND/WRITE/READ issued here
  uint64_t bytes_skipped = 0;         // READ/WRITE payload bytes not moved (skip_payloads)
  uint64_t cq_overruns = 0;           // CQEs dropped: a CQ was full (a test bug) or in error
  uint64_t async_events = 0;          // async events raised on this device (any cause)
  uint64_t connects = 0;              // connect() calls from this device
  uint64_t established = 0;
  uint64_t established_notifications = 0;  // CmId::notify_established calls that succeeded
  uint64_t rejects = 0;      // connections refused or rejected (active side)
  uint64_t cm_timeouts = 0;  // connects and resolves that timed out (active side)
  uint64_t disconnects = 0;  // connections torn down (either side asked)
};

// What a listener does with incoming connection requests (fault injection).
enum class RefuseMode : uint8_t {
  none,       // deliver connect_request as usual
  reject,     // the CM rejects at once: the active side sees rejected / ECONNREFUSED
  no_answer,  // the request is lost: the active side sees unreachable / ETIMEDOUT later
};

// Holds back CQEs written to a CQ (fault injection). A delayed CQE also holds back every CQE
// behind it: a CQ is a FIFO.
struct CompletionDelay {
  uint32_t polls = 0;     // ready after this many further poll() calls on the CQ ...
  uint64_t delay_ns = 0;  // ... and once this much clock time has passed
  uint32_t count = 1;     // how many of the next CQEs are delayed (UINT32_MAX: until reset)
};

// A key's state as the device sees it (committed state), for tests and logs.
enum class KeyState : uint8_t { unknown, free, valid };

class Fabric;
class SimDevice;

class SimProvider final : public Provider {
 public:
  // A new fabric with one device (opts.caps.name). invalid_argument on bad options.
  static Result<std::unique_ptr<SimProvider>> create(const SimOpts& opts = {});
  // A second HCA on the same fabric (same profile, clock, seed stream and lock), named
  // `device_name`, with its own keys and counters: a host and a target on separate devices.
  Result<std::unique_ptr<SimProvider>> create_peer(const std::string& device_name);

  SimProvider(const SimProvider&) = delete;
  SimProvider& operator=(const SimProvider&) = delete;
  ~SimProvider() override;

  // Provider. Unlike the interface requires, every call here is thread-safe.
  const char* name() const noexcept override { return "sim"; }
  std::vector<std::string> device_names() const override;
  Result<std::unique_ptr<CmChannel>> create_cm_channel() noexcept override;

  // The device every CmId of this provider binds to.
  Device& device() noexcept;
  const SimOpts& opts() const noexcept;
  SimProfile profile() const noexcept { return opts().profile; }
  uint64_t seed() const noexcept { return opts().seed; }

  // Runs the fabric once, as every flush/poll does (a step for the lag; CM timeouts).
  void progress() noexcept;

  // --- Fault injection (any thread) ---
  // The next `count` send-queue WRs to execute anywhere on the fabric (or on `qp`) fail with
  // `status`: an error CQE, the QP goes to error, the rest is flushed. For remote statuses
  // (remote_access_error, remote_invalid_request_error, remote_operation_error) the peer QP
  // goes to error too, as a NAK would do.
  void fail_next_wrs(uint32_t count, WcStatus status) noexcept;
  Result<void> fail_next_wrs(QueuePair& qp, uint32_t count, WcStatus status) noexcept;
  // The network drops the connection: both sides get `disconnected`, both QPs go to error.
  Result<void> drop_connection(CmId& id) noexcept;
  // Delays the next CQEs written to `cq` (see CompletionDelay). count = 0 clears.
  Result<void> delay_completions(CompletionQueue& cq, const CompletionDelay& delay) noexcept;
  // Raises an async event on this device, with the effect the hardware's event implies:
  //   qp_fatal, qp_request_error, qp_access_error, wq_fatal: that QP (event.qp_num) to error
  //     (its WRs flush; its peer notices only by the retries that now fail);
  //   cq_error: event.cq (of this device) goes to error: every later CQE for it is lost, as
  //     after an overrun (its QPs keep running; their completions vanish);
  //   device_fatal: every QP of the device to error. The sim's device keeps working
  //     afterwards, like a device its driver has reset, so tests can watch a recovery;
  //   anything else (port_error, srq_error, ...): the event only.
  // invalid_argument: a QP number or CQ that is not this device's.
  Result<void> inject_async_event(const AsyncEvent& event) noexcept;
  // Makes the listener on address:port refuse (or ignore) connection requests.
  void refuse_connections(const std::string& address, uint16_t port, RefuseMode mode);
  // resolve() of this address ends in `unreachable` after its timeout.
  void set_unreachable(const std::string& address, bool unreachable);

  // --- Benchmark substrate ---
  // RDMA READs and WRITEs whose remote range lies inside [addr, addr + bytes) of this
  // device's memory move no payload: every check (QP state, key, access, bounds) is made and
  // the WR completes as before; the issuing device's SimCounters::bytes_skipped counts what
  // was not copied. A real HCA moves payloads by DMA, without the CPU; the sim copies them on
  // the thread that rings the doorbell, which in a two-thread run is the target's reactor for
  // every read (docs/performance.md measures the share). `nvmf_perf --sim-payload skip` marks
  // its I/O buffers so that two cores measure the stack. SENDs always move their payload.
  // invalid_argument: bytes 0, or more than kPayloadSkipRangesMax ranges. Setup path.
  Result<void> skip_payloads(const void* addr, size_t bytes) noexcept;

  // --- Observation ---
  SimCounters counters() const noexcept;  // this device
  // Live QPs of this device by number, oldest first (numbers grow): how a test finds the QP a
  // connection got without reaching into the stack above.
  std::vector<uint32_t> qp_nums() const;
  // The send CQ of QP `qp_num` of this device (nullptr: none), e.g. to name it in a cq_error.
  const CompletionQueue* send_cq_of(uint32_t qp_num) const noexcept;
  void reset_counters() noexcept;
  KeyState key_state(uint32_t key) const noexcept;  // a key of this device

 private:
  SimProvider(std::shared_ptr<Fabric> fabric, SimDevice* device) noexcept;
  std::shared_ptr<Fabric> fabric_;
  SimDevice* device_;  // owned by the fabric, lives as long as it
};

}  // namespace nvmf::verbs::sim
