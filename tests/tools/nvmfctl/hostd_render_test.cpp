// nvmfctl's text of nvmf_hostd's answers: the devices of a connect, nvme-cli's disconnect
// line, the `nvme list`-like table, sizes and addresses.
#include <gtest/gtest.h>

#include <string>

#include "hostd_render.h"

namespace nvmf::ctl {
namespace {

Json controller(const std::string& name, const std::string& subnqn, Json namespaces) {
  return Json{
      {"name", name},    {"subnqn", subnqn},   {"traddr", "10.0.0.1"},    {"trsvcid", "4420"},
      {"state", "live"}, {"memreg", "global"}, {"namespaces", namespaces}};
}

Json ns(uint32_t nsid, const std::string& device, uint32_t block_size, uint64_t size_bytes) {
  return Json{
      {"nsid", nsid}, {"device", device}, {"block_size", block_size}, {"size_bytes", size_bytes}};
}

TEST(HostdRender, DevicesOnePerLine) {
  EXPECT_EQ(devices_text(
                controller("nvmf0", "nqn.a:b",
                           Json::array({ns(1, "/dev/nbd0", 512, 0), ns(3, "/dev/nbd1", 512, 0)}))),
            "/dev/nbd0\n/dev/nbd1\n");
  EXPECT_EQ(devices_text(controller("nvmf0", "nqn.a:b", Json::array())), "");
  EXPECT_EQ(devices_text(Json{{"name", "nvmf0"}}), "") << "no namespaces member";
  EXPECT_THROW(devices_text(controller("nvmf0", "nqn.a:b", Json::array({Json{{"nsid", 1}}}))),
               Json::exception)
      << "a namespace without its device is malformed";
}

TEST(HostdRender, DisconnectedLikeNvmeCli) {
  const Json result = {{"disconnected", Json::array({controller("nvmf0", "nqn.a:b", nullptr),
                                                     controller("nvmf1", "nqn.a:c", nullptr),
                                                     controller("nvmf2", "nqn.a:b", nullptr)})}};
  EXPECT_EQ(disconnected_text(result),
            "NQN:nqn.a:b disconnected 2 controller(s)\nNQN:nqn.a:c disconnected 1 controller(s)\n");
  const Json none = {{"disconnected", Json::array()}};
  EXPECT_EQ(disconnected_text(none), "disconnected 0 controller(s)\n");
  EXPECT_EQ(disconnected_text(none, "nqn.a:b"), "NQN:nqn.a:b disconnected 0 controller(s)\n");
  EXPECT_THROW(disconnected_text(Json::object()), Json::exception);
}

TEST(HostdRender, SizesInNvmeCliDecimalUnits) {
  EXPECT_EQ(size_text(0), "0 B");
  EXPECT_EQ(size_text(999), "999 B");
  EXPECT_EQ(size_text(1000), "1.00 kB");
  EXPECT_EQ(size_text(4194304), "4.19 MB");
  EXPECT_EQ(size_text(67108864), "67.11 MB");
  EXPECT_EQ(size_text(1000000000000ull), "1.00 TB");
  EXPECT_EQ(size_text(~uint64_t{0}), "18.45 EB");
}

TEST(HostdRender, Addresses) {
  EXPECT_EQ(address_text("10.0.0.1", "4420"), "10.0.0.1:4420");
  EXPECT_EQ(address_text("fe80::1", "4421"), "[fe80::1]:4421");
}

TEST(HostdRender, ListTable) {
  Json reconnecting = controller(
      "nvmf1", "nqn.2026-11.io.example:long-subsystem-name",
      Json::array({ns(1, "/dev/nbd1", 4096, 1000000000000ull), ns(2, "/dev/nbd2", 512, 512)}));
  reconnecting["state"] = "reconnecting";
  reconnecting["memreg"] = "deferred";
  reconnecting["traddr"] = "fe80::1";
  Json empty = controller("nvmf2", "nqn.a:empty", Json::array());
  empty.erase("memreg");  // a member missing: "-"
  const Json result = {
      {"controllers",
       Json::array({controller("nvmf0", "nqn.a:b", Json::array({ns(1, "/dev/nbd0", 512, 4194304)})),
                    reconnecting, empty})}};
  EXPECT_EQ(controller_list_text(result),
            "Node       Namespace     Size  Format  Subsystem NQN                               "
            "Address         State         Memreg\n"
            "---------  ---------  -------  ------  ------------------------------------------  "
            "--------------  ------------  --------\n"
            "/dev/nbd0          1  4.19 MB  512 B   nqn.a:b                                     "
            "10.0.0.1:4420   live          global\n"
            "/dev/nbd1          1  1.00 TB  4096 B  nqn.2026-11.io.example:long-subsystem-name  "
            "[fe80::1]:4420  reconnecting  deferred\n"
            "/dev/nbd2          2    512 B  512 B   nqn.2026-11.io.example:long-subsystem-name  "
            "[fe80::1]:4420  reconnecting  deferred\n"
            "-                  -        -  -       nqn.a:empty                                 "
            "10.0.0.1:4420   live          -\n");
  EXPECT_EQ(controller_list_text(Json{{"controllers", Json::array()}}),
            "No controllers are connected through nvmf_hostd.\n");
  EXPECT_THROW(controller_list_text(Json::object()), Json::exception);
}

}  // namespace
}  // namespace nvmf::ctl
