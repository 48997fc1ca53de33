// The error bdev: which I/Os a rule hits (type, count, every Kth), the status they get,
// dropped I/O and its release, pass-through data, teardown with I/O held, the rule shared by
// channels and changed from another thread.
#include "bdev/error_bdev.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "bdev/malloc_bdev.h"
#include "bdev/null_bdev.h"
#include "bdev_test_util.h"

namespace nvmf::bdev {
namespace {

using testing::AlignedBuffer;
using testing::Completions;
using testing::make_io;

constexpr IoTypeMask kReads = io_type_bit(IoType::read);
constexpr IoTypeMask kWrites = io_type_bit(IoType::write);

struct ErrorFixture {
  explicit ErrorFixture(ErrorInjection injection = {}) {
    auto made_base = create_malloc_bdev({.name = "m0", .block_count = 256, .clock = &clock});
    EXPECT_TRUE(made_base.has_value());
    base = std::move(*made_base);
    auto made = create_error_bdev(
        {.name = "e0", .base_bdev = "m0", .injection = injection, .clock = &clock}, *base);
    EXPECT_TRUE(made.has_value());
    bdev = std::move(*made);
    error = as_error_bdev(*bdev);
    channel = open();
  }
  ~ErrorFixture() { channel.reset(); }

  std::unique_ptr<IoChannel> open() {
    auto opened = bdev->create_channel();
    EXPECT_TRUE(opened.has_value());
    return std::move(*opened);
  }

  // Submits one read of block `lba` into `buffer` and polls once; returns its status.
  IoStatus read(uint64_t lba, AlignedBuffer& buffer, BdevIo* out = nullptr) {
    Completions completions;
    iovec iov = buffer.iov(0, 512);
    BdevIo io = make_io(IoType::read, lba, 1, &iov, 1, &completions);
    EXPECT_TRUE(channel->submit(io));
    channel->poll();
    EXPECT_EQ(completions.calls, 1);
    if (out != nullptr) *out = io;
    return io.status;
  }
  IoStatus write(uint64_t lba, AlignedBuffer& buffer) {
    Completions completions;
    iovec iov = buffer.iov(0, 512);
    BdevIo io = make_io(IoType::write, lba, 1, &iov, 1, &completions);
    EXPECT_TRUE(channel->submit(io));
    channel->poll();
    EXPECT_EQ(completions.calls, 1);
    return io.status;
  }

  FakeClock clock;
  std::unique_ptr<Bdev> base;  // declared first: outlives the error bdev
  std::unique_ptr<Bdev> bdev;
  ErrorBdev* error = nullptr;
  std::unique_ptr<IoChannel> channel;
};

TEST(ErrorBdevTest, WithoutARulePassesDataThrough) {
  ErrorFixture fixture;
  ASSERT_NE(fixture.error, nullptr);
  EXPECT_STREQ(fixture.bdev->backend_name(), "error");
  EXPECT_EQ(fixture.bdev->block_count(), 256u);
  EXPECT_EQ(fixture.base->claimed_by(), fixture.bdev.get());
  AlignedBuffer out(512, 0x5a);
  AlignedBuffer in(512, 0);
  EXPECT_EQ(fixture.write(3, out), IoStatus::success);
  EXPECT_EQ(fixture.read(3, in), IoStatus::success);
  EXPECT_EQ(std::memcmp(in.data(), out.data(), 512), 0);
  EXPECT_EQ(fixture.base->stats().completions(), 2u);
  EXPECT_EQ(fixture.error->counters().failed, 0u);
}

TEST(ErrorBdevTest, FailsTheNextNOfTheChosenTypeWithSpdksDefaultStatus) {
  ErrorFixture fixture({.io_types = kReads, .count = 2});
  AlignedBuffer buffer(512);
  BdevIo io;
  EXPECT_EQ(fixture.write(0, buffer), IoStatus::success);  // not a read: untouched
  EXPECT_EQ(fixture.read(0, buffer, &io), IoStatus::nvme_error);
  EXPECT_EQ(io.nvme_sct, 0);    // Generic Command Status
  EXPECT_EQ(io.nvme_sc, 0x06);  // Internal Error
  EXPECT_FALSE(io.nvme_dnr);
  EXPECT_EQ(fixture.read(0, buffer), IoStatus::nvme_error);
  EXPECT_EQ(fixture.read(0, buffer), IoStatus::success);  // used up
  EXPECT_EQ(fixture.read(0, buffer), IoStatus::success);
  EXPECT_EQ(fixture.error->counters().failed, 2u);
  // Failed I/Os never reached the base; the bdev counts them as errors.
  EXPECT_EQ(fixture.base->stats().ops_of(IoType::read), 2u);
  EXPECT_EQ(fixture.bdev->stats().errors, 2u);
  EXPECT_EQ(fixture.bdev->stats().ops_of(IoType::read), 2u);
}

TEST(ErrorBdevTest, EveryNthWithoutLimitAndAChosenStatus) {
  ErrorFixture fixture;
  ASSERT_TRUE(fixture.error->inject(
      {.io_types = kAllIoTypes, .every_nth = 3, .sct = 2, .sc = 0x81, .dnr = true}));
  AlignedBuffer buffer(512);
  for (int i = 1; i <= 12; ++i) {
    BdevIo io;
    const IoStatus status = fixture.read(0, buffer, &io);
    if (i % 3 == 0) {
      EXPECT_EQ(status, IoStatus::nvme_error) << i;
      EXPECT_EQ(io.nvme_sct, 2);    // Media and Data Integrity Errors
      EXPECT_EQ(io.nvme_sc, 0x81);  // Unrecovered Read Error
      EXPECT_TRUE(io.nvme_dnr);
    } else {
      EXPECT_EQ(status, IoStatus::success) << i;
    }
  }
  EXPECT_EQ(fixture.error->counters().failed, 4u);
}

TEST(ErrorBdevTest, CountAndEveryNthTogether) {
  ErrorFixture fixture({.io_types = kWrites, .count = 2, .every_nth = 2});
  AlignedBuffer buffer(512);
  std::vector<IoStatus> statuses;
  for (int i = 0; i < 8; ++i) statuses.push_back(fixture.write(0, buffer));
  EXPECT_EQ(statuses,
            (std::vector<IoStatus>{IoStatus::success, IoStatus::nvme_error, IoStatus::success,
                                   IoStatus::nvme_error, IoStatus::success, IoStatus::success,
                                   IoStatus::success, IoStatus::success}));
}

TEST(ErrorBdevTest, AFailedWriteLeavesTheDataAlone) {
  ErrorFixture fixture;
  AlignedBuffer first(512, 0x11);
  ASSERT_EQ(fixture.write(5, first), IoStatus::success);
  ASSERT_TRUE(fixture.error->inject({.io_types = kWrites, .count = 1}));
  AlignedBuffer second(512, 0x22);
  EXPECT_EQ(fixture.write(5, second), IoStatus::nvme_error);
  AlignedBuffer in(512);
  ASSERT_EQ(fixture.read(5, in), IoStatus::success);
  EXPECT_EQ(in.data()[0], 0x11);
  EXPECT_EQ(in.data()[511], 0x11);
}

TEST(ErrorBdevTest, FailedCompletionsWaitForAPollAndKeepTheBudget) {
  ErrorFixture fixture({.io_types = io_type_bit(IoType::flush)});
  Completions completions;
  std::vector<BdevIo> ios(5);
  for (auto& io : ios) {
    io = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
    ASSERT_TRUE(fixture.channel->submit(io));
  }
  EXPECT_EQ(completions.calls, 0);  // never from inside submit()
  EXPECT_EQ(fixture.channel->poll(2), 2u);
  EXPECT_EQ(fixture.channel->poll(2), 2u);
  EXPECT_EQ(fixture.channel->poll(2), 1u);
  ASSERT_EQ(completions.order.size(), ios.size());
  for (size_t i = 0; i < ios.size(); ++i) EXPECT_EQ(completions.order[i], &ios[i]);
}

TEST(ErrorBdevTest, DroppedIoNeverCompletesUntilReleasedToTheBase) {
  ErrorFixture fixture({.io_types = kWrites, .action = ErrorAction::drop, .count = 1});
  Completions completions;
  AlignedBuffer out(512, 0x77);
  iovec iov = out.iov();
  BdevIo dropped = make_io(IoType::write, 9, 1, &iov, 1, &completions);
  ASSERT_TRUE(fixture.channel->submit(dropped));
  for (int i = 0; i < 100; ++i) {
    fixture.clock.advance_ms(1000);
    fixture.channel->poll();
  }
  EXPECT_EQ(completions.calls, 0);
  EXPECT_EQ(fixture.channel->outstanding(), 1u);
  EXPECT_EQ(fixture.error->counters().dropped, 1u);
  // Others still pass (count 1 is used up).
  AlignedBuffer other(512, 0x01);
  EXPECT_EQ(fixture.write(10, other), IoStatus::success);

  fixture.error->release_dropped(DroppedFate::submit);
  fixture.channel->poll();  // sent to the base
  if (completions.calls == 0) fixture.channel->poll();
  ASSERT_EQ(completions.calls, 1);
  EXPECT_EQ(dropped.status, IoStatus::success);
  AlignedBuffer in(512);
  ASSERT_EQ(fixture.read(9, in), IoStatus::success);
  EXPECT_EQ(in.data()[0], 0x77);
}

TEST(ErrorBdevTest, DroppedIoReleasedAsAbortedOnEveryChannel) {
  ErrorFixture fixture({.io_types = kAllIoTypes, .action = ErrorAction::drop});
  auto second = fixture.open();
  Completions completions;
  BdevIo a = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  BdevIo b = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  ASSERT_TRUE(fixture.channel->submit(a));
  ASSERT_TRUE(second->submit(b));
  fixture.channel->poll();
  second->poll();
  EXPECT_EQ(completions.calls, 0);
  fixture.error->clear();  // no rule; what was dropped stays dropped
  fixture.channel->poll();
  EXPECT_EQ(completions.calls, 0);
  fixture.error->release_dropped(DroppedFate::abort);
  fixture.channel->poll();
  second->poll();
  ASSERT_EQ(completions.calls, 2);
  for (const BdevIo* io : {&a, &b}) {
    EXPECT_EQ(io->status, IoStatus::nvme_error);
    EXPECT_EQ(io->nvme_sct, 0);
    EXPECT_EQ(io->nvme_sc, 0x07);  // Command Abort Requested
  }
  second.reset();
}

TEST(ErrorBdevTest, DestroyingTheChannelAbortsDroppedFailedAndInFlightIo) {
  ErrorFixture fixture;
  Completions completions;
  BdevIo passing = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  ASSERT_TRUE(fixture.channel->submit(passing));  // at the base, unpolled
  ASSERT_TRUE(fixture.error->inject({.io_types = kAllIoTypes, .count = 1}));
  BdevIo failed = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  ASSERT_TRUE(fixture.channel->submit(failed));  // failed, not delivered yet
  ASSERT_TRUE(fixture.error->inject({.io_types = kAllIoTypes, .action = ErrorAction::drop}));
  std::vector<BdevIo> dropped(3);
  for (auto& io : dropped) {
    io = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
    ASSERT_TRUE(fixture.channel->submit(io));
  }
  fixture.channel.reset();  // bounded: nothing waits for a release
  ASSERT_EQ(completions.calls, 5);
  for (IoStatus status : completions.statuses) EXPECT_EQ(status, IoStatus::aborted);
  EXPECT_EQ(fixture.base->channel_count(), 0u);
}

TEST(ErrorBdevTest, OneRuleCountsAcrossChannels) {
  ErrorFixture fixture({.io_types = kAllIoTypes, .count = 3});
  auto second = fixture.open();
  Completions completions;
  std::vector<BdevIo> ios(8);
  for (size_t i = 0; i < ios.size(); ++i) {
    ios[i] = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
    ASSERT_TRUE((i % 2 == 0 ? *fixture.channel : *second).submit(ios[i]));
  }
  fixture.channel->poll();
  second->poll();
  ASSERT_EQ(completions.calls, 8);
  int failures = 0;
  for (IoStatus status : completions.statuses) failures += status == IoStatus::nvme_error;
  EXPECT_EQ(failures, 3);
  second.reset();
}

TEST(ErrorBdevTest, InjectRefusesBadRulesAndKeepsTheOldOne) {
  ErrorFixture fixture({.io_types = kReads, .count = 7});
  testing::LogCapture log;
  const struct {
    ErrorInjection injection;
    const char* field;
  } cases[] = {
      {{.io_types = 1u << 7}, "io_types"},
      {{.io_types = kReads, .every_nth = 0}, "every_nth"},
      {{.io_types = kReads, .sct = 8}, "sct"},
      {{.io_types = kReads, .sct = 0, .sc = 0}, "sc"},
  };
  for (const auto& bad : cases) {
    auto refused = fixture.error->inject(bad.injection);
    ASSERT_FALSE(refused) << bad.field;
    EXPECT_EQ(refused.error().code, Errc::invalid_argument);
    EXPECT_STREQ(refused.error().detail, bad.field);
  }
  EXPECT_EQ(fixture.error->injection(), (ErrorInjection{.io_types = kReads, .count = 7}));
  // Creation checks the same fields.
  FakeClock clock;
  auto other_base = create_null_bdev({.name = "n1", .clock = &clock});
  ASSERT_TRUE(other_base);
  auto refused = create_error_bdev(
      {.name = "e1", .injection = {.io_types = kReads, .every_nth = 0}, .clock = &clock},
      **other_base);
  ASSERT_FALSE(refused);
  EXPECT_STREQ(refused.error().detail, "every_nth");
  EXPECT_EQ((*other_base)->claimed_by(), nullptr);
}

TEST(ErrorBdevTest, ClearStopsInjectingAndInjectionReportsTheRuleAsSet) {
  ErrorFixture fixture({.io_types = kReads, .count = 5});
  AlignedBuffer buffer(512);
  EXPECT_EQ(fixture.read(0, buffer), IoStatus::nvme_error);
  // The configured count, not what is left of it.
  EXPECT_EQ(fixture.error->injection().count, 5u);
  fixture.error->clear();
  EXPECT_EQ(fixture.error->injection(), ErrorInjection{});
  EXPECT_EQ(fixture.read(0, buffer), IoStatus::success);
}

// Reactor thread submits and polls while another thread keeps changing the rule: every I/O
// completes exactly once, with success or the injected status (TSan checks the rest).
TEST(ErrorBdevTest, RuleChangesFromAnotherThreadWhileIoRuns) {
  ErrorFixture fixture;
  std::atomic<bool> stop{false};
  std::thread changer([&] {
    uint64_t round = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      if (round++ % 2 == 0) {
        EXPECT_TRUE(fixture.error->inject({.io_types = kAllIoTypes, .every_nth = 2}));
      } else {
        fixture.error->clear();
      }
    }
  });
  Completions completions;
  std::vector<BdevIo> ios(64);
  constexpr int kRounds = 200;
  for (int round = 0; round < kRounds; ++round) {
    for (auto& io : ios) {
      io = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
      ASSERT_TRUE(fixture.channel->submit(io));
    }
    while (fixture.channel->outstanding() > 0) fixture.channel->poll();
  }
  stop.store(true);
  changer.join();
  ASSERT_EQ(completions.calls, kRounds * 64);
  for (IoStatus status : completions.statuses) {
    EXPECT_TRUE(status == IoStatus::success || status == IoStatus::nvme_error);
  }
  const IoStats stats = fixture.bdev->stats();
  EXPECT_EQ(stats.errors, fixture.error->counters().failed);
  EXPECT_EQ(stats.completions(), uint64_t{kRounds} * 64);
}

TEST(ErrorBdevTest, OptsAsJsonAndNames) {
  EXPECT_STREQ(error_action_name(ErrorAction::drop), "drop");
  EXPECT_STREQ(io_status_name(IoStatus::nvme_error), "nvme_error");
  const std::string json = opts_to_json(ErrorBdevOpts{
      .name = "e0", .base_bdev = "m0", .injection = {.io_types = kReads, .count = 2}});
  EXPECT_EQ(json,
            "{\"name\":\"e0\",\"base_bdev\":\"m0\",\"io_types\":1,\"action\":\"fail\","
            "\"count\":2,\"every_nth\":1,\"sct\":0,\"sc\":6,\"dnr\":false,\"uuid\":null}");
}

}  // namespace
}  // namespace nvmf::bdev
