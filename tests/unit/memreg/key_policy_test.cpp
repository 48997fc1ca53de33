// KeyPolicy in two parts.
//
// 1. Against a fake PD whose windows the test "posts" by hand: the work requests each policy
//    asks for (opcode, signaled and fenced flags, keys, the keyed SGL's INVALIDATE subtype),
//    one invalidation per bind, the key advancing per bind, busy, LIFO reuse, deferred's
//    2 x depth pool, abandon and reset, and the caller bugs that are refused.
// 2. I/O through a connected sim pair, posting exactly what the policy fills in, under every
//    hardware profile. The heart of it is the 2017 race (memreg-2017-race.md section 2):
//    under mlx5_2017 with a long mkey commit lag, `unsafe` re-binds the window whose
//    unsignaled LOCAL_INV has not landed and the bind fails with MW_BIND_ERR (status 6), while
//    `max` (fenced bind), `sagi` (waits for the signaled LOCAL_INV) and `deferred` (binds the
//    other half of its pool) go on.
#include "memreg/key_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "log_capture.h"
#include "sim_test_util.h"
#include "verbs/sim/sim.h"

namespace nvmf::memreg {
namespace {

using verbs::kAccessLocalWrite;
using verbs::kAccessMwBind;
using verbs::kAccessRemoteRead;
using verbs::kAccessRemoteWrite;
using verbs::kWrFenced;
using verbs::kWrSignaled;
using verbs::WrOpcode;
using Grant = KeyPolicy::Grant;
using AfterResponse = KeyPolicy::AfterResponse;

constexpr KeyPolicyKind kWindowKinds[] = {KeyPolicyKind::unsafe, KeyPolicyKind::sagi,
                                          KeyPolicyKind::max, KeyPolicyKind::deferred};
constexpr KeyPolicyKind kAllKinds[] = {KeyPolicyKind::global, KeyPolicyKind::unsafe,
                                       KeyPolicyKind::sagi, KeyPolicyKind::max,
                                       KeyPolicyKind::deferred};
constexpr uint32_t kMrAccess =
    kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite | kAccessMwBind;

// ---------------------------------------------------------------------------------------
// A fake PD: windows whose key changes when the test posts their bind, as a provider's
// post_send() does; counts live windows and allocations, and can refuse allocations.

class FakeWindow final : public verbs::MemoryWindow {
 public:
  FakeWindow(uint32_t rkey, int* live) : rkey_(rkey), live_(live) { ++*live_; }
  ~FakeWindow() override { --*live_; }
  uint32_t rkey() const noexcept override { return rkey_; }
  void post_bind(uint32_t key) { rkey_ = key; }

 private:
  uint32_t rkey_;
  int* live_;
};

class FakeMr final : public verbs::MemoryRegion {
 public:
  FakeMr(void* addr, size_t length, uint32_t access)
      : addr_(addr), length_(length), access_(access) {}
  void* addr() const noexcept override { return addr_; }
  size_t length() const noexcept override { return length_; }
  uint32_t lkey() const noexcept override { return 0x00012301u; }
  uint32_t rkey() const noexcept override { return 0x00045602u; }
  uint32_t access() const noexcept override { return access_; }

 private:
  void* addr_;
  size_t length_;
  uint32_t access_;
};

class FakePd final : public verbs::ProtectionDomain {
 public:
  int live_windows = 0;
  int allocations = 0;
  int allocations_left = 1 << 30;  // then allocate_window() fails with no_memory

  Result<std::unique_ptr<verbs::MemoryRegion>> register_memory(void*, size_t,
                                                               uint32_t) noexcept override {
    return Errc::not_supported;
  }
  Result<std::unique_ptr<verbs::MemoryWindow>> allocate_window() noexcept override {
    if (allocations_left == 0) return Unexpected(Errc::no_memory, "test: window refused");
    --allocations_left;
    ++allocations;
    // Key byte 0xFE: the second bind of a window wraps its key byte to 0x00.
    const uint32_t key = (next_index_++ << 8) | 0xFEu;
    return std::unique_ptr<verbs::MemoryWindow>(std::make_unique<FakeWindow>(key, &live_windows));
  }
  Result<std::unique_ptr<verbs::CompletionQueue>> create_cq(
      const verbs::CqOpts&) noexcept override {
    return Errc::not_supported;
  }
  Result<std::unique_ptr<verbs::SharedReceiveQueue>> create_srq(
      const verbs::SrqOpts&) noexcept override {
    return Errc::not_supported;
  }

 private:
  uint32_t next_index_ = 0x000A10;
};

verbs::DeviceCaps fake_caps(bool windows = true) {
  verbs::DeviceCaps caps;
  caps.name = "fake0";
  caps.max_mw = 1u << 16;
  caps.memory_window_type2 = windows;
  caps.memory_management_extensions = windows;
  return caps;
}

// A fake PD, a 64 KiB "registered" buffer and a policy over them.
struct Bench {
  explicit Bench(KeyPolicyKind kind, uint32_t depth = 1, uint32_t mr_access = kMrAccess)
      : buffer(64 * 1024), mr(buffer.data(), buffer.size(), mr_access) {
    auto created = KeyPolicy::create(pd, fake_caps(), {kind, depth});
    EXPECT_TRUE(created);
    if (created) policy = std::move(*created);
  }
  uint64_t addr(size_t offset = 0) const {
    return reinterpret_cast<uint64_t>(buffer.data()) + offset;
  }
  // Grants a read of 4 KiB at `offset` (the target writes: remote write).
  Grant grant(size_t offset = 0) {
    auto granted = policy->grant(mr, addr(offset), 4096, kAccessRemoteWrite);
    EXPECT_TRUE(granted);
    return granted ? *granted : Grant{};
  }
  // What the provider does when the caller posts the bind: the window's rkey() moves on.
  static void post(const Grant& grant) {
    if (grant.has_bind) {
      static_cast<FakeWindow*>(grant.bind.bind.mw)->post_bind(grant.bind.bind.rkey);
    }
  }
  Grant grant_and_post(size_t offset = 0) {
    Grant granted = grant(offset);
    post(granted);
    return granted;
  }

  FakePd pd;
  std::vector<uint8_t> buffer;
  FakeMr mr;
  std::unique_ptr<KeyPolicy> policy;  // after the PD: its windows go first
};

uint32_t key_after(uint32_t key) { return (key & 0xFFFFFF00u) | ((key + 1) & 0xFFu); }

// ---------------------------------------------------------------------------------------
// Names, options, creation

TEST(KeyPolicy, NamesMatchTheTableAndOptionsDumpAsJson) {
  EXPECT_STREQ(key_policy_name(KeyPolicyKind::global), "global");
  EXPECT_STREQ(key_policy_name(KeyPolicyKind::unsafe), "unsafe");
  EXPECT_STREQ(key_policy_name(KeyPolicyKind::sagi), "sagi");
  EXPECT_STREQ(key_policy_name(KeyPolicyKind::max), "max");
  EXPECT_STREQ(key_policy_name(KeyPolicyKind::deferred), "deferred");
  EXPECT_EQ(KeyPolicyOpts{}.to_json(), "{\"kind\":\"global\",\"depth\":128}");
  EXPECT_EQ((KeyPolicyOpts{KeyPolicyKind::max, 32}).to_json(), "{\"kind\":\"max\",\"depth\":32}");
}

TEST(KeyPolicy, CreateRefusesBadDepthAndUnknownKind) {
  FakePd pd;
  test::LogCapture log;
  for (uint32_t depth : {0u, 65537u}) {
    auto created = KeyPolicy::create(pd, fake_caps(), {KeyPolicyKind::unsafe, depth});
    ASSERT_FALSE(created);
    EXPECT_EQ(created.error().code, Errc::invalid_argument);
  }
  EXPECT_TRUE(log.contains("depth"));
  auto unknown = KeyPolicy::create(pd, fake_caps(), {static_cast<KeyPolicyKind>(9), 4});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, Errc::invalid_argument);
  EXPECT_EQ(pd.allocations, 0);
  EXPECT_TRUE(KeyPolicy::create(pd, fake_caps(), {KeyPolicyKind::unsafe, 65536}));
}

TEST(KeyPolicy, WindowPoliciesNeedType2WindowsAndGlobalDoesNot) {
  FakePd pd;
  test::LogCapture log;
  for (KeyPolicyKind kind : kWindowKinds) {
    SCOPED_TRACE(key_policy_name(kind));
    auto created = KeyPolicy::create(pd, fake_caps(false), {kind, 4});
    ASSERT_FALSE(created);
    EXPECT_EQ(created.error().code, Errc::not_supported);
  }
  EXPECT_TRUE(log.contains("type-2"));
  EXPECT_TRUE(log.contains("use memreg policy global"));  // names the way out
  auto global = KeyPolicy::create(pd, fake_caps(false), {KeyPolicyKind::global, 4});
  ASSERT_TRUE(global);
  EXPECT_FALSE((*global)->per_io_keys());
  EXPECT_EQ((*global)->free_windows(), 0u);
  EXPECT_EQ(pd.allocations, 0);
}

TEST(KeyPolicy, PoolIsDepthWindowsAndTwiceThatForDeferred) {
  for (KeyPolicyKind kind : kAllKinds) {
    SCOPED_TRACE(key_policy_name(kind));
    Bench bench(kind, 5);
    ASSERT_NE(bench.policy, nullptr);
    EXPECT_EQ(bench.policy->kind(), kind);
    EXPECT_EQ(bench.policy->per_io_keys(), kind != KeyPolicyKind::global);
    const int expected = kind == KeyPolicyKind::global     ? 0
                         : kind == KeyPolicyKind::deferred ? 10
                                                           : 5;
    EXPECT_EQ(bench.pd.allocations, expected);
    EXPECT_EQ(bench.pd.live_windows, expected);
    EXPECT_EQ(bench.policy->free_windows(), static_cast<uint32_t>(expected));
    bench.policy.reset();
    EXPECT_EQ(bench.pd.live_windows, 0);  // the destructor deallocates them
  }
}

TEST(KeyPolicy, SupportedSaysWhatCreateCanBuild) {
  for (KeyPolicyKind kind : kAllKinds) {
    for (bool windows : {true, false}) {
      SCOPED_TRACE(std::string(key_policy_name(kind)) + (windows ? " with" : " without") +
                   " type-2 windows");
      FakePd pd;
      test::LogCapture log;
      const bool created = static_cast<bool>(KeyPolicy::create(pd, fake_caps(windows), {kind, 2}));
      EXPECT_EQ(KeyPolicy::supported(kind, fake_caps(windows)), created);
      EXPECT_EQ(created, windows || kind == KeyPolicyKind::global);
    }
  }
}

// What a key policy switch waits for (HostQueue drains until 0): windows whose key the HCA may
// still use, because an I/O holds them or their signaled LOCAL_INV is outstanding.
TEST(KeyPolicy, WindowsInUseCountsBoundAndInvalidatingWindowsOnly) {
  Bench sagi(KeyPolicyKind::sagi, 3);
  ASSERT_NE(sagi.policy, nullptr);
  EXPECT_EQ(sagi.policy->windows_in_use(), 0u);
  const Grant first = sagi.grant_and_post();
  const Grant second = sagi.grant_and_post();
  EXPECT_EQ(sagi.policy->windows_in_use(), 2u);
  (void)sagi.policy->on_response(first.window, false, 0);  // invalidating now
  EXPECT_EQ(sagi.policy->windows_in_use(), 2u);
  sagi.policy->on_local_inv_done(first.window);
  EXPECT_EQ(sagi.policy->windows_in_use(), 1u);
  sagi.policy->on_abandoned(second.window);  // its WRs are back: nothing uses the key
  EXPECT_EQ(sagi.policy->windows_in_use(), 0u);
  const Grant third = sagi.grant_and_post();
  (void)sagi.policy->on_response(third.window, true, third.rkey);  // remote invalidation
  EXPECT_EQ(sagi.policy->windows_in_use(), 0u);

  // unsafe and max free the window at the response (their LOCAL_INV is unsignaled); deferred
  // keeps it until its signaled LOCAL_INV completes.
  for (KeyPolicyKind kind : kWindowKinds) {
    if (kind == KeyPolicyKind::sagi) continue;
    SCOPED_TRACE(key_policy_name(kind));
    Bench bench(kind, 2);
    ASSERT_NE(bench.policy, nullptr);
    const Grant granted = bench.grant_and_post();
    EXPECT_EQ(bench.policy->windows_in_use(), 1u);
    (void)bench.policy->on_response(granted.window, false, 0);
    const bool deferred = kind == KeyPolicyKind::deferred;
    EXPECT_EQ(bench.policy->windows_in_use(), deferred ? 1u : 0u);
    if (deferred) bench.policy->on_local_inv_done(granted.window);
    EXPECT_EQ(bench.policy->windows_in_use(), 0u);
  }
  Bench global(KeyPolicyKind::global, 2);
  ASSERT_NE(global.policy, nullptr);
  (void)global.grant();
  EXPECT_EQ(global.policy->windows_in_use(), 0u);
}

TEST(KeyPolicy, FailedWindowAllocationKeepsNothing) {
  FakePd pd;
  pd.allocations_left = 2;
  test::LogCapture log;
  auto created = KeyPolicy::create(pd, fake_caps(), {KeyPolicyKind::max, 4});
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, Errc::no_memory);
  EXPECT_EQ(pd.live_windows, 0);
  EXPECT_TRUE(log.contains("depth 4"));
}

// ---------------------------------------------------------------------------------------
// global

TEST(KeyPolicy, GlobalGrantsTheMrKeyAndPostsNothing) {
  Bench bench(KeyPolicyKind::global, 2);
  ASSERT_NE(bench.policy, nullptr);
  for (uint32_t access : {kAccessRemoteWrite, kAccessRemoteRead}) {
    auto granted = bench.policy->grant(bench.mr, bench.addr(4096), 8192, access);
    ASSERT_TRUE(granted);
    EXPECT_EQ(granted->rkey, bench.mr.rkey());
    EXPECT_FALSE(granted->invalidate);  // keyed SGL subtype ADDRESS
    EXPECT_FALSE(granted->has_bind);
    EXPECT_EQ(granted->window, kNoWindow);
  }
  // More I/Os than the depth: nothing is held, so nothing is ever busy.
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(bench.policy->grant(bench.mr, bench.addr(), 1, 0));
  const AfterResponse after = bench.policy->on_response(kNoWindow, false, 0);
  EXPECT_FALSE(after.protocol_error);
  EXPECT_FALSE(after.post_local_inv);
  EXPECT_FALSE(after.wait_for_local_inv);
  EXPECT_EQ(bench.policy->stats().binds, 0u);
  EXPECT_EQ(bench.policy->stats().busy, 0u);
  EXPECT_TRUE(bench.policy->reset());  // nothing to do
  bench.policy->on_abandoned(kNoWindow);
}

TEST(KeyPolicy, GlobalResponseWithARemoteInvalidationIsAProtocolError) {
  Bench bench(KeyPolicyKind::global);
  ASSERT_NE(bench.policy, nullptr);
  test::LogCapture log;
  const AfterResponse after = bench.policy->on_response(kNoWindow, true, bench.mr.rkey());
  EXPECT_TRUE(after.protocol_error);
  EXPECT_FALSE(after.post_local_inv);
  EXPECT_EQ(bench.policy->stats().protocol_errors, 1u);
  EXPECT_TRUE(log.contains("none was offered"));
}

// ---------------------------------------------------------------------------------------
// The bind every window policy asks for

TEST(KeyPolicy, GrantFillsAnUnsignaledBindWithTheWindowsNextKey) {
  for (KeyPolicyKind kind : kWindowKinds) {
    SCOPED_TRACE(key_policy_name(kind));
    Bench bench(kind, 2);
    ASSERT_NE(bench.policy, nullptr);
    const uint32_t pool = bench.policy->free_windows();
    auto granted = bench.policy->grant(bench.mr, bench.addr(8192), 12288, kAccessRemoteRead);
    ASSERT_TRUE(granted);
    const Grant& grant = *granted;
    EXPECT_TRUE(grant.has_bind);
    EXPECT_TRUE(grant.invalidate);  // keyed SGL subtype INVALIDATE
    EXPECT_EQ(grant.window, 0u);    // the first grant takes window 0
    const verbs::SendWr& bind = grant.bind;
    EXPECT_EQ(bind.opcode, WrOpcode::bind_mw);
    EXPECT_EQ(bind.flags, 0u);  // unsignaled, not fenced
    ASSERT_NE(bind.bind.mw, nullptr);
    EXPECT_EQ(bind.bind.mr, &bench.mr);
    EXPECT_EQ(bind.bind.addr, bench.addr(8192));
    EXPECT_EQ(bind.bind.length, 12288u);
    EXPECT_EQ(bind.bind.access, kAccessRemoteRead);
    // The key is the window's next one, given before the bind is posted (it goes in the
    // command); the window's own rkey() moves only when the bind is posted.
    EXPECT_EQ(bind.bind.rkey, bind.bind.mw->next_rkey());
    EXPECT_EQ(grant.rkey, bind.bind.rkey);
    EXPECT_NE(grant.rkey, bind.bind.mw->rkey());
    EXPECT_NE(grant.rkey, bench.mr.rkey());
    EXPECT_EQ(bind.wr_id, 0u);  // the caller's
    EXPECT_EQ(bench.policy->free_windows(), pool - 1);
    EXPECT_EQ(bench.policy->stats().binds, 1u);
    EXPECT_EQ(bench.policy->stats().fenced_binds, 0u);
    // A second grant takes another window.
    const Grant second = bench.grant();
    EXPECT_EQ(second.window, 1u);
    EXPECT_NE(second.bind.bind.mw, bind.bind.mw);
    EXPECT_NE(second.rkey >> 8, grant.rkey >> 8);
  }
}

TEST(KeyPolicy, GrantRefusesBadArgumentsWithoutTakingAWindow) {
  for (KeyPolicyKind kind : kAllKinds) {
    SCOPED_TRACE(key_policy_name(kind));
    Bench bench(kind, 1);
    ASSERT_NE(bench.policy, nullptr);
    const uint32_t pool = bench.policy->free_windows();
    const uint64_t size = bench.buffer.size();
    struct Case {
      uint64_t addr;
      uint32_t length;
      uint32_t access;
    };
    const Case cases[] = {
        {bench.addr() - 1, 16, kAccessRemoteWrite},              // starts before the MR
        {bench.addr(size - 8), 16, kAccessRemoteWrite},          // runs past its end
        {bench.addr(), UINT32_MAX, kAccessRemoteWrite},          // far past its end
        {bench.addr(), 16, kAccessRemoteWrite | kAccessMwBind},  // not a remote right
        {bench.addr(), 16, kAccessLocalWrite},
    };
    for (const Case& c : cases) {
      auto granted = bench.policy->grant(bench.mr, c.addr, c.length, c.access);
      ASSERT_FALSE(granted);
      EXPECT_EQ(granted.error().code, Errc::invalid_argument);
    }
    EXPECT_TRUE(bench.policy->grant(bench.mr, bench.addr(size - 16), 16, kAccessRemoteWrite));
    EXPECT_EQ(bench.policy->free_windows(), pool == 0 ? 0u : pool - 1);
    EXPECT_EQ(bench.policy->stats().busy, 0u);
  }
  // A window can only be bound over an MR registered with the MW-bind right.
  for (KeyPolicyKind kind : kAllKinds) {
    Bench bench(kind, 1, kAccessLocalWrite | kAccessRemoteWrite);
    ASSERT_NE(bench.policy, nullptr);
    auto granted = bench.policy->grant(bench.mr, bench.addr(), 16, kAccessRemoteWrite);
    EXPECT_EQ(static_cast<bool>(granted), kind == KeyPolicyKind::global);
    if (!granted) {
      EXPECT_EQ(granted.error().code, Errc::invalid_argument);
    }
  }
}

// ---------------------------------------------------------------------------------------
// What each policy does at the response (the table's columns)

TEST(KeyPolicy, UnsafePostsAnUnsignaledLocalInvAndReusesTheWindowAtOnce) {
  Bench bench(KeyPolicyKind::unsafe, 1);
  ASSERT_NE(bench.policy, nullptr);
  const Grant first = bench.grant_and_post();
  const AfterResponse after = bench.policy->on_response(first.window, false, 0);
  EXPECT_FALSE(after.protocol_error);
  ASSERT_TRUE(after.post_local_inv);
  EXPECT_EQ(after.local_inv.opcode, WrOpcode::local_inv);
  EXPECT_EQ(after.local_inv.invalidate_rkey, first.rkey);
  EXPECT_EQ(after.local_inv.flags, 0u);  // unsignaled
  EXPECT_FALSE(after.wait_for_local_inv);
  // Free before the LOCAL_INV is even posted: the 2017 host's tag reuse.
  EXPECT_EQ(bench.policy->free_windows(), 1u);
  const Grant second = bench.grant_and_post();
  EXPECT_EQ(second.window, first.window);
  EXPECT_EQ(second.bind.bind.mw, first.bind.bind.mw);
  EXPECT_EQ(second.rkey, key_after(first.rkey));
  EXPECT_EQ(second.bind.flags, 0u);  // no fence: the race
  const KeyPolicyStats& stats = bench.policy->stats();
  EXPECT_EQ(stats.binds, 2u);
  EXPECT_EQ(stats.fenced_binds, 0u);
  EXPECT_EQ(stats.local_invalidates, 1u);
  EXPECT_EQ(stats.signaled_local_invalidates, 0u);
}

TEST(KeyPolicy, MaxPostsAnUnsignaledLocalInvAndFencesThatWindowsNextBind) {
  Bench bench(KeyPolicyKind::max, 2);
  ASSERT_NE(bench.policy, nullptr);
  const Grant a = bench.grant_and_post(0);
  const Grant b = bench.grant_and_post(4096);
  ASSERT_EQ(a.window, 0u);
  ASSERT_EQ(b.window, 1u);
  // a: the host invalidates (unsignaled); b: the target did.
  const AfterResponse after_a = bench.policy->on_response(a.window, false, 0);
  ASSERT_TRUE(after_a.post_local_inv);
  EXPECT_EQ(after_a.local_inv.opcode, WrOpcode::local_inv);
  EXPECT_EQ(after_a.local_inv.invalidate_rkey, a.rkey);
  EXPECT_EQ(after_a.local_inv.flags, 0u);
  EXPECT_FALSE(after_a.wait_for_local_inv);
  EXPECT_EQ(bench.policy->free_windows(), 1u);  // free at once, like unsafe
  const AfterResponse after_b = bench.policy->on_response(b.window, true, b.rkey);
  EXPECT_FALSE(after_b.post_local_inv);
  // LIFO: b's window (freed last) first, not fenced: SEND_WITH_INV took effect before the RECV.
  const Grant c = bench.grant_and_post();
  EXPECT_EQ(c.window, b.window);
  EXPECT_EQ(c.bind.flags, 0u);
  // Then a's window: fenced, since its unsignaled LOCAL_INV may not have landed.
  const Grant d = bench.grant_and_post();
  EXPECT_EQ(d.window, a.window);
  EXPECT_EQ(d.bind.flags, kWrFenced);
  EXPECT_EQ(d.rkey, key_after(a.rkey));
  EXPECT_EQ(bench.policy->stats().fenced_binds, 1u);
  // Only the first bind after that LOCAL_INV: remote invalidation next, then no fence.
  EXPECT_FALSE(bench.policy->on_response(d.window, true, d.rkey).post_local_inv);
  const Grant e = bench.grant_and_post();
  EXPECT_EQ(e.window, a.window);
  EXPECT_EQ(e.bind.flags, 0u);
  EXPECT_EQ(bench.policy->stats().fenced_binds, 1u);
  EXPECT_EQ(bench.policy->stats().local_invalidates, 1u);
  EXPECT_EQ(bench.policy->stats().signaled_local_invalidates, 0u);
}

TEST(KeyPolicy, SagiSignalsTheLocalInvAndTheWindowWaitsForItsCompletion) {
  Bench bench(KeyPolicyKind::sagi, 1);
  ASSERT_NE(bench.policy, nullptr);
  const Grant first = bench.grant_and_post();
  const AfterResponse after = bench.policy->on_response(first.window, false, 0);
  ASSERT_TRUE(after.post_local_inv);
  EXPECT_EQ(after.local_inv.opcode, WrOpcode::local_inv);
  EXPECT_EQ(after.local_inv.invalidate_rkey, first.rkey);
  EXPECT_EQ(after.local_inv.flags, kWrSignaled);
  EXPECT_TRUE(after.wait_for_local_inv);  // the I/O completes at the LOCAL_INV completion
  // Not free until then: at depth 1 the next I/O is busy.
  EXPECT_EQ(bench.policy->free_windows(), 0u);
  auto busy = bench.policy->grant(bench.mr, bench.addr(), 4096, kAccessRemoteWrite);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, Errc::busy);
  bench.policy->on_local_inv_done(first.window);
  EXPECT_EQ(bench.policy->free_windows(), 1u);
  const Grant second = bench.grant_and_post();
  EXPECT_EQ(second.window, first.window);
  EXPECT_EQ(second.rkey, key_after(first.rkey));
  EXPECT_EQ(second.bind.flags, 0u);  // the completion was the wait: no fence needed
  const KeyPolicyStats& stats = bench.policy->stats();
  EXPECT_EQ(stats.local_invalidates, 1u);
  EXPECT_EQ(stats.signaled_local_invalidates, 1u);
  EXPECT_EQ(stats.fenced_binds, 0u);
  EXPECT_EQ(stats.busy, 1u);
}

TEST(KeyPolicy, DeferredSignalsTheLocalInvAndBindsTheOtherHalfOfItsPoolMeanwhile) {
  Bench bench(KeyPolicyKind::deferred, 1);
  ASSERT_NE(bench.policy, nullptr);
  ASSERT_EQ(bench.policy->free_windows(), 2u);
  const Grant first = bench.grant_and_post();
  const AfterResponse after = bench.policy->on_response(first.window, false, 0);
  ASSERT_TRUE(after.post_local_inv);
  EXPECT_EQ(after.local_inv.opcode, WrOpcode::local_inv);
  EXPECT_EQ(after.local_inv.invalidate_rkey, first.rkey);
  EXPECT_EQ(after.local_inv.flags, kWrSignaled);
  EXPECT_FALSE(after.wait_for_local_inv);  // the I/O completes at its response
  // The next I/O binds the other window, unfenced, while the LOCAL_INV is outstanding.
  const Grant second = bench.grant_and_post();
  EXPECT_NE(second.window, first.window);
  EXPECT_EQ(second.bind.flags, 0u);
  EXPECT_TRUE(bench.policy->on_response(second.window, false, 0).post_local_inv);
  // Both windows invalidating: busy, until a LOCAL_INV completes.
  EXPECT_EQ(bench.policy->free_windows(), 0u);
  auto busy = bench.policy->grant(bench.mr, bench.addr(), 4096, kAccessRemoteWrite);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, Errc::busy);
  bench.policy->on_local_inv_done(first.window);
  const Grant third = bench.grant_and_post();
  EXPECT_EQ(third.window, first.window);
  EXPECT_EQ(third.rkey, key_after(first.rkey));
  EXPECT_EQ(third.bind.flags, 0u);
  bench.policy->on_local_inv_done(second.window);
  EXPECT_EQ(bench.policy->free_windows(), 1u);
  EXPECT_EQ(bench.policy->stats().signaled_local_invalidates, 2u);
  EXPECT_EQ(bench.policy->stats().busy, 1u);
}

TEST(KeyPolicy, RemoteInvalidationOfTheBoundKeyFreesTheWindowWithoutALocalInv) {
  for (KeyPolicyKind kind : kWindowKinds) {
    SCOPED_TRACE(key_policy_name(kind));
    Bench bench(kind, 1);
    ASSERT_NE(bench.policy, nullptr);
    const uint32_t pool = bench.policy->free_windows();
    const Grant grant = bench.grant_and_post();
    const AfterResponse after = bench.policy->on_response(grant.window, true, grant.rkey);
    EXPECT_FALSE(after.protocol_error);
    EXPECT_FALSE(after.post_local_inv);  // the bind's one invalidation was the target's
    EXPECT_FALSE(after.wait_for_local_inv);
    EXPECT_EQ(bench.policy->free_windows(), pool);  // free at once, whatever the policy
    const Grant next = bench.grant_and_post();
    EXPECT_EQ(next.window, grant.window);
    EXPECT_EQ(next.bind.flags, 0u);
    const KeyPolicyStats& stats = bench.policy->stats();
    EXPECT_EQ(stats.remote_invalidates, 1u);
    EXPECT_EQ(stats.local_invalidates, 0u);
    EXPECT_EQ(stats.protocol_errors, 0u);
  }
}

TEST(KeyPolicy, RemoteInvalidationOfAnotherKeyIsAProtocolErrorAndTheWindowStaysHeld) {
  for (KeyPolicyKind kind : kWindowKinds) {
    SCOPED_TRACE(key_policy_name(kind));
    Bench bench(kind, 2);
    ASSERT_NE(bench.policy, nullptr);
    const uint32_t pool = bench.policy->free_windows();
    const Grant a = bench.grant_and_post(0);
    const Grant b = bench.grant_and_post(4096);
    test::LogCapture log;
    // The target invalidated b's key in a's response (or a key we never gave out).
    for (uint32_t wrong : {b.rkey, key_after(a.rkey)}) {
      const AfterResponse after = bench.policy->on_response(a.window, true, wrong);
      EXPECT_TRUE(after.protocol_error);
      EXPECT_FALSE(after.post_local_inv);
      EXPECT_FALSE(after.wait_for_local_inv);
    }
    EXPECT_TRUE(log.contains("holds"));
    EXPECT_EQ(bench.policy->stats().protocol_errors, 2u);
    EXPECT_EQ(bench.policy->stats().remote_invalidates, 0u);
    EXPECT_EQ(bench.policy->free_windows(), pool - 2);  // still held
    // The caller's recovery abandons it; reset() brings a fresh one.
    bench.policy->on_abandoned(a.window);
    EXPECT_EQ(bench.policy->free_windows(), pool - 2);
    ASSERT_TRUE(bench.policy->reset());
    EXPECT_EQ(bench.policy->free_windows(), pool);
  }
}

// ---------------------------------------------------------------------------------------
// Exactly one invalidation per bind: what is not bound is never invalidated

TEST(KeyPolicy, ASecondResponseForOneGrantIsRefused) {
  for (KeyPolicyKind kind : kWindowKinds) {
    SCOPED_TRACE(key_policy_name(kind));
    for (bool first_remote : {false, true}) {
      SCOPED_TRACE(first_remote ? "first response invalidated remotely" : "host invalidated");
      Bench bench(kind, 1);
      ASSERT_NE(bench.policy, nullptr);
      const Grant grant = bench.grant_and_post();
      const AfterResponse first =
          bench.policy->on_response(grant.window, first_remote, first_remote ? grant.rkey : 0);
      EXPECT_EQ(first.post_local_inv, !first_remote);
      const KeyPolicyStats before = bench.policy->stats();
      const uint32_t free_before = bench.policy->free_windows();
#ifdef NDEBUG
      // Release builds: refused and counted, and no second invalidation of the window.
      for (bool remote : {false, true}) {
        const AfterResponse again = bench.policy->on_response(grant.window, remote, grant.rkey);
        EXPECT_TRUE(again.protocol_error);
        EXPECT_FALSE(again.post_local_inv);
        EXPECT_FALSE(again.wait_for_local_inv);
      }
      EXPECT_EQ(bench.policy->stats().protocol_errors, before.protocol_errors + 2);
      EXPECT_EQ(bench.policy->stats().local_invalidates, before.local_invalidates);
      EXPECT_EQ(bench.policy->stats().remote_invalidates, before.remote_invalidates);
      EXPECT_EQ(bench.policy->free_windows(), free_before);
#else
      EXPECT_DEATH((void)bench.policy->on_response(grant.window, false, 0), "not bound");
      (void)before;
      (void)free_before;
#endif
    }
  }
}

TEST(KeyPolicy, ResponsesForWindowsNotGrantedAreRefused) {
  Bench bench(KeyPolicyKind::max, 2);
  ASSERT_NE(bench.policy, nullptr);
#ifdef NDEBUG
  // Never granted, out of range, or no window at all under a window policy.
  for (uint32_t window : {0u, 1u, 2u, kNoWindow}) {
    const AfterResponse after = bench.policy->on_response(window, false, 0);
    EXPECT_TRUE(after.protocol_error);
    EXPECT_FALSE(after.post_local_inv);
  }
  EXPECT_EQ(bench.policy->stats().protocol_errors, 4u);
  EXPECT_EQ(bench.policy->free_windows(), 2u);
#else
  EXPECT_DEATH((void)bench.policy->on_response(0, false, 0), "not bound");
  EXPECT_DEATH((void)bench.policy->on_response(kNoWindow, false, 0), "not bound");
#endif
}

TEST(KeyPolicy, LocalInvDoneOnlyForAnOutstandingSignaledLocalInv) {
  Bench bench(KeyPolicyKind::deferred, 1);
  ASSERT_NE(bench.policy, nullptr);
  const Grant grant = bench.grant_and_post();
#ifdef NDEBUG
  bench.policy->on_local_inv_done(grant.window);  // bound, not invalidating: ignored
  bench.policy->on_local_inv_done(1);             // free: ignored
  bench.policy->on_local_inv_done(7);             // no such window
  EXPECT_EQ(bench.policy->free_windows(), 1u);
  // The window is still bound: its response still gets its one LOCAL_INV.
  EXPECT_TRUE(bench.policy->on_response(grant.window, false, 0).post_local_inv);
  bench.policy->on_local_inv_done(grant.window);
  EXPECT_EQ(bench.policy->free_windows(), 2u);
  bench.policy->on_local_inv_done(grant.window);  // twice: ignored
  EXPECT_EQ(bench.policy->free_windows(), 2u);
#else
  EXPECT_DEATH(bench.policy->on_local_inv_done(grant.window), "no signaled LOCAL_INV");
#endif
}

// ---------------------------------------------------------------------------------------
// Keys, busy, reuse order

TEST(KeyPolicy, EachBindAdvancesTheWindowsKeyByOneAndKeepsItsIndex) {
  Bench bench(KeyPolicyKind::unsafe, 1);
  ASSERT_NE(bench.policy, nullptr);
  Grant previous = bench.grant_and_post();
  const uint32_t index = previous.rkey >> 8;
  EXPECT_EQ(previous.rkey & 0xFFu, 0xFFu);  // the fake window starts at key byte 0xFE
  bool wrapped = false;
  // Twice around the 8-bit key; the target invalidates every third I/O itself.
  for (int io = 1; io < 600; ++io) {
    const bool remote = io % 3 == 0;
    const AfterResponse after =
        bench.policy->on_response(previous.window, remote, remote ? previous.rkey : 0);
    ASSERT_EQ(after.post_local_inv, !remote);
    const Grant next = bench.grant_and_post();
    ASSERT_EQ(next.window, previous.window);
    ASSERT_EQ(next.rkey >> 8, index);
    ASSERT_EQ(next.rkey, key_after(previous.rkey)) << io;
    wrapped = wrapped || (next.rkey & 0xFFu) == 0;
    previous = next;
  }
  EXPECT_TRUE(wrapped);
  EXPECT_EQ(bench.policy->stats().binds, 600u);
  EXPECT_EQ(bench.policy->stats().remote_invalidates + bench.policy->stats().local_invalidates,
            599u);
}

TEST(KeyPolicy, BusyWhenEveryWindowIsHeld) {
  for (KeyPolicyKind kind : kWindowKinds) {
    SCOPED_TRACE(key_policy_name(kind));
    Bench bench(kind, 3);
    ASSERT_NE(bench.policy, nullptr);
    const uint32_t pool = bench.policy->free_windows();
    std::vector<Grant> held;
    std::set<uint32_t> windows;
    for (uint32_t i = 0; i < pool; ++i) {
      held.push_back(bench.grant_and_post(i * 4096));
      windows.insert(held.back().window);
    }
    EXPECT_EQ(windows.size(), pool);  // each grant its own window
    for (int i = 0; i < 2; ++i) {
      auto busy = bench.policy->grant(bench.mr, bench.addr(), 4096, kAccessRemoteWrite);
      ASSERT_FALSE(busy);
      EXPECT_EQ(busy.error().code, Errc::busy);
    }
    EXPECT_EQ(bench.policy->stats().busy, 2u);
    EXPECT_EQ(bench.policy->stats().binds, pool);
    // A remote invalidation frees one at once, whatever the policy.
    EXPECT_FALSE(bench.policy->on_response(held[1].window, true, held[1].rkey).post_local_inv);
    const Grant again = bench.grant_and_post();
    EXPECT_EQ(again.window, held[1].window);
  }
}

TEST(KeyPolicy, FreeWindowsAreGrantedMostRecentlyFreedFirst) {
  Bench bench(KeyPolicyKind::unsafe, 3);
  ASSERT_NE(bench.policy, nullptr);
  const Grant a = bench.grant_and_post(0);
  const Grant b = bench.grant_and_post(4096);
  const Grant c = bench.grant_and_post(8192);
  EXPECT_EQ(a.window, 0u);
  EXPECT_EQ(b.window, 1u);
  EXPECT_EQ(c.window, 2u);
  EXPECT_TRUE(bench.policy->on_response(b.window, false, 0).post_local_inv);
  EXPECT_TRUE(bench.policy->on_response(a.window, false, 0).post_local_inv);
  EXPECT_EQ(bench.grant_and_post().window, a.window);
  EXPECT_EQ(bench.grant_and_post().window, b.window);
}

// ---------------------------------------------------------------------------------------
// Abandon and reset

TEST(KeyPolicy, AbandonedWindowsStayOutUntilReset) {
  Bench bench(KeyPolicyKind::deferred, 2);  // pool of 4
  ASSERT_NE(bench.policy, nullptr);
  const Grant bound = bench.grant_and_post(0);
  const Grant invalidating = bench.grant_and_post(4096);
  EXPECT_TRUE(bench.policy->on_response(invalidating.window, false, 0).post_local_inv);
  EXPECT_EQ(bench.policy->free_windows(), 2u);

  bench.policy->on_abandoned(bound.window);         // QP error while the I/O waits
  bench.policy->on_abandoned(invalidating.window);  // its LOCAL_INV was flushed
  bench.policy->on_abandoned(bound.window);         // idempotent
  bench.policy->on_abandoned(kNoWindow);            // a global-style I/O: ignored
  EXPECT_EQ(bench.policy->free_windows(), 2u);
  // A successful completion of an abandoned window's LOCAL_INV does not bring it back.
  bench.policy->on_local_inv_done(invalidating.window);
  EXPECT_EQ(bench.policy->free_windows(), 2u);
  // A free window can be abandoned too (say its unsignaled LOCAL_INV was flushed).
  bench.policy->on_abandoned(3);
  EXPECT_EQ(bench.policy->free_windows(), 1u);
  auto last = bench.policy->grant(bench.mr, bench.addr(), 4096, kAccessRemoteWrite);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->window, 2u);
  EXPECT_FALSE(bench.policy->grant(bench.mr, bench.addr(), 4096, kAccessRemoteWrite));

  ASSERT_TRUE(bench.policy->reset());
  EXPECT_EQ(bench.policy->free_windows(), 4u);
  EXPECT_EQ(bench.pd.allocations, 8);  // the pool, twice
  EXPECT_EQ(bench.pd.live_windows, 4);
  // Fresh windows with fresh indices, granted from window 0 again.
  const Grant fresh = bench.grant_and_post();
  EXPECT_EQ(fresh.window, 0u);
  EXPECT_NE(fresh.rkey >> 8, bound.rkey >> 8);
}

TEST(KeyPolicy, ResetClearsMaxsPendingFences) {
  Bench bench(KeyPolicyKind::max, 1);
  ASSERT_NE(bench.policy, nullptr);
  const Grant grant = bench.grant_and_post();
  EXPECT_TRUE(bench.policy->on_response(grant.window, false, 0).post_local_inv);
  // The QP failed before the next bind: the new QP starts from fresh windows.
  ASSERT_TRUE(bench.policy->reset());
  const Grant next = bench.grant_and_post();
  EXPECT_EQ(next.window, grant.window);
  EXPECT_EQ(next.bind.flags, 0u);
  EXPECT_EQ(bench.policy->stats().fenced_binds, 0u);
}

TEST(KeyPolicy, ResetThatCannotAllocateEveryWindowKeepsWhatItGot) {
  Bench bench(KeyPolicyKind::sagi, 4);
  ASSERT_NE(bench.policy, nullptr);
  for (int i = 0; i < 4; ++i) bench.grant_and_post(i * 4096);
  bench.pd.allocations_left = 2;
  test::LogCapture log;
  auto reset = bench.policy->reset();
  ASSERT_FALSE(reset);
  EXPECT_EQ(reset.error().code, Errc::no_memory);
  EXPECT_TRUE(log.contains("only 2 of 4"));
  EXPECT_EQ(bench.pd.live_windows, 2);  // all four old ones went first
  EXPECT_EQ(bench.policy->free_windows(), 2u);
  EXPECT_EQ(bench.grant_and_post().window, 0u);
  EXPECT_EQ(bench.grant_and_post().window, 1u);
  EXPECT_FALSE(bench.policy->grant(bench.mr, bench.addr(), 4096, kAccessRemoteWrite));
  bench.pd.allocations_left = 1 << 30;
  ASSERT_TRUE(bench.policy->reset());
  EXPECT_EQ(bench.policy->free_windows(), 4u);
  EXPECT_EQ(bench.pd.live_windows, 4);
}

// ---------------------------------------------------------------------------------------
// I/O through a connected sim pair
//
// Per I/O, as the transport does it: the host grants, posts the BIND (when there is one) and
// the command SEND behind whatever it posted before, one doorbell; the target receives the
// command, RDMA WRITEs the data with the granted key (a read) and answers with a SEND, or a
// SEND_WITH_INV of the key when the grant asks for invalidation and the test wants it; the
// host's RECV completion goes to on_response(), and the LOCAL_INV it asks for is posted but
// rung only with the next I/O's WRs (one doorbell per poll: the application resubmits from
// the completion) - the tightest interleaving, the canonical trace of the race note.

namespace simt = verbs::sim::test;
using verbs::WcOpcode;
using verbs::WcStatus;
using verbs::WorkCompletion;
using verbs::sim::KeyState;
using verbs::sim::SimProfile;

constexpr uint32_t kIoBytes = 4096;
constexpr uint32_t kMaxBatch = 8;                // I/O slots 0..7: host bytes [0, 32 KiB)
constexpr size_t kHostResponseOffset = 49152;    // host: response receives, 64 B each
constexpr size_t kHostCapsuleOffset = 60000;     // host: the command capsule it sends
constexpr uint32_t kCapsuleBytes = 64;           // a command capsule without in-capsule data
constexpr size_t kTargetDataOffset = 8192;       // target: the data it writes, per slot
constexpr size_t kTargetResponseOffset = 45056;  // target: the response it sends
constexpr uint32_t kResponseBytes = 16;          // an NVMe completion
// A lag no interleaving of one round gets near: a LOCAL_INV (signaled or not) lands, and
// completes, only after 64 more WQEs or sim calls, so a bind right behind it sees the window
// still VALID.
constexpr uint32_t kLongLagSteps = 64;

// wr_id: what completed in the top byte, the I/O slot or window below.
enum class WrKind : uint64_t {
  bind = 1,
  capsule = 2,
  local_inv = 3,
  target_write = 4,
  target_response = 5
};
uint64_t make_wr_id(WrKind kind, uint32_t index) {
  return (static_cast<uint64_t>(kind) << 56) | index;
}
WrKind wr_kind(uint64_t wr_id) { return static_cast<WrKind>(wr_id >> 56); }
uint32_t wr_index(uint64_t wr_id) { return static_cast<uint32_t>(wr_id & 0xFFFFFFFFu); }

enum class TargetInvalidates { never, always, alternate };

struct RigOpts {
  SimProfile profile = SimProfile::rxe;
  KeyPolicyKind kind = KeyPolicyKind::global;
  uint32_t depth = 1;
  uint32_t lag_steps = kLongLagSteps;
  uint64_t seed = 1;
  verbs::sim::SendFence send_fence = verbs::sim::SendFence::profile;
};

struct Io {
  uint32_t slot = 0;  // data at host offset slot * kIoBytes
  uint8_t seed = 0;   // the pattern the target writes
  Grant grant;
  bool target_invalidated = false;
  WorkCompletion response;
  AfterResponse after;
  bool data_ok = false;
};

class Rig {
 public:
  explicit Rig(const RigOpts& opts) : pair(pair_opts(opts)) {
    if (pair.host.qp == nullptr || pair.target.qp == nullptr) return;
    auto created =
        KeyPolicy::create(*pair.host.pd, pair.host.id->device()->caps(), {opts.kind, opts.depth});
    EXPECT_TRUE(created);
    if (created) policy = std::move(*created);
  }

  // Grants keys for `count` I/Os and posts each one's BIND and command SEND behind what the
  // host posted before (LOCAL_INVs of the previous round), then rings one doorbell. On busy,
  // reaps completions and retries (deferred waits for a LOCAL_INV completion that way).
  // Returns fewer I/Os than asked when a grant fails for good.
  std::vector<Io> start(uint32_t count, TargetInvalidates mode = TargetInvalidates::never) {
    std::vector<Io> ios;
    for (uint32_t slot = 0; slot < count && slot < kMaxBatch; ++slot) {
      Io io;
      io.slot = slot;
      io.seed = static_cast<uint8_t>(round_ * kMaxBatch + slot + 1);
      std::fill_n(pair.host.buffer.begin() + slot * kIoBytes, kIoBytes, uint8_t{0});
      auto granted = grant(slot);
      for (int tries = 0; !granted && granted.error().code == Errc::busy && tries < 50; ++tries) {
        EXPECT_TRUE(pair.host.qp->flush());
        reap(1);
        granted = grant(slot);
      }
      if (!granted) break;
      io.grant = *granted;
      io.target_invalidated = io.grant.invalidate && wants_invalidation(mode, slot);
      if (io.grant.has_bind) {
        verbs::SendWr bind = io.grant.bind;
        bind.wr_id = make_wr_id(WrKind::bind, slot);
        if (strip_fence) bind.flags &= ~kWrFenced;
        EXPECT_TRUE(pair.host.qp->post_send(bind));
      }
      verbs::Sge capsule = pair.host.sge(kHostCapsuleOffset, kCapsuleBytes);
      EXPECT_TRUE(pair.host.qp->post_send(
          simt::send_wr(make_wr_id(WrKind::capsule, slot), &capsule, kWrSignaled)));
      // The response's receive, and the command's at the target (rung by the flushes below).
      verbs::Sge response = pair.host.sge(kHostResponseOffset + slot * 64, 64);
      EXPECT_TRUE(pair.host.qp->post_recv({slot, &response, 1}));
      verbs::Sge command = pair.target.sge(slot * 64, 64);
      EXPECT_TRUE(pair.target.qp->post_recv({slot, &command, 1}));
      ++capsules_posted;
      ios.push_back(io);
    }
    EXPECT_TRUE(pair.target.qp->flush());
    EXPECT_TRUE(pair.host.qp->flush());
    ++round_;
    return ios;
  }

  // The target takes the commands, WRITEs each I/O's data with its key and answers. False
  // when the commands do not all arrive or a target WR fails.
  bool serve(std::vector<Io>& ios) {
    const auto commands = pair.collect(*pair.target.recv_cq, ios.size());
    if (commands.size() != ios.size()) return false;
    for (const WorkCompletion& wc : commands) {
      if (wc.status != WcStatus::success) return false;
    }
    for (Io& io : ios) {
      const size_t source = kTargetDataOffset + io.slot * kIoBytes;
      simt::fill(pair.target.buffer, source, kIoBytes, io.seed);
      verbs::Sge data = pair.target.sge(source, kIoBytes);
      EXPECT_TRUE(pair.target.qp->post_send(
          simt::rdma_wr(WrOpcode::rdma_write, make_wr_id(WrKind::target_write, io.slot), &data,
                        pair.host.addr(io.slot * kIoBytes), io.grant.rkey)));
      verbs::Sge response = pair.target.sge(kTargetResponseOffset, kResponseBytes);
      const uint64_t id = make_wr_id(WrKind::target_response, io.slot);
      EXPECT_TRUE(pair.target.qp->post_send(io.target_invalidated
                                                ? simt::send_inv_wr(id, &response, io.grant.rkey)
                                                : simt::send_wr(id, &response)));
    }
    EXPECT_TRUE(pair.target.qp->flush());
    const auto done = pair.collect(*pair.target.send_cq, 2 * ios.size());
    target_send.insert(target_send.end(), done.begin(), done.end());
    if (done.size() != 2 * ios.size()) return false;
    return simt::count_status(done, WcStatus::success) == done.size();
  }

  // The host takes the responses, checks the data and calls on_response(); the LOCAL_INVs it
  // asks for are posted, not rung. Reaps the command SENDs' completions. False on any error.
  bool finish(std::vector<Io>& ios) {
    const auto responses = pair.collect(*pair.host.recv_cq, ios.size());
    if (responses.size() != ios.size()) return false;
    for (size_t i = 0; i < ios.size(); ++i) {
      Io& io = ios[i];  // the target answered in order
      io.response = responses[i];
      if (io.response.status != WcStatus::success) return false;
      io.data_ok = simt::filled(pair.host.buffer, io.slot * kIoBytes, kIoBytes, io.seed);
      io.after = policy->on_response(io.grant.window, io.response.remote_invalidated,
                                     io.response.invalidated_rkey);
      if (io.after.post_local_inv) {
        verbs::SendWr local_inv = io.after.local_inv;
        local_inv.wr_id = make_wr_id(WrKind::local_inv, io.grant.window);
        EXPECT_TRUE(pair.host.qp->post_send(local_inv));
        if ((local_inv.flags & kWrSignaled) != 0) ++signaled_local_invs_posted;
      }
    }
    for (int poll = 0; poll < 400 && capsules_done < capsules_posted && errors.empty(); ++poll) {
      reap(1);
    }
    if (capsules_done != capsules_posted || !errors.empty()) return false;
    for (const Io& io : ios) {
      if (!io.data_ok) return false;
    }
    return true;
  }

  // Rings the doorbell and reaps until every signaled LOCAL_INV posted has completed (sagi:
  // only then do its I/Os complete).
  bool wait_local_invs() {
    EXPECT_TRUE(pair.host.qp->flush());
    for (int poll = 0; poll < 400 && local_invs_done < signaled_local_invs_posted; ++poll) {
      reap(1);
      if (!errors.empty()) return false;
    }
    return local_invs_done == signaled_local_invs_posted;
  }

  // Polls the host send CQ `polls` times: command SENDs counted, LOCAL_INV completions to
  // on_local_inv_done(), errors kept (and their windows abandoned, as the transport would).
  void reap(int polls) {
    const auto wcs = pair.collect(*pair.host.send_cq, SIZE_MAX, polls);
    for (const WorkCompletion& wc : wcs) {
      if (wc.status != WcStatus::success) {
        errors.push_back(wc);
        continue;
      }
      switch (wr_kind(wc.wr_id)) {
        case WrKind::capsule:
          ++capsules_done;
          break;
        case WrKind::local_inv:
          EXPECT_EQ(wc.opcode, WcOpcode::local_inv);
          ++local_invs_done;
          policy->on_local_inv_done(wr_index(wc.wr_id));
          break;
        default:
          ADD_FAILURE() << "unexpected success of wr_id " << wc.wr_id;
      }
    }
  }

  verbs::sim::SimCounters counters() { return pair.host_provider().counters(); }
  KeyState key_state(uint32_t key) { return pair.host_provider().key_state(key); }

  simt::SimPair pair;
  std::unique_ptr<KeyPolicy> policy;        // after the pair: its windows go before the PD
  bool strip_fence = false;                 // post binds without kWrFenced (a control experiment)
  std::vector<WorkCompletion> errors;       // host send-queue completions with an error
  std::vector<WorkCompletion> target_send;  // every target send completion
  uint32_t capsules_posted = 0;
  uint32_t capsules_done = 0;
  uint32_t signaled_local_invs_posted = 0;
  uint32_t local_invs_done = 0;

 private:
  static simt::PairOpts pair_opts(const RigOpts& opts) {
    simt::PairOpts pair;
    pair.sim.profile = opts.profile;
    pair.sim.mkey_commit_lag_steps = opts.lag_steps;
    pair.sim.seed = opts.seed;
    pair.sim.send_fence = opts.send_fence;
    return pair;
  }
  Result<Grant> grant(uint32_t slot) {
    return policy->grant(*pair.host.mr, pair.host.addr(slot * kIoBytes), kIoBytes,
                         kAccessRemoteWrite);
  }
  bool wants_invalidation(TargetInvalidates mode, uint32_t slot) const {
    switch (mode) {
      case TargetInvalidates::never:
        return false;
      case TargetInvalidates::always:
        return true;
      case TargetInvalidates::alternate:
        return (round_ + slot) % 2 == 0;
    }
    return false;
  }
  uint32_t round_ = 0;
};

// Runs `rounds` rounds of `batch` I/Os; stops at the first failure.
struct RunResult {
  uint32_t completed = 0;  // I/Os whose data arrived and whose completion rules were met
  std::vector<WorkCompletion> errors;
};

RunResult run_ios(Rig& rig, uint32_t rounds, uint32_t batch, TargetInvalidates mode) {
  RunResult result;
  for (uint32_t round = 0; round < rounds; ++round) {
    std::vector<Io> ios = rig.start(batch, mode);
    bool ok = ios.size() == batch && rig.serve(ios) && rig.finish(ios);
    if (ok && rig.policy->kind() == KeyPolicyKind::sagi) ok = rig.wait_local_invs();
    if (!ok) break;
    result.completed += batch;
  }
  rig.reap(20);  // errors and flushes still on their way
  result.errors = rig.errors;
  return result;
}

std::string describe(const std::vector<WorkCompletion>& wcs) {
  std::string text;
  for (const WorkCompletion& wc : wcs) {
    text += " [kind " + std::to_string(static_cast<int>(wr_kind(wc.wr_id))) + " index " +
            std::to_string(wr_index(wc.wr_id)) + " " + verbs::wc_status_name(wc.status) + "]";
  }
  return text;
}

// --- The race, one I/O after another, under mlx5_2017 ---------------------------------

// I/O 1 of the race: the target answers without invalidating, so the host posts its
// LOCAL_INV (not rung yet). Checks everything the policy asked for on the way.
Io first_io(Rig& rig) {
  std::vector<Io> ios = rig.start(1);
  EXPECT_EQ(ios.size(), 1u);
  if (ios.size() != 1) return {};
  EXPECT_TRUE(rig.serve(ios));
  EXPECT_TRUE(rig.finish(ios));
  const Io& io = ios[0];
  EXPECT_TRUE(io.data_ok);
  EXPECT_FALSE(io.response.remote_invalidated);
  EXPECT_EQ(rig.key_state(io.grant.rkey), KeyState::valid);  // not invalidated yet
  EXPECT_TRUE(io.after.post_local_inv);
  EXPECT_EQ(io.after.local_inv.invalidate_rkey, io.grant.rkey);
  return io;
}

TEST(KeyPolicySim, UnsafeRebindAfterAnUnsignaledLocalInvFailsWithMwBindErrorUnderMlx5_2017) {
  Rig rig({SimProfile::mlx5_2017, KeyPolicyKind::unsafe, 1, kLongLagSteps});
  ASSERT_NE(rig.policy, nullptr);
  const Io io1 = first_io(rig);
  EXPECT_EQ(io1.after.local_inv.flags, 0u);  // unsignaled
  EXPECT_FALSE(io1.after.wait_for_local_inv);
  EXPECT_EQ(rig.policy->free_windows(), 1u);  // the I/O is done, the window free

  // I/O 2 takes the same window at once: LOCAL_INV(k1), BIND(k2), SEND in one doorbell.
  std::vector<Io> ios = rig.start(1);
  ASSERT_EQ(ios.size(), 1u);
  const Io& io2 = ios[0];
  EXPECT_EQ(io2.grant.window, io1.grant.window);
  EXPECT_EQ(io2.grant.rkey, key_after(io1.grant.rkey));
  EXPECT_EQ(io2.grant.bind.flags, 0u);  // nothing holds the bind back

  // The LOCAL_INV has executed (the key is dead for remote access) but its change is not
  // visible to the bind yet: the bind fails as MEMREG did in 2017, and the QP goes to error.
  const auto wcs = rig.pair.collect(*rig.pair.host.send_cq, 2);
  ASSERT_EQ(wcs.size(), 2u) << describe(wcs);
  EXPECT_EQ(wcs[0].wr_id, make_wr_id(WrKind::bind, 0));  // unsignaled, reported all the same
  EXPECT_EQ(wcs[0].status, WcStatus::mw_bind_error);
  EXPECT_EQ(static_cast<int>(wcs[0].status), 6);
  EXPECT_EQ(wcs[1].wr_id, make_wr_id(WrKind::capsule, 0));
  EXPECT_EQ(wcs[1].status, WcStatus::wr_flush_error);
  EXPECT_EQ(rig.pair.host.qp->state(), verbs::QpState::error);
  EXPECT_EQ(rig.key_state(io1.grant.rkey), KeyState::free);                // k1 was invalidated ...
  EXPECT_EQ(rig.key_state(io2.grant.rkey), KeyState::unknown);             // ... k2 never bound
  EXPECT_TRUE(rig.pair.collect(*rig.pair.target.recv_cq, 1, 20).empty());  // no command 2
  const auto counters = rig.counters();
  EXPECT_EQ(counters.error_completions, 1u);  // the bind; the rest are flushes
  EXPECT_EQ(counters.qp_errors, 1u);
  EXPECT_EQ(counters.local_inv, 1u);
  EXPECT_EQ(counters.bind_mw, 2u);
}

TEST(KeyPolicySim, MaxFencesTheRebindAndItSucceedsUnderMlx5_2017) {
  for (bool strip_fence : {false, true}) {
    SCOPED_TRACE(strip_fence ? "control: the fence stripped from the bind" : "max as is");
    Rig rig({SimProfile::mlx5_2017, KeyPolicyKind::max, 1, kLongLagSteps});
    ASSERT_NE(rig.policy, nullptr);
    rig.strip_fence = strip_fence;
    const Io io1 = first_io(rig);
    EXPECT_EQ(io1.after.local_inv.flags, 0u);  // unsignaled, as unsafe
    EXPECT_FALSE(io1.after.wait_for_local_inv);
    EXPECT_EQ(rig.policy->free_windows(), 1u);

    std::vector<Io> ios = rig.start(1);
    ASSERT_EQ(ios.size(), 1u);
    EXPECT_EQ(ios[0].grant.window, io1.grant.window);
    EXPECT_EQ(ios[0].grant.rkey, key_after(io1.grant.rkey));
    EXPECT_EQ(ios[0].grant.bind.flags, kWrFenced);
    EXPECT_EQ(rig.policy->stats().fenced_binds, 1u);
    if (strip_fence) {
      // Without the fence max is unsafe: the fence is what makes the difference.
      const auto wcs = rig.pair.collect(*rig.pair.host.send_cq, 2);
      ASSERT_EQ(wcs.size(), 2u) << describe(wcs);
      EXPECT_EQ(wcs[0].wr_id, make_wr_id(WrKind::bind, 0));
      EXPECT_EQ(wcs[0].status, WcStatus::mw_bind_error);
      EXPECT_EQ(wcs[1].status, WcStatus::wr_flush_error);
      continue;
    }
    // The fenced bind waits until the LOCAL_INV has landed, then binds k2 over the buffer.
    ASSERT_TRUE(rig.serve(ios)) << describe(rig.target_send);
    ASSERT_TRUE(rig.finish(ios)) << describe(rig.errors);
    EXPECT_TRUE(ios[0].data_ok);
    EXPECT_EQ(rig.pair.host.qp->state(), verbs::QpState::ready_to_send);
    EXPECT_EQ(rig.key_state(ios[0].grant.rkey), KeyState::valid);
    ASSERT_TRUE(rig.pair.host.qp->flush());  // ring I/O 2's own LOCAL_INV
    EXPECT_EQ(rig.key_state(ios[0].grant.rkey), KeyState::free);
    EXPECT_TRUE(rig.errors.empty()) << describe(rig.errors);
    EXPECT_EQ(rig.counters().error_completions, 0u);
  }
}

// Whether mlx5's IBV_SEND_FENCE orders key updates is not documented (memreg-2017-race.md
// section 3): max is safe where it does and races like unsafe where it is only the IBTA fence
// (prior RDMA READs). Before the issue-13 hazard model the sim's FENCE always waited for key
// changes on the mlx5 profiles, so the `reads` case passed and its ASSERT_EQ(wcs.size(), 2u)
// failed (the bind succeeded, no error completion).
TEST(KeyPolicySim, MaxIsSafeUnderMlx5_2017OnlyWhereTheFenceOrdersKeyUpdates) {
  using verbs::sim::SendFence;
  for (SendFence fence : {SendFence::reads, SendFence::key_updates}) {
    SCOPED_TRACE(verbs::sim::send_fence_name(fence));
    Rig rig({SimProfile::mlx5_2017, KeyPolicyKind::max, 1, kLongLagSteps, 1, fence});
    ASSERT_NE(rig.policy, nullptr);
    const Io io1 = first_io(rig);
    EXPECT_EQ(io1.after.local_inv.flags, 0u);
    std::vector<Io> ios = rig.start(1);
    ASSERT_EQ(ios.size(), 1u);
    EXPECT_EQ(ios[0].grant.window, io1.grant.window);
    EXPECT_EQ(ios[0].grant.bind.flags, kWrFenced);  // max asks for the fence either way
    if (fence == SendFence::reads) {
      const auto wcs = rig.pair.collect(*rig.pair.host.send_cq, 2);
      ASSERT_EQ(wcs.size(), 2u) << describe(wcs);
      EXPECT_EQ(wcs[0].wr_id, make_wr_id(WrKind::bind, 0));
      EXPECT_EQ(wcs[0].status, WcStatus::mw_bind_error);
      EXPECT_EQ(static_cast<int>(wcs[0].status), 6);
      EXPECT_EQ(wcs[1].status, WcStatus::wr_flush_error);
      EXPECT_EQ(rig.pair.host.qp->state(), verbs::QpState::error);
      continue;
    }
    ASSERT_TRUE(rig.serve(ios)) << describe(rig.target_send);
    ASSERT_TRUE(rig.finish(ios)) << describe(rig.errors);
    EXPECT_TRUE(ios[0].data_ok);
    EXPECT_EQ(rig.pair.host.qp->state(), verbs::QpState::ready_to_send);
    EXPECT_EQ(rig.counters().error_completions, 0u);
  }
}

// sagi is safe because it waits for the LOCAL_INV's completion, which comes only once the key
// change has landed (the commit lag applies signaled or not): the next bind sees FREE.
TEST(KeyPolicySim, SagiRebindsOnlyAfterTheSignaledLocalInvCompletedUnderMlx5_2017) {
  Rig rig({SimProfile::mlx5_2017, KeyPolicyKind::sagi, 1, kLongLagSteps});
  ASSERT_NE(rig.policy, nullptr);
  const Io io1 = first_io(rig);
  EXPECT_EQ(io1.after.local_inv.flags, kWrSignaled);
  EXPECT_TRUE(io1.after.wait_for_local_inv);
  // I/O 1 is not complete and holds its window: at depth 1 a new I/O is busy.
  EXPECT_EQ(rig.policy->free_windows(), 0u);
  auto busy =
      rig.policy->grant(*rig.pair.host.mr, rig.pair.host.addr(), kIoBytes, kAccessRemoteWrite);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, Errc::busy);
  // The LOCAL_INV completes (signaled): the key is free at the device, the I/O completes.
  ASSERT_TRUE(rig.pair.host.qp->flush());
  const auto wcs = rig.pair.collect(*rig.pair.host.send_cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, make_wr_id(WrKind::local_inv, io1.grant.window));
  EXPECT_EQ(wcs[0].status, WcStatus::success);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::local_inv);
  EXPECT_EQ(rig.key_state(io1.grant.rkey), KeyState::free);
  rig.policy->on_local_inv_done(io1.grant.window);
  ++rig.local_invs_done;  // reaped by hand above
  EXPECT_EQ(rig.policy->free_windows(), 1u);

  // I/O 2: the same window, unfenced, and the bind succeeds.
  std::vector<Io> ios = rig.start(1);
  ASSERT_EQ(ios.size(), 1u);
  EXPECT_EQ(ios[0].grant.window, io1.grant.window);
  EXPECT_EQ(ios[0].grant.rkey, key_after(io1.grant.rkey));
  EXPECT_EQ(ios[0].grant.bind.flags, 0u);
  ASSERT_TRUE(rig.serve(ios)) << describe(rig.target_send);
  ASSERT_TRUE(rig.finish(ios)) << describe(rig.errors);
  EXPECT_TRUE(ios[0].data_ok);
  ASSERT_TRUE(rig.wait_local_invs());
  EXPECT_EQ(rig.pair.host.qp->state(), verbs::QpState::ready_to_send);
  EXPECT_EQ(rig.counters().error_completions, 0u);
}

TEST(KeyPolicySim, DeferredBindsAnotherWindowWhileTheLocalInvIsOutstandingUnderMlx5_2017) {
  Rig rig({SimProfile::mlx5_2017, KeyPolicyKind::deferred, 1, kLongLagSteps});
  ASSERT_NE(rig.policy, nullptr);
  const Io io1 = first_io(rig);
  EXPECT_EQ(io1.after.local_inv.flags, kWrSignaled);
  EXPECT_FALSE(io1.after.wait_for_local_inv);  // I/O 1 is complete
  EXPECT_EQ(rig.policy->free_windows(), 1u);   // the other half of the pool

  // I/O 2 right behind the LOCAL_INV, in the same doorbell: the other window.
  std::vector<Io> ios = rig.start(1);
  ASSERT_EQ(ios.size(), 1u);
  EXPECT_NE(ios[0].grant.window, io1.grant.window);
  EXPECT_EQ(ios[0].grant.bind.flags, 0u);
  ASSERT_TRUE(rig.serve(ios)) << describe(rig.target_send);
  ASSERT_TRUE(rig.finish(ios)) << describe(rig.errors);
  EXPECT_TRUE(ios[0].data_ok);
  // finish() reaped I/O 1's LOCAL_INV completion on the way: its window is back.
  EXPECT_EQ(rig.local_invs_done, 1u);
  EXPECT_EQ(rig.policy->free_windows(), 1u);
  // I/O 3 gets I/O 1's window back, its LOCAL_INV long completed.
  std::vector<Io> third = rig.start(1);
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third[0].grant.window, io1.grant.window);
  ASSERT_TRUE(rig.serve(third)) << describe(rig.target_send);
  ASSERT_TRUE(rig.finish(third)) << describe(rig.errors);
  EXPECT_EQ(rig.counters().error_completions, 0u);
}

TEST(KeyPolicySim, RemoteInvalidationLeavesNothingToRaceEvenForUnsafeUnderMlx5_2017) {
  Rig rig({SimProfile::mlx5_2017, KeyPolicyKind::unsafe, 1, kLongLagSteps});
  ASSERT_NE(rig.policy, nullptr);
  uint32_t previous_key = 0;
  for (int i = 0; i < 5; ++i) {
    std::vector<Io> ios = rig.start(1, TargetInvalidates::always);
    ASSERT_EQ(ios.size(), 1u);
    EXPECT_EQ(ios[0].grant.window, 0u);
    if (i > 0) {
      EXPECT_EQ(ios[0].grant.rkey, key_after(previous_key));
    }
    previous_key = ios[0].grant.rkey;
    ASSERT_TRUE(rig.serve(ios)) << describe(rig.target_send);
    ASSERT_TRUE(rig.finish(ios)) << describe(rig.errors);
    // SEND_WITH_INV: the key was invalidated before the RECV completed; no LOCAL_INV.
    EXPECT_TRUE(ios[0].response.remote_invalidated);
    EXPECT_EQ(ios[0].response.invalidated_rkey, ios[0].grant.rkey);
    EXPECT_EQ(rig.key_state(ios[0].grant.rkey), KeyState::free);
    EXPECT_FALSE(ios[0].after.post_local_inv);
    EXPECT_TRUE(ios[0].data_ok);
  }
  EXPECT_EQ(rig.policy->stats().remote_invalidates, 5u);
  EXPECT_EQ(rig.counters().local_inv, 0u);
  EXPECT_EQ(rig.counters().send_with_inv, 5u);
  EXPECT_EQ(rig.counters().error_completions, 0u);
}

// --- Many I/Os per profile ------------------------------------------------------------

struct ProfileCase {
  SimProfile profile;
  bool unsafe_survives;  // whether the hardware itself orders a bind after a LOCAL_INV
};

// depth 4, 4 I/Os per round, 25 rounds: every policy but unsafe survives every profile.
void expect_policies_under(const ProfileCase& profile_case, TargetInvalidates mode) {
  for (KeyPolicyKind kind : kAllKinds) {
    SCOPED_TRACE(key_policy_name(kind));
    Rig rig({profile_case.profile, kind, 4, kLongLagSteps});
    ASSERT_NE(rig.policy, nullptr);
    const RunResult result = run_ios(rig, 25, 4, mode);
    const bool survives = kind != KeyPolicyKind::unsafe || profile_case.unsafe_survives;
    if (!survives) {
      ASSERT_FALSE(result.errors.empty());
      EXPECT_EQ(wr_kind(result.errors.front().wr_id), WrKind::bind) << describe(result.errors);
      EXPECT_EQ(result.errors.front().status, WcStatus::mw_bind_error);
      EXPECT_LT(result.completed, 100u);
      continue;
    }
    EXPECT_EQ(result.completed, 100u);
    EXPECT_TRUE(result.errors.empty()) << describe(result.errors);
    EXPECT_EQ(rig.pair.host.qp->state(), verbs::QpState::ready_to_send);
    // What the policy asked for is what reached the device.
    ASSERT_TRUE(rig.pair.host.qp->flush());  // the last round's LOCAL_INVs
    const KeyPolicyStats& stats = rig.policy->stats();
    const auto counters = rig.counters();
    EXPECT_EQ(counters.bind_mw, stats.binds);
    EXPECT_EQ(counters.local_inv, stats.local_invalidates);
    EXPECT_EQ(counters.send_with_inv, stats.remote_invalidates);
    EXPECT_EQ(counters.error_completions, 0u);
    if (kind == KeyPolicyKind::global) {
      EXPECT_EQ(stats.binds, 0u);
      continue;
    }
    EXPECT_EQ(stats.binds, 100u);
    EXPECT_EQ(stats.local_invalidates + stats.remote_invalidates, 100u);  // one per bind
    if (mode == TargetInvalidates::alternate) {
      EXPECT_EQ(stats.remote_invalidates, 50u);
    }
    EXPECT_EQ(stats.protocol_errors, 0u);
    EXPECT_EQ(stats.fenced_binds > 0, kind == KeyPolicyKind::max);
  }
}

TEST(KeyPolicySim, EveryPolicyServesIoUnderRxe) {
  // rxe executes memory operations in order and at once, and a LOCAL_INV waits for every
  // earlier WR: even unsafe is safe here (the race does not reproduce on soft-RoCE).
  expect_policies_under({SimProfile::rxe, true}, TargetInvalidates::never);
  expect_policies_under({SimProfile::rxe, true}, TargetInvalidates::alternate);
}

TEST(KeyPolicySim, AllButUnsafeServeIoUnderMlx5_2017) {
  expect_policies_under({SimProfile::mlx5_2017, false}, TargetInvalidates::never);
  expect_policies_under({SimProfile::mlx5_2017, false}, TargetInvalidates::alternate);
}

TEST(KeyPolicySim, EveryPolicyServesIoUnderMlx5Fenced) {
  // The umr_fence fix: the hardware fences every bind, so even unsafe's reuse is safe.
  expect_policies_under({SimProfile::mlx5_fenced, true}, TargetInvalidates::never);
  expect_policies_under({SimProfile::mlx5_fenced, true}, TargetInvalidates::alternate);
}

TEST(KeyPolicySim, SafePoliciesSurviveTheAdversarialProfileAndUnsafeDoesNot) {
  // Random lags in [0, 64], completion delays and execution budgets, reproducible by seed.
  uint32_t unsafe_failures = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (KeyPolicyKind kind : kAllKinds) {
      SCOPED_TRACE(key_policy_name(kind));
      Rig rig({SimProfile::adversarial, kind, 4, kLongLagSteps, seed});
      ASSERT_NE(rig.policy, nullptr);
      const RunResult result = run_ios(rig, 12, 4, TargetInvalidates::never);
      if (kind == KeyPolicyKind::unsafe) {
        if (result.errors.empty()) continue;
        ++unsafe_failures;
        EXPECT_EQ(wr_kind(result.errors.front().wr_id), WrKind::bind) << describe(result.errors);
        EXPECT_EQ(result.errors.front().status, WcStatus::mw_bind_error);
        continue;
      }
      EXPECT_EQ(result.completed, 48u);
      EXPECT_TRUE(result.errors.empty()) << describe(result.errors);
    }
  }
  EXPECT_GT(unsafe_failures, 0u);
}

TEST(KeyPolicySim, ResetAfterTheRaceGivesFreshFreeWindows) {
  Rig rig({SimProfile::mlx5_2017, KeyPolicyKind::unsafe, 2, kLongLagSteps});
  ASSERT_NE(rig.policy, nullptr);
  const RunResult result = run_ios(rig, 5, 2, TargetInvalidates::never);
  ASSERT_FALSE(result.errors.empty());
  EXPECT_EQ(rig.pair.host.qp->state(), verbs::QpState::error);
  // The transport abandons what the failed I/Os held, then resets before a new QP.
  rig.policy->on_abandoned(0);
  rig.policy->on_abandoned(1);
  EXPECT_EQ(rig.policy->free_windows(), 0u);
  ASSERT_TRUE(rig.policy->reset());
  EXPECT_EQ(rig.policy->free_windows(), 2u);
  auto granted =
      rig.policy->grant(*rig.pair.host.mr, rig.pair.host.addr(), kIoBytes, kAccessRemoteWrite);
  ASSERT_TRUE(granted);
  EXPECT_EQ(granted->bind.flags, 0u);
  // A fresh window: its key is unknown to the device until bound (not the failed ones').
  EXPECT_EQ(rig.key_state(granted->rkey), KeyState::unknown);
}

}  // namespace
}  // namespace nvmf::memreg
