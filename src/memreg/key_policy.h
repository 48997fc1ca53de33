// Per-I/O key policies: how one I/O's buffer gets the remote key the target uses, and what
// the host must do once the response is in. The 2017 nvme-rdma race and its two fixes
// (docs/architecture.md, ../shared/design/notes/memreg-2017-race.md) are policies here:
//
//   policy    key per I/O            invalidation when the target did not     I/O completes      window reuse
//   global    no (the MR's rkey)      none                                     response + SEND    n/a
//   unsafe    type-2 window           LOCAL_INV, unsignaled                    response + SEND    at once (the 2017 bug)
//   sagi      type-2 window           LOCAL_INV, signaled                      after the LOCAL_INV after its completion
//   max       type-2 window           LOCAL_INV, unsignaled                    response + SEND    next bind fenced
//   deferred  type-2 window           LOCAL_INV, signaled                      response + SEND    after its completion
//                                                                                                (pool 2 x depth)
//
// A window is bound (BIND_MW, posted before the SEND on the same QP, which orders them) with
// the next key, and the command's keyed SGL asks for remote invalidation (subtype INVALIDATE).
// When the response says the target invalidated exactly that key (SEND_WITH_INVALIDATE), no
// LOCAL_INV is posted: each bind is invalidated exactly once (a second invalidate of a window
// crashes rxe kernels, see VM.md).
//
// One KeyPolicy per queue pair, owned by the QP's thread: no lock, no allocation after
// create() (reset() after a QP error allocates fresh windows: setup path). The caller posts
// the WRs this class fills in and sets their wr_id, in the order it gets them: a `local_inv`
// from on_response() goes on the send queue before the bind of any later grant(), since unsafe
// and max may hand the same window out again at once. Destroy the policy before its PD.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "verbs/verbs.h"

namespace nvmf::memreg {

enum class KeyPolicyKind : uint8_t { global, unsafe, sagi, max, deferred };
const char* key_policy_name(KeyPolicyKind kind) noexcept;

// "No window": what global grants carry.
inline constexpr uint32_t kNoWindow = 0xFFFFFFFFu;

// The deepest queue a policy serves (a queue of at most 65536 entries).
inline constexpr uint32_t kKeyPolicyDepthMax = 65536;

struct KeyPolicyOpts {
  KeyPolicyKind kind = KeyPolicyKind::global;
  uint32_t depth = 128;  // I/Os the queue may have outstanding at once (1..65536)

  // {"kind":"max","depth":128}
  std::string to_json() const;
};

struct KeyPolicyStats {
  uint64_t binds = 0;
  uint64_t fenced_binds = 0;
  uint64_t local_invalidates = 0;
  uint64_t signaled_local_invalidates = 0;
  uint64_t remote_invalidates = 0;  // responses that invalidated the window themselves
  uint64_t busy = 0;                // grants refused: no free window
  uint64_t protocol_errors = 0;     // a remote invalidation of another key
};

class KeyPolicy {
 public:
  // Window policies allocate their pool here: depth windows (2 x depth for deferred).
  // Errors: invalid_argument for a depth outside 1..65536 or an unknown kind; not_supported
  // when the device has no type-2 windows (caps().memory_window_type2) and the policy needs
  // them; what allocate_window() answers (nothing is kept then). Setup path, any thread.
  static Result<std::unique_ptr<KeyPolicy>> create(verbs::ProtectionDomain& pd,
                                                   const verbs::DeviceCaps& caps,
                                                   const KeyPolicyOpts& opts) noexcept;
  // Whether create() can build `kind` on a device with `caps` at all: global everywhere, the
  // window policies where the device has type-2 windows. Any thread.
  static bool supported(KeyPolicyKind kind, const verbs::DeviceCaps& caps) noexcept;
  ~KeyPolicy();
  KeyPolicy(const KeyPolicy&) = delete;
  KeyPolicy& operator=(const KeyPolicy&) = delete;

  KeyPolicyKind kind() const noexcept { return opts_.kind; }
  bool per_io_keys() const noexcept { return opts_.kind != KeyPolicyKind::global; }

  // The key for [addr, addr + length) of `mr` (a MemoryMap chunk's MR in this PD). `access`:
  // kAccessRemoteWrite for a read (the target writes), kAccessRemoteRead for a write.
  struct Grant {
    uint32_t rkey = 0;
    bool invalidate = false;  // keyed SGL subtype INVALIDATE (window policies)
    bool has_bind = false;    // post `bind` before the command's SEND
    verbs::SendWr bind{};     // BIND_MW, unsignaled; kWrFenced when the policy says so
    uint32_t window = kNoWindow;
  };
  // global: the MR's rkey, nothing to post. Window policies: takes a free window (the one freed
  // last first) and fills the bind with its next key; busy when none is free (the caller
  // answers busy). invalid_argument, taking no window: a range outside `mr`, access bits other
  // than remote read/write, or (window policies) an MR without kAccessMwBind.
  Result<Grant> grant(const verbs::MemoryRegion& mr, uint64_t addr, uint32_t length,
                      uint32_t access) noexcept;

  // The response of the I/O holding `window` arrived; `remote_invalidated` and
  // `invalidated_rkey` come from its RECV completion. Once per grant: a second call for the
  // same grant, or for a window not bound, is a caller bug (asserts; in release builds it
  // counts a protocol error and posts nothing). A remote invalidation of another key (or any
  // under global) is the target's fault: protocol_error, the window stays held; the caller
  // recovers and calls on_abandoned(). Unless wait_for_local_inv is set, the I/O no longer
  // holds the window when this returns.
  struct AfterResponse {
    bool protocol_error = false;      // the target invalidated another key: start recovery
    bool post_local_inv = false;      // post `local_inv` (flags already set)
    verbs::SendWr local_inv{};
    bool wait_for_local_inv = false;  // complete the I/O only at on_local_inv_done() (sagi)
  };
  AfterResponse on_response(uint32_t window, bool remote_invalidated,
                            uint32_t invalidated_rkey) noexcept;

  // A signaled LOCAL_INV of `window` completed successfully: the window is free again. Ignored
  // for a window abandoned meanwhile; any other state is a caller bug (asserts).
  void on_local_inv_done(uint32_t window) noexcept;

  // The I/O holding `window` ends without a usable response (QP error, abort), or the
  // window's LOCAL_INV failed or was flushed: the window's state at the HCA is unknown; it
  // stays out of use until reset(). Idempotent; kNoWindow is ignored. Do not call it for an
  // I/O that no longer holds its window (see on_response): another I/O may hold it by now.
  void on_abandoned(uint32_t window) noexcept;

  // After a QP error, before the new QP is used: every window is deallocated and a fresh one
  // allocated (a bind that failed or was flushed leaves a window's key unknown), all free.
  // All old windows go first, so the device needs no room for two pools. On an allocation
  // error the windows allocated so far are free, the rest stay out of use until the next
  // reset(); the error is returned. Setup path.
  Result<void> reset() noexcept;

  // Windows free to grant now.
  uint32_t free_windows() const noexcept;
  // Windows an I/O or a signaled LOCAL_INV still holds (bound, or invalidating): while any
  // is, the HCA may still use its key, so the policy must not be destroyed (a key policy
  // switch waits for 0). Abandoned windows do not count: their WRs are all back.
  uint32_t windows_in_use() const noexcept;
  const KeyPolicyStats& stats() const noexcept { return stats_; }

 private:
  // free -> bound (grant) -> free (remote invalidation; unsafe/max LOCAL_INV) or invalidating
  // (sagi/deferred LOCAL_INV) -> free (on_local_inv_done); any -> abandoned -> free (reset).
  enum class WindowState : uint8_t {
    free,          // on the free list: may be granted
    bound,         // granted, its bind posted: waits for the I/O's response
    invalidating,  // its signaled LOCAL_INV is posted: waits for on_local_inv_done()
    abandoned,     // its key at the HCA is unknown: waits for reset()
  };
  struct Window {
    std::unique_ptr<verbs::MemoryWindow> mw;
    WindowState state = WindowState::free;
    bool fence_next_bind = false;  // max: an unsignaled LOCAL_INV of it may not have landed
    uint32_t rkey = 0;             // the key of the current bind
  };
  KeyPolicy(verbs::ProtectionDomain& pd, const KeyPolicyOpts& opts) : pd_(pd), opts_(opts) {}
  // Deallocates every window, then allocates each anew (free, in the free list).
  Result<void> allocate_pool() noexcept;
  void release(uint32_t window) noexcept;    // -> free, back on the free list
  AfterResponse refuse_response() noexcept;  // counts a protocol error

  verbs::ProtectionDomain& pd_;
  KeyPolicyOpts opts_;
  std::vector<Window> windows_;
  std::vector<uint32_t> free_list_;  // LIFO of free window indices (capacity reserved at create)
  KeyPolicyStats stats_;
};

}  // namespace nvmf::memreg
