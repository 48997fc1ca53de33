// The host's keep-alive timeout: a Keep Alive that gets no answer within KATO fails the admin
// queue (as the kernel host's keep-alive request timeout does), so the controller's owner sees
// it lost and recovers (nvmf_hostd reconnects the controller), instead of waiting forever on a
// target that is stuck or gone without a disconnect.
#include <gtest/gtest.h>

#include "host_fixture.h"
#include "log_capture.h"

namespace nvmf::e2e {
namespace {

class HostKeepAliveTest : public HostFixture {};

TEST_F(HostKeepAliveTest, AnUnansweredKeepAliveFailsTheAdminQueueAfterKato) {
  constexpr uint32_t kKatoMs = 2000;
  host::ControllerOpts opts = controller_opts();
  opts.keep_alive_timeout_ms = kKatoMs;
  auto controller = connect(kNqn512, opts);
  ASSERT_NE(controller, nullptr);
  test::LogCapture log;
  // The target is not polled from here on: the Keep Alive sent at KATO/2 is never answered.
  harness_.clock().advance_ms(kKatoMs / 2 + 10);
  controller->process_admin_completions();
  const uint64_t sent = controller->stats().keep_alives_sent;
  EXPECT_GE(sent, 1u);
  harness_.clock().advance_ms(kKatoMs - 100);
  controller->process_admin_completions();
  EXPECT_TRUE(controller->connected()) << "failed before KATO had passed";
  harness_.clock().advance_ms(200);
  controller->process_admin_completions();
  EXPECT_FALSE(controller->connected());
  EXPECT_TRUE(log.contains("Keep Alive unanswered for 2000 ms")) << "no log line";
  EXPECT_EQ(controller->stats().keep_alives_sent, sent) << "no second Keep Alive while one waits";
  EXPECT_TRUE(controller->disconnect());
}

TEST_F(HostKeepAliveTest, AnsweredKeepAlivesNeverTimeOut) {
  constexpr uint32_t kKatoMs = 1000;
  host::ControllerOpts opts = controller_opts();
  opts.keep_alive_timeout_ms = kKatoMs;
  auto controller = connect(kNqn512, opts);
  ASSERT_NE(controller, nullptr);
  for (int step = 0; step < 200; ++step) {
    harness_.clock().advance_ms(50);
    controller->process_admin_completions();
    harness_.poll_round();
  }
  EXPECT_TRUE(controller->connected());
  EXPECT_GE(controller->stats().keep_alives_sent, 15u);
}

}  // namespace
}  // namespace nvmf::e2e
