// KeyPolicy (key_policy.h has the table): setup (create, reset) allocates the window pool;
// grant / on_response / on_local_inv_done / on_abandoned only move window indices between the
// free list and the window states, and fill in work requests for the caller to post.
#include "memreg/key_policy.h"

#include <algorithm>
#include <cassert>
#include <cinttypes>
#include <cstdio>
#include <new>

#include "common/log.h"
#include "common/util.h"

NVMF_LOG_COMPONENT_DECLARE(memreg);

namespace nvmf::memreg {

namespace {

constexpr uint32_t kRemoteAccess = verbs::kAccessRemoteRead | verbs::kAccessRemoteWrite;

// An NVMe queue holds at most 64 Ki entries (CAP.MQES is a 0's based 16-bit field), so no
// more I/Os than that can hold a window at once.
constexpr uint32_t kDepthMax = kKeyPolicyDepthMax;

bool known_kind(KeyPolicyKind kind) noexcept {
  return static_cast<uint8_t>(kind) <= static_cast<uint8_t>(KeyPolicyKind::deferred);
}

// Windows a policy needs for `depth` I/Os.
uint32_t pool_size(const KeyPolicyOpts& opts) noexcept {
  switch (opts.kind) {
    case KeyPolicyKind::global:
      return 0;
    case KeyPolicyKind::deferred:
      // An I/O ends at its response while its window waits for the LOCAL_INV completion, so
      // up to depth windows may be invalidating while depth new I/Os hold the others.
      return 2 * opts.depth;
    case KeyPolicyKind::unsafe:
    case KeyPolicyKind::sagi:
    case KeyPolicyKind::max:
      return opts.depth;
  }
  return 0;
}

}  // namespace

const char* key_policy_name(KeyPolicyKind kind) noexcept {
  switch (kind) {
    case KeyPolicyKind::global:
      return "global";
    case KeyPolicyKind::unsafe:
      return "unsafe";
    case KeyPolicyKind::sagi:
      return "sagi";
    case KeyPolicyKind::max:
      return "max";
    case KeyPolicyKind::deferred:
      return "deferred";
  }
  return "?";
}

std::string KeyPolicyOpts::to_json() const {
  char json[64];
  snprintf(json, sizeof(json), "{\"kind\":\"%s\",\"depth\":%" PRIu32 "}", key_policy_name(kind),
           depth);
  return json;
}

// ---------------------------------------------------------------------------------------
// Setup

Result<std::unique_ptr<KeyPolicy>> KeyPolicy::create(verbs::ProtectionDomain& pd,
                                                     const verbs::DeviceCaps& caps,
                                                     const KeyPolicyOpts& opts) noexcept {
  if (!known_kind(opts.kind)) {
    NVMF_ERRLOG(memreg, "key policy: unknown kind %u", static_cast<unsigned>(opts.kind));
    return Unexpected(Errc::invalid_argument, "key policy: unknown kind");
  }
  if (opts.depth == 0 || opts.depth > kDepthMax) {
    NVMF_ERRLOG(memreg, "key policy %s: depth %" PRIu32 " out of range 1..%" PRIu32,
                key_policy_name(opts.kind), opts.depth, kDepthMax);
    return Unexpected(Errc::invalid_argument, "key policy: depth out of range");
  }
  const uint32_t windows = pool_size(opts);
  if (!supported(opts.kind, caps)) {
    NVMF_ERRLOG(memreg,
                "%s: memreg policy %s needs type-2 memory windows, which the device lacks; "
                "use memreg policy global",
                caps.name.c_str(), key_policy_name(opts.kind));
    return Unexpected(Errc::not_supported, "key policy: no type-2 memory windows");
  }
  std::unique_ptr<KeyPolicy> policy(new (std::nothrow) KeyPolicy(pd, opts));  // setup-path
  if (policy == nullptr) return Unexpected(Errc::no_memory, "key policy");
  try {
    policy->windows_.resize(windows);     // setup-path
    policy->free_list_.reserve(windows);  // setup-path: never grows after this
  } catch (const std::bad_alloc&) {
    NVMF_ERRLOG(memreg, "key policy %s: out of memory for %" PRIu32 " windows",
                key_policy_name(opts.kind), windows);
    return Unexpected(Errc::no_memory, "key policy: window table");
  }
  auto allocated = policy->allocate_pool();
  if (!allocated) {
    NVMF_ERRLOG(memreg,
                "%s: memreg policy %s: allocating %" PRIu32 " memory windows (depth %" PRIu32
                ") failed (device max_mw %" PRIu32 ")",
                caps.name.c_str(), key_policy_name(opts.kind), windows, opts.depth, caps.max_mw);
    return Unexpected(allocated.error());
  }
  NVMF_DEBUGLOG(memreg, "key policy %s: depth %" PRIu32 ", %" PRIu32 " windows",
                key_policy_name(opts.kind), opts.depth, windows);
  return policy;
}

bool KeyPolicy::supported(KeyPolicyKind kind, const verbs::DeviceCaps& caps) noexcept {
  return kind == KeyPolicyKind::global || caps.memory_window_type2;
}

KeyPolicy::~KeyPolicy() = default;

Result<void> KeyPolicy::allocate_pool() noexcept {
  free_list_.clear();
  // Every old window goes before the first new one: the device needs room for one pool only.
  for (Window& window : windows_) {
    window.mw.reset();
    window.state = WindowState::abandoned;
    window.fence_next_bind = false;
    window.rkey = 0;
  }
  Result<void> result;
  for (Window& window : windows_) {
    auto mw = pd_.allocate_window();
    if (!mw) {
      result = Unexpected(mw.error());  // the rest stay abandoned, without a window
      break;
    }
    window.mw = std::move(*mw);
    window.state = WindowState::free;
  }
  // Highest index at the bottom of the LIFO: the first grants take windows 0, 1, 2, ...
  for (auto index = static_cast<uint32_t>(windows_.size()); index > 0; --index) {
    if (windows_[index - 1].state == WindowState::free) free_list_.push_back(index - 1);
  }
  return result;
}

Result<void> KeyPolicy::reset() noexcept {
  auto allocated = allocate_pool();
  if (!allocated) {
    NVMF_ERRLOG(memreg, "key policy %s: reset: only %zu of %zu memory windows allocated",
                key_policy_name(opts_.kind), free_list_.size(), windows_.size());
  }
  return allocated;
}

// ---------------------------------------------------------------------------------------
// Data path

Result<KeyPolicy::Grant> KeyPolicy::grant(const verbs::MemoryRegion& mr, uint64_t addr,
                                          uint32_t length, uint32_t access) noexcept {
  const auto mr_begin = reinterpret_cast<uint64_t>(mr.addr());
  if (addr < mr_begin || !range_within(addr - mr_begin, length, mr.length())) {
    return Unexpected(Errc::invalid_argument, "grant: range outside the MR");
  }
  if ((access & ~kRemoteAccess) != 0) {
    return Unexpected(Errc::invalid_argument, "grant: access other than remote read/write");
  }
  Grant grant;
  if (!per_io_keys()) {
    grant.rkey = mr.rkey();
    return grant;
  }
  if ((mr.access() & verbs::kAccessMwBind) == 0) {
    return Unexpected(Errc::invalid_argument, "grant: MR registered without kAccessMwBind");
  }
  if (free_list_.empty()) {
    ++stats_.busy;
    return Unexpected(Errc::busy, "grant: no free memory window");
  }
  const uint32_t index = free_list_.back();
  free_list_.pop_back();
  Window& window = windows_[index];
  assert(window.state == WindowState::free && window.mw != nullptr);

  // The key goes in the command now; the window's rkey() follows when the bind is posted.
  const uint32_t key = window.mw->next_rkey();
  verbs::SendWr& bind = grant.bind;
  bind.opcode = verbs::WrOpcode::bind_mw;
  bind.flags = 0;  // unsignaled: the SEND behind it is signaled and retires it
  if (window.fence_next_bind) {
    // max: this window's unsignaled LOCAL_INV may still be landing; the fence makes the bind
    // wait for it only where IBV_SEND_FENCE orders key updates (IBTA promises only prior
    // READs; whether mlx5 orders key updates is undocumented: memreg-2017-race.md, section 6).
    bind.flags |= verbs::kWrFenced;
    window.fence_next_bind = false;
    ++stats_.fenced_binds;
  }
  bind.bind.mw = window.mw.get();
  bind.bind.mr = &mr;
  bind.bind.addr = addr;
  bind.bind.length = length;
  bind.bind.access = access;
  bind.bind.rkey = key;
  window.state = WindowState::bound;
  window.rkey = key;
  ++stats_.binds;

  grant.rkey = key;
  grant.invalidate = true;
  grant.has_bind = true;
  grant.window = index;
  return grant;
}

KeyPolicy::AfterResponse KeyPolicy::refuse_response() noexcept {
  ++stats_.protocol_errors;
  AfterResponse after;
  after.protocol_error = true;
  return after;
}

void KeyPolicy::release(uint32_t index) noexcept {
  windows_[index].state = WindowState::free;
  free_list_.push_back(index);  // capacity reserved at create: no allocation
}

KeyPolicy::AfterResponse KeyPolicy::on_response(uint32_t index, bool remote_invalidated,
                                                uint32_t invalidated_rkey) noexcept {
  if (!per_io_keys()) {
    assert(index == kNoWindow && "global grants carry no window");
    if (remote_invalidated) {
      // We asked for no invalidation: the target invalidated a key we never offered for it.
      NVMF_ERRLOG(memreg, "response invalidated rkey 0x%" PRIx32 " although none was offered",
                  invalidated_rkey);
      return refuse_response();
    }
    return {};
  }
  if (index >= windows_.size() || windows_[index].state != WindowState::bound) {
    assert(false && "on_response: window not bound (a second response for one grant?)");
    return refuse_response();
  }
  Window& window = windows_[index];
  if (remote_invalidated) {
    if (invalidated_rkey != window.rkey) {
      // The target invalidated some other key (maybe another I/O's window): the window stays
      // bound until the caller's recovery abandons it.
      NVMF_ERRLOG(memreg,
                  "response invalidated rkey 0x%" PRIx32 ", but window %" PRIu32
                  " holds 0x%" PRIx32,
                  invalidated_rkey, index, window.rkey);
      return refuse_response();
    }
    // SEND_WITH_INVALIDATE: invalidated before the RECV completed, so free at once, and the
    // one invalidation this bind gets: no LOCAL_INV (a second one crashes rxe kernels).
    ++stats_.remote_invalidates;
    release(index);
    return {};
  }

  AfterResponse after;
  after.post_local_inv = true;
  after.local_inv.opcode = verbs::WrOpcode::local_inv;
  after.local_inv.invalidate_rkey = window.rkey;
  ++stats_.local_invalidates;
  switch (opts_.kind) {
    case KeyPolicyKind::unsafe:
      // The 2017 host: the window is free before its unsignaled LOCAL_INV has landed.
      after.local_inv.flags = 0;
      release(index);
      break;
    case KeyPolicyKind::max:
      // Free at once too, but its next bind waits (fenced) for the LOCAL_INV to land.
      after.local_inv.flags = 0;
      window.fence_next_bind = true;
      release(index);
      break;
    case KeyPolicyKind::sagi:
      // The I/O completes, and the window comes back, only at the LOCAL_INV's completion.
      after.local_inv.flags = verbs::kWrSignaled;
      after.wait_for_local_inv = true;
      window.state = WindowState::invalidating;
      ++stats_.signaled_local_invalidates;
      break;
    case KeyPolicyKind::deferred:
      // The I/O completes now; the window comes back at the LOCAL_INV's completion.
      after.local_inv.flags = verbs::kWrSignaled;
      window.state = WindowState::invalidating;
      ++stats_.signaled_local_invalidates;
      break;
    case KeyPolicyKind::global:
      break;  // handled above
  }
  return after;
}

void KeyPolicy::on_local_inv_done(uint32_t index) noexcept {
  if (index >= windows_.size()) {
    assert(false && "on_local_inv_done: no such window");
    return;
  }
  Window& window = windows_[index];
  if (window.state == WindowState::abandoned) return;  // stays out until reset()
  if (window.state != WindowState::invalidating) {
    assert(false && "on_local_inv_done: no signaled LOCAL_INV of this window outstanding");
    return;
  }
  release(index);
}

void KeyPolicy::on_abandoned(uint32_t index) noexcept {
  if (index == kNoWindow) return;
  if (index >= windows_.size()) {
    assert(false && "on_abandoned: no such window");
    return;
  }
  Window& window = windows_[index];
  if (window.state == WindowState::free) {
    // E.g. its unsignaled LOCAL_INV (unsafe, max) was flushed: off the free list.
    auto position = std::find(free_list_.begin(), free_list_.end(), index);
    if (position != free_list_.end()) free_list_.erase(position);
  }
  window.state = WindowState::abandoned;
  window.fence_next_bind = false;
}

uint32_t KeyPolicy::free_windows() const noexcept {
  return static_cast<uint32_t>(free_list_.size());
}

uint32_t KeyPolicy::windows_in_use() const noexcept {
  uint32_t in_use = 0;
  for (const Window& window : windows_) {
    if (window.state == WindowState::bound || window.state == WindowState::invalidating) {
      ++in_use;
    }
  }
  return in_use;
}

}  // namespace nvmf::memreg
