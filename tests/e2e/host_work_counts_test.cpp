// The work counts of IoQpairStats (sends, binds, LOCAL_INVs, signaled and fenced WRs,
// doorbells, completions reaped): what each memory-registration policy costs per I/O, counted,
// so a benchmark can show it without timing noise (nvmf_perf's --json "per_io"). One read at a
// time (QD1) on rxe with the target's remote invalidation off, so every window policy
// invalidates its window itself and every count is exact.
#include <gtest/gtest.h>

#include <string>

#include "host_fixture.h"

namespace nvmf::e2e {
namespace {

constexpr uint32_t kBlocksPerIo = 9;  // 4.5 KiB: above the 4 KiB in-capsule size, so keyed
constexpr uint32_t kReads = 24;

// What one read costs under a policy, in work requests and completions.
struct PerRead {
  host::MemregPolicy policy;
  uint64_t binds;              // BIND_MW before the SEND
  uint64_t local_invalidates;  // the host's own invalidation (no remote invalidation here)
  uint64_t signaled;           // the SEND, and a LOCAL_INV that asks for its completion
  uint64_t fenced;             // max: the rebind of a window whose LOCAL_INV was unsignaled
  uint64_t cqes;               // the response's receive, the SEND's, a signaled LOCAL_INV's
};

std::string per_read_name(const ::testing::TestParamInfo<PerRead>& info) {
  return host::memreg_policy_name(info.param.policy);
}

class HostWorkCountsTest : public HostFixture, public ::testing::WithParamInterface<PerRead> {
 protected:
  transport_rdma::RdmaTargetOpts transport_opts() const override {
    transport_rdma::RdmaTargetOpts opts;
    opts.send_with_invalidate = transport_rdma::SendWithInvalidate::off;
    return opts;
  }
};

TEST_P(HostWorkCountsTest, EachReadPostsWhatItsPolicyNeeds) {
  const PerRead expected = GetParam();
  host::ControllerOpts opts = controller_opts();
  opts.memreg = expected.policy;
  auto controller = connect(kNqn512, opts);
  ASSERT_NE(controller, nullptr);
  auto qpair = alloc_qpair(*controller);
  ASSERT_NE(qpair, nullptr);
  host::Namespace* ns = controller->ns(1);
  ASSERT_NE(ns, nullptr);
  DmaBuffer buffer(*host_, size_t{kBlocksPerIo} * 512);
  ASSERT_TRUE(buffer);
  auto read = [&](uint64_t lba) {
    return run_io(*qpair, [&](host::IoCallback cb, void* ctx) {
      return ns->read(*qpair, buffer.data(), lba, kBlocksPerIo, cb, ctx);
    });
  };
  // One read first, so that under max every window in use has been invalidated once and
  // every bind of the counted reads is a rebind.
  ASSERT_TRUE(read(0));
  const host::IoQpairStats before = qpair->stats();
  for (uint32_t i = 1; i <= kReads; ++i) ASSERT_TRUE(read(uint64_t{i} * kBlocksPerIo)) << i;
  const host::IoQpairStats after = qpair->stats();

  EXPECT_EQ(after.sends_posted - before.sends_posted, kReads);
  EXPECT_EQ(after.binds_posted - before.binds_posted, expected.binds * kReads);
  EXPECT_EQ(after.local_invalidates_posted - before.local_invalidates_posted,
            expected.local_invalidates * kReads);
  EXPECT_EQ(after.signaled_posted - before.signaled_posted, expected.signaled * kReads);
  EXPECT_EQ(after.fenced_posted - before.fenced_posted, expected.fenced * kReads);
  EXPECT_EQ(after.cqes_reaped - before.cqes_reaped, expected.cqes * kReads);
  // At QD1 two per read: one for the command (its bind and SEND), one for what its response
  // makes the host post (the receive again, and the LOCAL_INV).
  EXPECT_EQ(after.doorbells - before.doorbells, 2u * kReads);
  EXPECT_EQ(after.bind_errors, 0u);
  EXPECT_EQ(after.reconnects, 0u);
}

INSTANTIATE_TEST_SUITE_P(Policies, HostWorkCountsTest,
                         ::testing::Values(PerRead{host::MemregPolicy::global, 0, 0, 1, 0, 2},
                                           PerRead{host::MemregPolicy::unsafe, 1, 1, 1, 0, 2},
                                           PerRead{host::MemregPolicy::sagi, 1, 1, 2, 0, 3},
                                           PerRead{host::MemregPolicy::max, 1, 1, 1, 1, 2},
                                           PerRead{host::MemregPolicy::deferred, 1, 1, 2, 0, 3}),
                         per_read_name);

}  // namespace
}  // namespace nvmf::e2e
