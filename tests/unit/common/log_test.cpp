#include "common/log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

NVMF_LOG_COMPONENT(logtest);
NVMF_LOG_COMPONENT(logtest_other);

namespace nvmf {
namespace {

struct Captured {
  std::vector<std::string> lines;
  std::vector<LogLevel> levels;
};

void capture(LogLevel level, const char*, const char* line, void* ctx) {
  auto* captured = static_cast<Captured*>(ctx);
  captured->lines.emplace_back(line);
  captured->levels.push_back(level);
}

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_set_sink(capture, &captured_);
    log_set_level(LogLevel::notice);
  }
  void TearDown() override {
    log_reset_sink();
    log_set_level(LogLevel::notice);
  }
  Captured captured_;
};

TEST_F(LogTest, FormatsLevelComponentAndMessage) {
  NVMF_ERRLOG(logtest, "queue %d failed: %s", 3, "timeout");
  ASSERT_EQ(captured_.lines.size(), 1u);
  const std::string& line = captured_.lines[0];
  EXPECT_NE(line.find("error"), std::string::npos) << line;
  EXPECT_NE(line.find("logtest"), std::string::npos) << line;
  EXPECT_NE(line.find("log_test.cpp"), std::string::npos) << line;
  EXPECT_NE(line.find("queue 3 failed: timeout"), std::string::npos) << line;
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(captured_.levels[0], LogLevel::error);
}

TEST_F(LogTest, FiltersBelowLevel) {
  NVMF_DEBUGLOG(logtest, "hidden");
  NVMF_INFOLOG(logtest, "hidden too");
  NVMF_NOTICELOG(logtest, "shown");
  ASSERT_EQ(captured_.lines.size(), 1u);
  EXPECT_NE(captured_.lines[0].find("shown"), std::string::npos);
}

TEST_F(LogTest, PerComponentLevel) {
  ASSERT_TRUE(log_set_level("logtest", LogLevel::debug));
  NVMF_DEBUGLOG(logtest, "component at debug");
  NVMF_DEBUGLOG(logtest_other, "other stays at notice");
  ASSERT_EQ(captured_.lines.size(), 1u);
  EXPECT_NE(captured_.lines[0].find("component at debug"), std::string::npos);
  EXPECT_FALSE(log_set_level("no_such_component", LogLevel::debug));
}

TEST_F(LogTest, FormatArgumentsAreNotEvaluatedWhenFiltered) {
  int evaluated = 0;
  auto touch = [&] { return ++evaluated; };
  NVMF_DEBUGLOG(logtest, "%d", touch());
  EXPECT_EQ(evaluated, 0);
}

TEST_F(LogTest, LongLinesAreCut) {
  std::string big(4000, 'x');
  NVMF_ERRLOG(logtest, "%s", big.c_str());
  ASSERT_EQ(captured_.lines.size(), 1u);
  EXPECT_LT(captured_.lines[0].size(), 1024u);
  EXPECT_NE(captured_.lines[0].find("(cut)"), std::string::npos);
}

TEST(LogLevel, ParseAndName) {
  LogLevel level = LogLevel::error;
  EXPECT_TRUE(log_level_parse("debug", &level));
  EXPECT_EQ(level, LogLevel::debug);
  EXPECT_STREQ(log_level_name(LogLevel::warn), "warn");
  EXPECT_FALSE(log_level_parse("verbose", &level));
  EXPECT_EQ(level, LogLevel::debug);
}

}  // namespace
}  // namespace nvmf
