// nvmfctl tgt -o human: results rendered by shape (tables, blocks, key: value lines).
#include <gtest/gtest.h>

#include <string>

#include "render.h"

namespace nvmf::ctl {
namespace {

TEST(RenderHuman, NullIsOkAndScalarsAreBare) {
  EXPECT_EQ(render_human(Json()), "ok\n");
  EXPECT_EQ(render_human(Json("notice")), "notice\n");
  EXPECT_EQ(render_human(Json(42)), "42\n");
  EXPECT_EQ(render_human(Json(true)), "true\n");
}

TEST(RenderHuman, ObjectIsAlignedKeyValueLines) {
  // nlohmann::json keeps keys sorted.
  const Json result = Json::parse(R"({"level": "notice", "component": "target", "n": 3})");
  EXPECT_EQ(render_human(result),
            "component: target\n"
            "level:     notice\n"
            "n:         3\n");
}

TEST(RenderHuman, ListOfFlatObjectsIsATable) {
  const Json result = Json::parse(R"([
    {"type": "malloc", "name": "Malloc0", "block_size": 512, "num_blocks": 131072},
    {"type": "null", "name": "Null10", "block_size": 4096, "num_blocks": 8, "claimed": true}])");
  // Identifying columns first (name), then in order of appearance (sorted keys); numbers
  // right-aligned; a member one row lacks is "-".
  EXPECT_EQ(render_human(result),
            "name     block_size  num_blocks  type    claimed\n"
            "Malloc0         512      131072  malloc  -\n"
            "Null10         4096           8  null    true\n");
}

TEST(RenderHuman, EmptyListIsNone) {
  EXPECT_EQ(render_human(Json::array()), "(none)\n");
  EXPECT_EQ(render_human(Json::parse(R"({"bdevs": []})")), "bdevs: (none)\n");
}

TEST(RenderHuman, ScalarListIsOnePerLineAndCommaJoinedInsideAnObject) {
  EXPECT_EQ(render_human(Json::parse(R"(["bdev_create", "bdev_list"])")),
            "bdev_create\nbdev_list\n");
  EXPECT_EQ(render_human(Json::parse(R"({"hosts": ["nqn.a:1", "nqn.a:2"]})")),
            "hosts: nqn.a:1, nqn.a:2\n");
}

TEST(RenderHuman, SubsystemListIsABlockPerSubsystemWithItsTables) {
  const Json result = Json::parse(R"([
    {"nqn": "nqn.2026-11.io.nvmf-rdma:malloc0", "serial_number": "NVMFMALLOC0001",
     "allow_any_host": true,
     "namespaces": [{"nsid": 1, "bdev": "Malloc0"}, {"nsid": 2, "bdev": "M1"}],
     "listeners": [{"trtype": "rdma", "adrfam": "ipv4", "traddr": "0.0.0.0", "trsvcid": "4420"}],
     "hosts": [],
     "controllers": []},
    {"nqn": "nqn.2026-11.io.nvmf-rdma:b", "allow_any_host": false,
     "namespaces": [], "listeners": [], "hosts": ["nqn.h:1"],
     "controllers": [{"cntlid": 1, "hostnqn": "nqn.h:1", "io_queues": 4}]}])");
  EXPECT_EQ(render_human(result),
            "nqn.2026-11.io.nvmf-rdma:malloc0\n"
            "  allow_any_host: true\n"
            "  controllers:    (none)\n"
            "  hosts:          (none)\n"
            "  serial_number:  NVMFMALLOC0001\n"
            "  listeners:\n"
            "    adrfam  traddr   trsvcid  trtype\n"
            "    ipv4    0.0.0.0  4420     rdma\n"
            "  namespaces:\n"
            "    nsid  bdev\n"
            "       1  Malloc0\n"
            "       2  M1\n"
            "\n"
            "nqn.2026-11.io.nvmf-rdma:b\n"
            "  allow_any_host: false\n"
            "  hosts:          nqn.h:1\n"
            "  listeners:      (none)\n"
            "  namespaces:     (none)\n"
            "  controllers:\n"
            "    cntlid  hostnqn  io_queues\n"
            "         1  nqn.h:1          4\n");
}

TEST(RenderHuman, StatsObjectWithNestedTablesAndObjects) {
  const Json result = Json::parse(R"({
    "uptime_s": 12,
    "reactors": [{"id": 0, "polls": 100, "busy_percent": 1.5}, {"id": 1, "polls": 7, "busy_percent": 0}],
    "transport": {"connections": 2, "qpairs": 3}})");
  EXPECT_EQ(render_human(result),
            "uptime_s: 12\n"
            "reactors:\n"
            "  busy_percent  id  polls\n"
            "           1.5   0    100\n"
            "             0   1      7\n"
            "transport:\n"
            "  connections: 2\n"
            "  qpairs:      3\n");
}

TEST(RenderHuman, BlocksWithoutATitleAreNumbered) {
  const Json result = Json::parse(R"([{"a": [{"x": 1}]}, {"a": []}])");
  EXPECT_EQ(render_human(result),
            "[0]\n"
            "  a:\n"
            "    x\n"
            "    1\n"
            "\n"
            "[1]\n"
            "  a: (none)\n");
}

// The shapes nvmf_tgt's methods answer with (tools/nvmf_tgt/rpc_methods.cpp).
TEST(RenderHuman, BdevListIsATableWithoutItsConfig) {
  const Json result = Json::parse(R"([
    {"name": "Malloc0", "type": "malloc", "block_size": 512, "num_blocks": 131072,
     "uuid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "queue_depth": 128,
     "io_types": ["read", "write"], "channels": 1, "removed": false,
     "config": {"type": "malloc", "name": "Malloc0", "block_size": 512, "num_blocks": 131072}}])");
  EXPECT_EQ(
      render_human("bdev_list", result),
      "name     block_size  channels  io_types     num_blocks  queue_depth  removed  type    uuid\n"
      "Malloc0         512         1  read, write      131072          128  false    malloc  "
      "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\n");
  // Other methods keep every member.
  EXPECT_NE(render_human("other", result).find("config:"), std::string::npos);
}

TEST(RenderHuman, ControllersInASubsystemAreTitledByCntlid) {
  const Json result = Json::parse(R"([{"nqn": "nqn.a:b", "hosts": [], "namespaces": [],
    "controllers": [{"cntlid": 1, "hostnqn": "nqn.h:1", "qpairs": [{"qid": 0, "depth": 31}]}]}])");
  EXPECT_EQ(render_human("subsystem_list", result),
            "nqn.a:b\n"
            "  hosts:      (none)\n"
            "  namespaces: (none)\n"
            "  controllers:\n"
            "    cntlid 1\n"
            "      hostnqn: nqn.h:1\n"
            "      qpairs:\n"
            "        depth  qid\n"
            "           31    0\n");
}

TEST(RenderTable, AlignsAndTrimsTrailingBlanks) {
  Table table;
  table.header = {"METHOD", "SUMMARY"};
  table.rows = {{"bdev_create", "create a bdev"}, {"stats", ""}};
  EXPECT_EQ(render_table(table, 2),
            "  METHOD       SUMMARY\n"
            "  bdev_create  create a bdev\n"
            "  stats\n");
}

TEST(ScalarText, StringsBareNullDash) {
  EXPECT_EQ(scalar_text(Json("a b")), "a b");
  EXPECT_EQ(scalar_text(Json("")), "\"\"");
  EXPECT_EQ(scalar_text(Json()), "-");
  EXPECT_EQ(scalar_text(Json(0.5)), "0.5");
  EXPECT_EQ(scalar_text(Json(false)), "false");
}

TEST(MethodList, TakesTheUsualShapes) {
  using List = std::vector<std::pair<std::string, std::string>>;
  const List expected = {{"bdev_create", "create a bdev"}, {"stats", "counters"}};
  EXPECT_EQ(method_list(Json::parse(R"({"stats": "counters", "bdev_create": "create a bdev"})")),
            expected);
  EXPECT_EQ(method_list(Json::parse(R"([{"name": "stats", "summary": "counters"},
                                        {"method": "bdev_create", "description": "create a bdev"}])")),
            expected);
  EXPECT_EQ(method_list(Json::parse(R"({"methods": {"stats": "counters",
                                                    "bdev_create": "create a bdev"}})")),
            expected);
  EXPECT_EQ(method_list(Json::parse(R"(["stats", "bdev_create"])")),
            (List{{"bdev_create", ""}, {"stats", ""}}));
  EXPECT_TRUE(method_list(Json(3)).empty());
}

}  // namespace
}  // namespace nvmf::ctl
