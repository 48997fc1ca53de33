// What nvmf_perf writes: the --json document (keys exact, in order, as scripts read them), the
// progress line and the table.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "report.h"

namespace nvmf::perf {
namespace {

Summary sample() {
  Summary summary;
  summary.total.label = "Total";
  summary.total.ios = 200000;
  summary.total.bytes = 200000ull * 4096;
  summary.total.errors = 0;
  summary.total.verify_failures = 0;
  summary.total.elapsed_s = 3.0;
  summary.total.latency = {12.5, 3.25, 900.0, 10.0, 40.0, 80.0, 120.0};
  summary.reconnects = 1;
  summary.busy_retries = 7;
  summary.qp_errors = 3;
  summary.mw_bind_errors = 2;
  return summary;
}

std::vector<std::string> keys(const nlohmann::ordered_json& object) {
  std::vector<std::string> names;
  for (auto it = object.begin(); it != object.end(); ++it) names.push_back(it.key());
  return names;
}

TEST(PerfReport, JsonKeysAreExact) {
  const nlohmann::ordered_json json = summary_json(sample());
  // The fixed keys first and unchanged; newer counters only after them.
  const std::vector<std::string> expected = {"iops",   "mibps",      "lat_us",
                                             "ios",    "errors",     "reconnects",
                                             "verify_failures", "busy_retries",
                                             "qp_errors", "mw_bind_errors", "cpu_us_per_io",
                                             "cpu_s", "account", "host_cpu_s",
                                             "host_cpu_us_per_io"};
  EXPECT_EQ(keys(json), expected);
  const std::vector<std::string> latency = {"avg", "min", "max", "p50", "p99", "p999", "p9999"};
  EXPECT_EQ(keys(json["lat_us"]), latency);
}

TEST(PerfReport, JsonValues) {
  // Round trip through text, as a script reads the file.
  const auto json = nlohmann::json::parse(summary_json(sample()).dump());
  // Two decimals, as the table prints them: 200000 / 3 s, and that x 4096 / 2^20.
  EXPECT_DOUBLE_EQ(json["iops"].get<double>(), 66666.67);
  EXPECT_DOUBLE_EQ(json["mibps"].get<double>(), 260.42);
  EXPECT_DOUBLE_EQ(json["lat_us"]["avg"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(json["lat_us"]["min"].get<double>(), 3.25);
  EXPECT_DOUBLE_EQ(json["lat_us"]["max"].get<double>(), 900.0);
  EXPECT_DOUBLE_EQ(json["lat_us"]["p50"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(json["lat_us"]["p99"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(json["lat_us"]["p999"].get<double>(), 80.0);
  EXPECT_DOUBLE_EQ(json["lat_us"]["p9999"].get<double>(), 120.0);
  EXPECT_EQ(json["ios"].get<uint64_t>(), 200000u);
  EXPECT_EQ(json["errors"].get<uint64_t>(), 0u);
  EXPECT_EQ(json["reconnects"].get<uint64_t>(), 1u);
  EXPECT_EQ(json["verify_failures"].get<uint64_t>(), 0u);
  EXPECT_EQ(json["busy_retries"].get<uint64_t>(), 7u);
  EXPECT_EQ(json["qp_errors"].get<uint64_t>(), 3u);
  EXPECT_EQ(json["mw_bind_errors"].get<uint64_t>(), 2u);
  EXPECT_TRUE(json["ios"].is_number_unsigned());
  EXPECT_TRUE(json["mw_bind_errors"].is_number_unsigned());
}

TEST(PerfReport, CpuTimePerIo) {
  Summary summary = sample();
  summary.cpu_s = 0.5;  // 0.5 s for 200000 I/Os: 2.5 us each
  EXPECT_DOUBLE_EQ(summary.cpu_us_per_io(), 2.5);
  const auto json = nlohmann::json::parse(summary_json(summary).dump());
  EXPECT_DOUBLE_EQ(json["cpu_us_per_io"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(json["cpu_s"].get<double>(), 0.5);
  const std::string table = format_table({}, summary);
  EXPECT_NE(table.find("66666.67 IOPS, 2.50 us CPU per I/O (0.50 s process CPU for 200000 I/Os)"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("PCIe"), std::string::npos) << "RDMA runs have no PCIe line";
  EXPECT_FALSE(json.contains("bytes_copied"));
  EXPECT_EQ(Summary{}.cpu_us_per_io(), 0.0) << "no I/O: 0, not NaN";
}

TEST(PerfReport, HostCpuTimeBesideTheProcesses) {
  Summary summary = sample();  // 200000 I/Os
  summary.cpu_s = 0.5;
  summary.host_cpu_s = 0.2;  // 1 us each
  const auto json = nlohmann::json::parse(summary_json(summary).dump());
  EXPECT_DOUBLE_EQ(json["host_cpu_s"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(json["host_cpu_us_per_io"].get<double>(), 1.0);
  const std::string table = format_table({}, summary);
  EXPECT_NE(table.find("(0.50 s process CPU for 200000 I/Os); host workers 0.20 s CPU, 1.00 us "
                       "per I/O"),
            std::string::npos)
      << table;
  EXPECT_EQ(Summary{}.host_cpu_us_per_io(), 0.0) << "no I/O: 0, not NaN";
}

TEST(PerfReport, CompletionModeAndItsWaitsOnTheRdmaPath) {
  Summary summary = sample();
  summary.rdma = true;
  nlohmann::ordered_json json = summary_json(summary);
  EXPECT_EQ(json["mode"], "poll");
  EXPECT_FALSE(json.contains("host_events")) << "poll mode waits for nothing";
  EXPECT_EQ(format_table({}, summary).find("mode poll"), std::string::npos);

  summary.mode = "interrupt";
  summary.host_events = HostEventCounts{1200, 1100, 1000, 900, 10, 0};
  json = summary_json(summary);
  EXPECT_EQ(json["mode"], "interrupt");
  EXPECT_EQ(keys(json["host_events"]),
            (std::vector<std::string>{"waits", "arms", "sleeps", "wakeups", "timer_wakeups",
                                      "worker_sleeps"}));
  EXPECT_EQ(json["host_events"]["sleeps"].get<uint64_t>(), 1000u);
  const std::string table = format_table({}, summary);
  EXPECT_NE(table.find("mode interrupt: 1200 waits, 1000 sleeps (900 woken by the fd, 10 of them "
                       "by a timer), 1100 CQ arms, 0 worker sleeps"),
            std::string::npos)
      << table;
}

TEST(PerfReport, PcieCopiesAndSplits) {
  Summary summary = sample();
  summary.pcie = true;
  summary.bytes_copied = 0;
  summary.commands_split = 12;
  summary.controller_resets = 1;
  const nlohmann::ordered_json json = summary_json(summary);
  const std::vector<std::string> names = keys(json);
  const std::vector<std::string> tail(names.end() - 3, names.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"bytes_copied", "commands_split", "controller_resets"}));
  EXPECT_EQ(json["bytes_copied"].get<uint64_t>(), 0u);
  EXPECT_TRUE(json["bytes_copied"].is_number_unsigned());
  EXPECT_EQ(json["commands_split"].get<uint64_t>(), 12u);
  const std::string table = format_table({}, summary);
  EXPECT_NE(table.find("PCIe: 0 bytes copied through bounce buffers, 12 requests split, 1 "
                       "controller resets"),
            std::string::npos)
      << table;
}

TEST(PerfReport, WorkPerIoOnTheRdmaPath) {
  Summary summary = sample();  // 200000 I/Os
  summary.rdma = true;
  summary.host_work.sends = 200000;
  summary.host_work.binds = 180000;
  summary.host_work.local_invalidates = 180020;  // 20 more: one I/O in 10000 shows
  summary.host_work.signaled = 380000;
  summary.host_work.fenced = 0;
  summary.host_work.doorbells = 150000;
  summary.host_work.cqes_reaped = 580000;
  nlohmann::ordered_json json = summary_json(summary);
  std::vector<std::string> names = keys(json);
  EXPECT_EQ(std::vector<std::string>(names.end() - 2, names.end()),
            (std::vector<std::string>{"host_work", "per_io"}));
  EXPECT_EQ(keys(json["host_work"]),
            (std::vector<std::string>{"send", "bind_mw", "local_inv", "signaled", "fenced",
                                      "doorbells", "cqes_reaped"}));
  EXPECT_EQ(json["host_work"]["local_inv"].get<uint64_t>(), 180020u);
  EXPECT_EQ(keys(json["per_io"]),
            (std::vector<std::string>{"send", "bind_mw", "local_inv", "wrs", "signaled", "fenced",
                                      "doorbells", "cqes_reaped"}));
  const auto parsed = nlohmann::json::parse(json.dump());
  EXPECT_DOUBLE_EQ(parsed["per_io"]["send"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(parsed["per_io"]["bind_mw"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(parsed["per_io"]["local_inv"].get<double>(), 0.9001);
  EXPECT_DOUBLE_EQ(parsed["per_io"]["wrs"].get<double>(), 2.8001);
  EXPECT_DOUBLE_EQ(parsed["per_io"]["signaled"].get<double>(), 1.9);
  EXPECT_DOUBLE_EQ(parsed["per_io"]["fenced"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(parsed["per_io"]["doorbells"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(parsed["per_io"]["cqes_reaped"].get<double>(), 2.9);
  std::string table = format_table({}, summary);
  EXPECT_NE(table.find("per I/O: 2.80 WRs (1.00 SEND, 0.90 BIND_MW, 0.90 LOCAL_INV), 1.90 "
                       "signaled, 0.00 fenced, 0.75 doorbells, 2.90 CQEs reaped\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("sim:"), std::string::npos) << "no sim line without --sim";

  // --sim: the simulated HCAs' work as well, 2180000 steps over 200000 I/Os, and the payload
  // bytes they copied and skipped.
  summary.sim = true;
  summary.sim_work = {600000, 580000, 600000, 400000, 409600000, 819200000};
  json = summary_json(summary);
  names = keys(json);
  EXPECT_EQ(std::vector<std::string>(names.end() - 3, names.end()),
            (std::vector<std::string>{"host_work", "sim_work", "per_io"}));
  EXPECT_EQ(json["sim_work"]["host"]["wrs"].get<uint64_t>(), 600000u);
  EXPECT_EQ(json["sim_work"]["target"]["cqes"].get<uint64_t>(), 400000u);
  EXPECT_DOUBLE_EQ(json["per_io"]["sim_work_steps"].get<double>(), 10.9);
  EXPECT_DOUBLE_EQ(json["per_io"]["sim_payload_bytes_copied"].get<double>(), 2048);
  EXPECT_DOUBLE_EQ(json["per_io"]["sim_payload_bytes_skipped"].get<double>(), 4096);
  table = format_table({}, summary);
  EXPECT_NE(table.find("; sim: 10.90 work steps (WRs taken + CQEs written), payload bytes 2048 "
                       "copied, 4096 skipped\n"),
            std::string::npos)
      << table;
  EXPECT_FALSE(summary_json(Summary{}).contains("per_io")) << "only on the RDMA path";
}

TEST(PerfReport, MoreKeysGoAfterTheFixedOnes) {
  nlohmann::ordered_json json = summary_json(sample());
  json["config"] = {{"workload", "randrw"}};
  EXPECT_EQ(keys(json).front(), "iops");
  EXPECT_EQ(keys(json).back(), "config");
}

TEST(PerfReport, EmptyRunIsZeroNotNan) {
  Summary empty;
  const nlohmann::ordered_json json = summary_json(empty);
  EXPECT_EQ(json["qp_errors"].get<uint64_t>(), 0u);
  EXPECT_EQ(json["mw_bind_errors"].get<uint64_t>(), 0u);
  EXPECT_EQ(json["iops"].get<double>(), 0.0);
  EXPECT_EQ(json["mibps"].get<double>(), 0.0);
  EXPECT_EQ(summarize_latency(LatencyHistogram()).p99, 0.0);
}

TEST(PerfReport, LatencySummaryIsInMicroseconds) {
  LatencyHistogram histogram;
  for (uint64_t ns = 1000; ns <= 100000; ns += 1000) histogram.record(ns);  // 1..100 us
  const LatencySummaryUs summary = summarize_latency(histogram);
  EXPECT_DOUBLE_EQ(summary.min, 1.0);
  EXPECT_DOUBLE_EQ(summary.max, 100.0);
  EXPECT_DOUBLE_EQ(summary.avg, 50.5);
  EXPECT_NEAR(summary.p50, 50.0, 50.0 / 64);
  EXPECT_NEAR(summary.p99, 99.0, 99.0 / 64);
  EXPECT_DOUBLE_EQ(summary.p9999, 100.0);
}

TEST(PerfReport, ProgressLine) {
  EXPECT_EQ(progress_line(3, 123456, 123456ull * 4096, 0, 1.0),
            "[  3 s] 123456 IOPS  482.25 MiB/s  errors 0");
  EXPECT_EQ(progress_line(12, 3000, 3000ull * 4096, 5, 2.0),
            "[ 12 s] 1500 IOPS  5.86 MiB/s  errors 5");
}

TEST(PerfReport, TableHasRowsTotalAndCounters) {
  ResultRow row;
  row.label = "worker 0 nsid 1";
  row.ios = 100;
  row.bytes = 409600;
  row.elapsed_s = 1.0;
  const std::string table = format_table({row}, sample());
  EXPECT_NE(table.find("worker 0 nsid 1"), std::string::npos);
  EXPECT_NE(table.find("Total"), std::string::npos);
  EXPECT_NE(table.find("p99.99 us"), std::string::npos);
  EXPECT_NE(table.find("66666.67"), std::string::npos) << table;
  EXPECT_NE(table.find("1 reconnects"), std::string::npos) << table;
  EXPECT_NE(table.find("7 busy retries"), std::string::npos) << table;
  EXPECT_NE(table.find("3 QP errors"), std::string::npos) << table;
  EXPECT_NE(table.find("2 MW bind errors"), std::string::npos) << table;
}

TEST(PerfReport, MemregSwitchingInTheTableAndTheJson) {
  Summary summary = sample();
  EXPECT_FALSE(summary_json(summary).contains("memreg_switches")) << "only when switching";
  EXPECT_EQ(format_table({}, summary).find("memreg switches"), std::string::npos);
  MemregSwitching& switching = summary.memreg_switching;
  switching.on = true;
  switching.switches = 40;
  switching.failures = 1;
  // Two workers book the same cycle; a policy named twice in it is one entry.
  for (int worker = 0; worker < 2; ++worker) {
    switching.add_seconds("global", 0.5);
    switching.add_seconds("sagi", 0.25);
    switching.add_seconds("global", 0.25);
    switching.add_seconds("deferred", 0.5);
  }
  ASSERT_EQ(switching.policies, (std::vector<std::string>{"global", "sagi", "deferred"}));
  EXPECT_DOUBLE_EQ(switching.share(0), 0.5);
  EXPECT_DOUBLE_EQ(switching.share(1), 1.0 / 6);
  const std::string table = format_table({}, summary);
  EXPECT_NE(table.find("memreg switches: 40 (1 failed); time per policy: global 50.0%, sagi "
                       "16.7%, deferred 33.3%\n"),
            std::string::npos)
      << table;
  const nlohmann::ordered_json json = summary_json(summary);
  EXPECT_EQ(json["memreg_switches"], 40);
  EXPECT_EQ(json["memreg_switch_failures"], 1);
  EXPECT_EQ(keys(json["memreg_time_share"]),
            (std::vector<std::string>{"global", "sagi", "deferred"}));
  EXPECT_DOUBLE_EQ(json["memreg_time_share"]["sagi"].get<double>(), 0.1667);
  MemregSwitching no_time;
  no_time.add_seconds("max", 0);
  EXPECT_EQ(no_time.share(0), 0.0) << "no time booked: 0, not NaN";
}

TEST(PerfReport, ExitStatus) {
  Summary summary = sample();
  EXPECT_EQ(summary_exit_status(summary), 0);
  summary.total.errors = 1;
  EXPECT_EQ(summary_exit_status(summary), 1);
  summary.total.errors = 0;
  summary.total.verify_failures = 1;
  EXPECT_EQ(summary_exit_status(summary), 1);
  // QP errors the qpair recovered from (every I/O resent and completed) fail nothing by
  // themselves: the I/O errors and verify failures decide.
  summary.total.verify_failures = 0;
  summary.qp_errors = 4;
  summary.mw_bind_errors = 4;
  EXPECT_EQ(summary_exit_status(summary), 0);
}

Summary with_account(uint64_t submitted, uint64_t completed, uint64_t failed) {
  Summary summary = sample();
  summary.account.submitted = submitted;
  summary.account.completed = completed;
  summary.account.failed = failed;
  return summary;
}

TEST(PerfReport, AccountLineAndJson) {
  Summary summary = with_account(10, 7, 3);
  summary.account.failures.add(false, 0, 0x06, 2);
  summary.account.failures.add(true, 0, 0);
  const std::string table = format_table({}, summary);
  EXPECT_NE(table.find("account: submitted=10 completed=7 failed=3 inflight=0 "
                       "verify_failures=0 ok\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("failed by status: Internal Error (SCT 0h SC 06h) 2, refused 1\n"),
            std::string::npos)
      << table;
  const nlohmann::ordered_json account = summary_json(summary)["account"];
  EXPECT_EQ(keys(account), (std::vector<std::string>{"submitted", "completed", "failed",
                                                     "inflight", "verify_failures", "ok",
                                                     "failed_by_status"}));
  EXPECT_EQ(account["submitted"], 10u);
  EXPECT_EQ(account["failed"], 3u);
  EXPECT_EQ(account["ok"], true);
  EXPECT_EQ(account["failed_by_status"]["Internal Error (SCT 0h SC 06h)"], 2u);
  EXPECT_EQ(account["failed_by_status"]["refused"], 1u);
  EXPECT_FALSE(summary_json(summary).contains("chaos")) << "only with --chaos";
}

TEST(PerfReport, AnUnbalancedAccountFails) {
  Summary lost = with_account(10, 7, 2);  // one I/O neither completed nor failed
  EXPECT_FALSE(account_ok(lost));
  EXPECT_NE(format_table({}, lost).find("failed=2 inflight=0 verify_failures=0 FAILED"),
            std::string::npos);
  EXPECT_EQ(summary_json(lost)["account"]["ok"], false);
  EXPECT_EQ(summary_exit_status(lost), 1);
  Summary twice = with_account(10, 8, 3);  // one ended twice
  EXPECT_EQ(summary_exit_status(twice), 1);
  Summary stuck = with_account(10, 7, 2);
  stuck.account.in_flight = 1;
  EXPECT_FALSE(account_ok(stuck)) << "balanced only with nothing left in flight";
  EXPECT_EQ(summary_exit_status(stuck), 1);
}

TEST(PerfReport, UnderChaosTheAccountAndVerifyDecide) {
  Summary summary = with_account(10, 7, 3);
  summary.total.errors = 3;
  EXPECT_EQ(summary_exit_status(summary), 1) << "without --chaos a failed I/O fails the run";
  summary.chaos = true;
  summary.chaos_injected = {{"qp-error", 2}, {"bdev-error", 1}};
  summary.chaos_effects = {{"wrs_failed", 2}};
  EXPECT_EQ(summary_exit_status(summary), 0) << "failures are expected under chaos";
  EXPECT_NE(format_table({}, summary).find("chaos: qp-error 2, bdev-error 1; effects: "
                                           "wrs_failed 2\n"),
            std::string::npos);
  const nlohmann::ordered_json chaos = summary_json(summary)["chaos"];
  EXPECT_EQ(chaos["injected"]["bdev-error"], 1u);
  EXPECT_EQ(chaos["effects"]["wrs_failed"], 2u);
  summary.total.verify_failures = 1;
  EXPECT_EQ(summary_exit_status(summary), 1) << "nothing acknowledged may be lost";
  summary.total.verify_failures = 0;
  summary.account.failed = 2;
  EXPECT_EQ(summary_exit_status(summary), 1);
}

TEST(PerfReport, FailureKindsBeyondTheTableCountAsOther) {
  FailureCounts counts;
  for (uint8_t sc = 1; sc <= FailureCounts::kKindsMax + 2; ++sc) counts.add(false, 0, sc);
  counts.add(false, 0, 1);
  EXPECT_EQ(counts.kinds_used, FailureCounts::kKindsMax);
  EXPECT_EQ(counts.kinds[0].count, 2u);
  EXPECT_EQ(counts.other, 2u);
  FailureCounts merged;
  merged.add(false, 0, 1, 5);
  merged.merge(counts);
  EXPECT_EQ(merged.kinds[0].count, 7u);
  EXPECT_EQ(merged.other, 2u);
}

}  // namespace
}  // namespace nvmf::perf
