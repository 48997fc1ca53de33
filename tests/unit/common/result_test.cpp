#include "common/result.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

namespace nvmf {
namespace {

Result<int> parse_positive(int value) {
  if (value <= 0) return Unexpected(Errc::invalid_argument, "value must be positive");
  return value;
}

TEST(Result, HoldsValue) {
  auto r = parse_positive(7);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(*r, 7);
  EXPECT_EQ(r.value_or(3), 7);
}

TEST(Result, HoldsError) {
  auto r = parse_positive(-1);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
  EXPECT_STREQ(r.error().detail, "value must be positive");
  EXPECT_EQ(r.value_or(3), 3);
}

TEST(Result, NonTrivialValueIsDestroyedOnce) {
  auto counter = std::make_shared<int>(0);
  {
    Result<std::shared_ptr<int>> r(counter);
    EXPECT_EQ(counter.use_count(), 2);
    Result<std::shared_ptr<int>> copy = r;
    EXPECT_EQ(counter.use_count(), 3);
    Result<std::shared_ptr<int>> moved = std::move(copy);
    EXPECT_EQ(counter.use_count(), 3);
    moved = Result<std::shared_ptr<int>>(Unexpected(Errc::busy));
    EXPECT_EQ(counter.use_count(), 2);
  }
  EXPECT_EQ(counter.use_count(), 1);
}

TEST(Result, MoveOnlyValue) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(5));
  std::unique_ptr<int> taken = std::move(r).value();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, 5);
}

TEST(Result, VoidResult) {
  Result<void> ok;
  EXPECT_TRUE(ok.has_value());
  Result<void> also_ok(Errc::ok);
  EXPECT_TRUE(also_ok.has_value());
  Result<void> bad(Errc::busy);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, Errc::busy);
}

TEST(Errc, NamesAndErrnoRoundTrip) {
  for (int i = 1; i < static_cast<int>(Errc::system_error); ++i) {
    auto code = static_cast<Errc>(i);
    EXPECT_STRNE(errc_name(code), "unknown");
    EXPECT_EQ(errno_to_errc(errc_to_errno(code)), code) << errc_name(code);
  }
  EXPECT_EQ(errno_to_errc(EAGAIN), Errc::busy);
  EXPECT_EQ(errno_to_errc(EPERM), Errc::permission_denied);
  EXPECT_EQ(errno_to_errc(EXDEV), Errc::system_error);
  EXPECT_STREQ(errc_name(static_cast<Errc>(999)), "unknown");
}

TEST(Error, DescribeIncludesErrnoTextAndDetail) {
  char buffer[256];
  Error e = make_system_error(ENOMEM, "mmap of 2 MiB pool");
  EXPECT_EQ(e.code, Errc::no_memory);
  std::string text = error_describe(e, buffer, sizeof(buffer));
  EXPECT_NE(text.find("no_memory"), std::string::npos) << text;
  EXPECT_NE(text.find("errno 12"), std::string::npos) << text;
  EXPECT_NE(text.find("mmap of 2 MiB pool"), std::string::npos) << text;

  std::string plain = error_describe(Error(Errc::busy), buffer, sizeof(buffer));
  EXPECT_EQ(plain, "busy");
}

TEST(Error, DescribeTruncatesSafely) {
  char buffer[8];
  Error e(Errc::invalid_argument, "a long detail that does not fit");
  error_describe(e, buffer, sizeof(buffer));
  EXPECT_EQ(strlen(buffer), 7u);
}

}  // namespace
}  // namespace nvmf
