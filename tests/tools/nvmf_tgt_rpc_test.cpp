// nvmf_tgt's JSON-RPC methods (tools/nvmf_tgt/rpc_methods.h) called in process through the
// Dispatcher, without a socket: a Target with its RDMA transport on two reactor threads
// (interrupt mode) over the simulated HCA, as nvmf_tgt --sim runs it, and RawHosts on the
// test thread where a host must connect. Every method's success and its errors, that a failed
// call changes nothing, subsystem_delete with a connected host, and the save_config round trip
// (save, parse, build a fresh target, compare).
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bdev/nvme_bdev.h"
#include "bdev/registry.h"
#include "common/log.h"
#include "nvme_pcie/model/model_controller.h"
#include "raw_host.h"
#include "reactor/group.h"
#include "rpc/rpc.h"
#include "rpc_methods.h"
#include "spec/spec.h"
#include "target/config.h"
#include "target/target.h"
#include "transport_rdma/target_transport.h"
#include "verbs/sim/sim.h"

namespace nvmf::tgt {
namespace {

using e2e::RawCompletion;
using e2e::RawHost;
using rpc::Json;
namespace code = rpc::error_code;

constexpr const char* kNqn = "nqn.2026-11.io.nvmf-rdma:rpc";
constexpr const char* kOtherNqn = "nqn.2026-11.io.nvmf-rdma:rpc2";
constexpr const char* kHostNqn =
    "nqn.2014-08.org.nvmexpress:uuid:1f0e0d0c-0b0a-0908-0706-050403020100";
constexpr const char* kAddress = "10.0.0.1";

// One call's answer: the result, or the error's code and message.
struct Answer {
  bool ok = false;
  Json result;
  int code = 0;
  std::string message;
};

std::ostream& operator<<(std::ostream& out, const Answer& answer) {
  if (answer.ok) return out << "result " << answer.result.dump();
  return out << "error " << answer.code << ": " << answer.message;
}

Answer call(const rpc::Dispatcher& dispatcher, const std::string& method,
            const Json& params = Json::object()) {
  static int next_id = 1;
  const Json request = {
      {"jsonrpc", "2.0"}, {"id", next_id++}, {"method", method}, {"params", params}};
  bool close_after = false;
  const Json response = Json::parse(dispatcher.handle(request.dump(), &close_after));
  Answer answer;
  if (response.contains("result")) {
    answer.ok = true;
    answer.result = response["result"];
  } else {
    answer.code = response["error"]["code"].get<int>();
    answer.message = response["error"]["message"].get<std::string>();
  }
  return answer;
}

bdev::NvmeControllerPool::DeviceOpener model_opener() {
  return [](const std::string& pci) -> bdev::NvmeControllerPool::DeviceResult {
    nvme_pcie::model::ModelOpts opts;
    opts.name = pci;
    auto model = nvme_pcie::model::ModelController::create(opts);
    if (!model) return Unexpected(model.error());
    return std::unique_ptr<nvme_pcie::PciDevice>(std::move(*model));
  };
}

class NvmfTgtRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto provider = verbs::sim::SimProvider::create();
    ASSERT_TRUE(provider);
    provider_ = std::move(*provider);
    auto peer = provider_->create_peer("sim1");
    ASSERT_TRUE(peer);
    host_provider_ = std::move(*peer);
    auto target = target::Target::create(target::TargetOpts{});
    ASSERT_TRUE(target);
    target_ = std::move(*target);

    reactor::ReactorGroupOpts group_opts;
    group_opts.reactor_count = 2;
    group_opts.reactor.mode = reactor::Mode::interrupt;  // two shared cores: no spinning
    auto group = reactor::ReactorGroup::start(group_opts);
    ASSERT_TRUE(group);
    group_ = std::move(*group);
    reactors_ = {&group_->reactor(0), &group_->reactor(1)};
    reactor::run_and_wait(*reactors_[0], [&] {
      auto created = transport_rdma::RdmaTargetTransport::create(*provider_, *target_, reactors_,
                                                                 transport_rdma::RdmaTargetOpts{});
      if (created) transport_ = std::move(*created);
    });
    ASSERT_NE(transport_, nullptr);
    context_ = std::make_unique<RpcContext>(RpcContext{.target = *target_,
                                                       .registry = registry_,
                                                       .nvme_pool = nvme_pool_,
                                                       .transport = transport_.get(),
                                                       .reactors = reactors_});
    register_rpc_methods(dispatcher_, *context_);
  }

  void TearDown() override {
    hosts_.clear();
    if (group_) {
      if (transport_) {
        reactor::run_and_wait(*reactors_[0], [&] { transport_->begin_shutdown(); });
        bool drained = false;
        for (int i = 0; i < 3000 && !drained; ++i) {
          reactor::run_and_wait(*reactors_[0], [&] { drained = transport_->drained(); });
          if (!drained) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        EXPECT_TRUE(drained);
      }
      for (reactor::Reactor* reactor : reactors_) {
        reactor::run_and_wait(*reactor, [&] { (void)target_->release_reactor(*reactor); });
      }
      group_->stop();
      for (reactor::Reactor* reactor : reactors_) reactor->take_ownership();
    }
    transport_.reset();
    target_.reset();
  }

  Answer rpc(const std::string& method, const Json& params = Json::object()) {
    return call(dispatcher_, method, params);
  }

  bool listening(const std::string& address, uint16_t port) {
    bool answer = false;
    reactor::run_and_wait(*reactors_[0], [&] { answer = transport_->listening(address, port); });
    return answer;
  }

  // The subsystem's entry in subsystem_list (null when absent).
  Json subsystem(const std::string& nqn) {
    for (const Json& entry : rpc("subsystem_list").result) {
      if (entry["nqn"] == nqn) return entry;
    }
    return nullptr;
  }

  // A malloc bdev, a subsystem any host may use with it as NSID 1, a listener on kAddress.
  void make_served_subsystem(const std::string& nqn, const std::string& bdev, uint16_t port) {
    ASSERT_TRUE(rpc("bdev_create", {{"type", "malloc"}, {"name", bdev}, {"num_blocks", 2048}}).ok);
    ASSERT_TRUE(rpc("subsystem_create", {{"nqn", nqn}, {"allow_any_host", true}}).ok);
    ASSERT_TRUE(rpc("namespace_add", {{"nqn", nqn}, {"bdev", bdev}}).ok);
    ASSERT_TRUE(rpc("listener_add", {{"nqn", nqn}, {"traddr", kAddress}, {"trsvcid", port}}).ok);
  }

  // An admin queue (and controller) of kHostNqn on `nqn`, enabled; returns the CNTLID or 0.
  uint16_t connect_controller(RawHost& admin, const std::string& nqn, uint16_t port) {
    if (!admin.connect(kAddress, port, 0, 32, 31).established) return 0;
    RawCompletion connect = admin.fabrics_connect(0, 32, 0xFFFF, nqn, kHostNqn, 0);
    if (!connect.ok()) return 0;
    spec::CcFields cc;
    cc.en = true;
    cc.iosqes = 6;
    cc.iocqes = 4;
    if (!admin.property_set(spec::property_offset::cc, spec::encode_cc(cc)).ok()) return 0;
    return static_cast<uint16_t>(connect.cqe.cdw0 & 0xFFFF);
  }

  RawHost& new_host() {
    hosts_.push_back(std::make_unique<RawHost>(*host_provider_, nullptr));
    return *hosts_.back();
  }

  std::unique_ptr<verbs::sim::SimProvider> provider_;
  std::unique_ptr<verbs::sim::SimProvider> host_provider_;
  bdev::NvmeControllerPool nvme_pool_{model_opener(), nvme_pcie::ControllerOpts{}};
  bdev::BdevRegistry registry_;
  std::unique_ptr<target::Target> target_;
  std::unique_ptr<reactor::ReactorGroup> group_;
  std::vector<reactor::Reactor*> reactors_;
  std::unique_ptr<transport_rdma::RdmaTargetTransport> transport_;
  std::unique_ptr<RpcContext> context_;
  rpc::Dispatcher dispatcher_;
  std::vector<std::unique_ptr<RawHost>> hosts_;
};

TEST_F(NvmfTgtRpcTest, RpcGetMethodsListsEveryMethod) {
  const Answer answer = rpc("rpc_get_methods");
  ASSERT_TRUE(answer.ok) << answer;
  std::vector<std::string> names;
  for (const Json& entry : answer.result) {
    names.push_back(entry["name"].get<std::string>());
    EXPECT_FALSE(entry["summary"].get<std::string>().empty()) << names.back();
  }
  const std::vector<std::string> expected = {"bdev_create",
                                             "bdev_delay_stall",
                                             "bdev_delete",
                                             "bdev_error_inject",
                                             "bdev_error_release_dropped",
                                             "bdev_list",
                                             "host_add",
                                             "host_remove",
                                             "listener_add",
                                             "listener_remove",
                                             "log_get_level",
                                             "log_set_level",
                                             "namespace_add",
                                             "namespace_remove",
                                             "rpc_get_methods",
                                             "save_config",
                                             "stats",
                                             "subsystem_allow_any_host",
                                             "subsystem_create",
                                             "subsystem_delete",
                                             "subsystem_list"};
  EXPECT_EQ(names, expected);
}

TEST_F(NvmfTgtRpcTest, BdevCreateListDelete) {
  Answer created = rpc("bdev_create", {{"type", "malloc"},
                                       {"name", "Malloc0"},
                                       {"num_blocks", 2048},
                                       {"block_size", 4096},
                                       {"uuid", "11111111-2222-4333-8444-555555555555"}});
  ASSERT_TRUE(created.ok) << created;
  EXPECT_EQ(created.result, Json({{"name", "Malloc0"}}));
  created = rpc("bdev_create", {{"type", "null"},
                                {"name", "Null0"},
                                {"num_blocks", 1000},
                                {"completion_delay_ns", 5000},
                                {"zero_read_buffers", true}});
  ASSERT_TRUE(created.ok) << created;

  const Answer list = rpc("bdev_list");
  ASSERT_TRUE(list.ok) << list;
  ASSERT_EQ(list.result.size(), 2u);
  const Json& malloc = list.result[0];  // name order
  EXPECT_EQ(malloc["name"], "Malloc0");
  EXPECT_EQ(malloc["type"], "malloc");
  EXPECT_EQ(malloc["block_size"], 4096);
  EXPECT_EQ(malloc["num_blocks"], 2048);
  EXPECT_EQ(malloc["uuid"], "11111111-2222-4333-8444-555555555555");
  EXPECT_EQ(malloc["queue_depth"], 128);
  EXPECT_EQ(malloc["channels"], 0);
  EXPECT_EQ(malloc["removed"], false);
  EXPECT_EQ(malloc["config"]["type"], "malloc");
  const Json& null = list.result[1];
  EXPECT_EQ(null["name"], "Null0");
  EXPECT_EQ(null["type"], "null");
  EXPECT_EQ(null["config"]["completion_delay_ns"], 5000);
  EXPECT_EQ(null["config"]["zero_read_buffers"], true);
  EXPECT_EQ(null["io_types"].size(), 5u);

  ASSERT_TRUE(rpc("bdev_delete", {{"name", "Malloc0"}}).ok);
  const Answer after = rpc("bdev_list");
  ASSERT_EQ(after.result.size(), 1u);
  EXPECT_EQ(after.result[0]["name"], "Null0");
  EXPECT_EQ(registry_.find("Malloc0"), nullptr);
  ASSERT_EQ(context_->bdevs.size(), 1u);
  EXPECT_EQ(context_->bdevs[0].name, "Null0");
}

TEST_F(NvmfTgtRpcTest, BdevCreateErrorsChangeNothing) {
  ASSERT_TRUE(rpc("bdev_create", {{"type", "malloc"}, {"name", "Malloc0"}, {"num_blocks", 64}}).ok);
  const Json before = rpc("bdev_list").result;

  Answer answer = rpc("bdev_create", {{"type", "malloc"}, {"num_blocks", 64}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.name: required");
  answer = rpc("bdev_create", {{"type", "malloc"}, {"name", "M1"}, {"blocksize", 512}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.blocksize: unknown key");
  answer = rpc("bdev_create", {{"type", "floppy"}, {"name", "F"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message,
            "params.type: \"floppy\" is not a bdev type (null, malloc, uring, nvme, delay, error)");
  answer = rpc("bdev_create", {{"type", "malloc"}, {"name", "M1"}, {"block_size", 1000}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.block_size: 1000 is not a power of two in [512, 65536]");
  answer = rpc("bdev_create", {{"type", "malloc"}, {"name", "Malloc0"}, {"num_blocks", 64}});
  EXPECT_EQ(answer.code, code::exists) << answer;
  EXPECT_EQ(answer.message, "bdev \"Malloc0\" exists");
  // The backend refuses (a uring file that is not there): the message names the bdev.
  answer = rpc("bdev_create", {{"type", "uring"}, {"name", "U0"}, {"path", "/nonexistent/u0"}});
  EXPECT_EQ(answer.code, code::failed) << answer;
  EXPECT_EQ(answer.message.rfind("cannot create bdev \"U0\": ", 0), 0u) << answer;

  EXPECT_EQ(rpc("bdev_list").result, before);
  EXPECT_EQ(registry_.size(), 1u);
  EXPECT_EQ(context_->bdevs.size(), 1u);
}

TEST_F(NvmfTgtRpcTest, BdevCreateNvmeOpensTheControllerOnce) {
  Answer answer =
      rpc("bdev_create", {{"type", "nvme"}, {"name", "Nvme0n1"}, {"pci", "0000:00:04.0"}});
  ASSERT_TRUE(answer.ok) << answer;
  const Json list = rpc("bdev_list").result;
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["type"], "nvme");
  EXPECT_GT(list[0]["num_blocks"].get<uint64_t>(), 0u);
  EXPECT_EQ(list[0]["config"], Json({{"type", "nvme"},
                                     {"name", "Nvme0n1"},
                                     {"pci", "0000:00:04.0"},
                                     {"nsid", 1},
                                     {"queue_depth", 128}}));
  EXPECT_EQ(nvme_pool_.size(), 1u);
  answer = rpc("bdev_create",
               {{"type", "nvme"}, {"name", "Nvme0n9"}, {"pci", "0000:00:04.0"}, {"nsid", 9}});
  EXPECT_EQ(answer.code, code::failed) << answer;
  EXPECT_EQ(answer.message.rfind("cannot create bdev \"Nvme0n9\": ", 0), 0u) << answer;
  answer = rpc("bdev_create", {{"type", "nvme"}, {"name", "N"}, {"pci", "1:2.3"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(rpc("bdev_list").result.size(), 1u);
  ASSERT_TRUE(rpc("bdev_delete", {{"name", "Nvme0n1"}}).ok);
}

TEST_F(NvmfTgtRpcTest, BdevDeleteErrors) {
  Answer answer = rpc("bdev_delete", {{"name", "Foo"}});
  EXPECT_EQ(answer.code, code::not_found) << answer;
  EXPECT_EQ(answer.message, "no bdev named \"Foo\"");
  answer = rpc("bdev_delete", Json::object());
  EXPECT_EQ(answer.code, code::invalid_params) << answer;

  ASSERT_TRUE(rpc("bdev_create", {{"type", "malloc"}, {"name", "Malloc0"}, {"num_blocks", 64}}).ok);
  ASSERT_TRUE(rpc("subsystem_create", {{"nqn", kNqn}}).ok);
  ASSERT_TRUE(rpc("namespace_add", {{"nqn", kNqn}, {"bdev", "Malloc0"}}).ok);
  answer = rpc("bdev_delete", {{"name", "Malloc0"}});
  EXPECT_EQ(answer.code, code::busy) << answer;
  EXPECT_EQ(answer.message, std::string("bdev Malloc0 is used by namespace 1 of ") + kNqn);
  EXPECT_NE(registry_.find("Malloc0"), nullptr);
  EXPECT_EQ(subsystem(kNqn)["namespaces"].size(), 1u);
  // Free once the namespace is gone.
  ASSERT_TRUE(rpc("namespace_remove", {{"nqn", kNqn}, {"nsid", 1}}).ok);
  answer = rpc("bdev_delete", {{"name", "Malloc0"}});
  EXPECT_TRUE(answer.ok) << answer;
}

TEST_F(NvmfTgtRpcTest, DelayAndErrorBdevsAtRunTime) {
  ASSERT_TRUE(rpc("bdev_create", {{"type", "malloc"}, {"name", "M0"}, {"num_blocks", 64}}).ok);
  ASSERT_TRUE(rpc("bdev_create", {{"type", "malloc"}, {"name", "M1"}, {"num_blocks", 64}}).ok);
  Answer answer = rpc("bdev_create", {{"type", "error"}, {"name", "E0"}, {"base_bdev", "M0"}});
  ASSERT_TRUE(answer.ok) << answer;
  answer = rpc("bdev_create",
               {{"type", "delay"}, {"name", "D0"}, {"base_bdev", "M1"}, {"read_latency_us", 100}});
  ASSERT_TRUE(answer.ok) << answer;
  // A base cannot be taken twice, be a namespace, or go before the bdev on it.
  answer = rpc("bdev_create", {{"type", "delay"}, {"name", "D1"}, {"base_bdev", "M0"}});
  EXPECT_EQ(answer.code, code::failed) << answer;
  EXPECT_EQ(answer.message, "base_bdev: \"M0\" is already the base of \"E0\"");
  answer = rpc("bdev_create", {{"type", "delay"}, {"name", "D1"}, {"base_bdev", "M9"}});
  EXPECT_EQ(answer.message, "base_bdev: no bdev named \"M9\"") << answer;
  ASSERT_TRUE(rpc("subsystem_create", {{"nqn", kNqn}}).ok);
  answer = rpc("namespace_add", {{"nqn", kNqn}, {"bdev", "M1"}});
  EXPECT_EQ(answer.code, code::busy) << answer;
  EXPECT_EQ(answer.message, "bdev: \"M1\" is the base of delay bdev \"D0\"; name that one instead");
  answer = rpc("bdev_delete", {{"name", "M0"}});
  EXPECT_EQ(answer.code, code::busy) << answer;
  EXPECT_EQ(answer.message, "bdev M0 is the base of bdev E0; delete that one first");

  // The rule, set and read back; bdev_list and save_config show it.
  answer = rpc("bdev_error_inject",
               {{"name", "E0"}, {"io_types", {"read"}}, {"count", 2}, {"sct", 2}, {"sc", 0x81}});
  ASSERT_TRUE(answer.ok) << answer;
  EXPECT_EQ(answer.result, Json::parse(R"({"io_types": ["read"], "action": "fail", "count": 2,
                                           "every_nth": 1, "sct": 2, "sc": 129, "dnr": false})"));
  const Json rule = answer.result;
  for (const Json& entry : rpc("bdev_list").result) {
    if (entry["name"] == "E0") {
      EXPECT_EQ(entry["config"]["inject"], rule);
      EXPECT_EQ(entry["config"]["base_bdev"], "M0");
      EXPECT_EQ(entry["type"], "error");
    }
  }
  const Json saved = rpc("save_config").result;
  ASSERT_EQ(saved["bdevs"].size(), 4u);
  EXPECT_EQ(saved["bdevs"][2]["name"], "E0");  // creation order: bases first
  EXPECT_EQ(saved["bdevs"][2]["inject"], rule);
  EXPECT_EQ(saved["bdevs"][3]["read_latency_us"], 100);
  std::string message;
  ASSERT_TRUE(target::parse_target_config(saved.dump(), &message)) << message;

  // Errors name the parameter; the rule stays.
  answer = rpc("bdev_error_inject", {{"name", "E0"}, {"nth", 2}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.nth: unknown key");
  answer = rpc("bdev_error_inject", {{"name", "E0"}, {"sct", 9}});
  EXPECT_EQ(answer.message, "params.sct: 9 is outside [0, 7]") << answer;
  answer = rpc("bdev_error_inject", {{"name", "M1"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.name: bdev \"M1\" is a malloc bdev, not an error bdev");
  answer = rpc("bdev_error_inject", {{"name", "E9"}});
  EXPECT_EQ(answer.code, code::not_found) << answer;
  EXPECT_EQ(bdev::as_error_bdev(*registry_.find("E0"))->injection().count, 2u);
  // Cleared: io_types [].
  answer = rpc("bdev_error_inject", {{"name", "E0"}, {"io_types", Json::array()}});
  ASSERT_TRUE(answer.ok) << answer;
  EXPECT_EQ(bdev::as_error_bdev(*registry_.find("E0"))->injection().io_types, 0u);

  answer = rpc("bdev_error_release_dropped", {{"name", "E0"}, {"fate", "abort"}});
  ASSERT_TRUE(answer.ok) << answer;
  EXPECT_EQ(answer.result, Json({{"failed", 0}, {"dropped", 0}}));
  answer = rpc("bdev_error_release_dropped", {{"name", "E0"}, {"fate", "later"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.fate: \"later\" is not submit or abort");

  answer = rpc("bdev_delay_stall", {{"name", "D0"}, {"stall", true}});
  ASSERT_TRUE(answer.ok) << answer;
  EXPECT_TRUE(bdev::as_delay_bdev(*registry_.find("D0"))->stalled());
  ASSERT_TRUE(rpc("bdev_delay_stall", {{"name", "D0"}, {"stall", false}}).ok);
  EXPECT_FALSE(bdev::as_delay_bdev(*registry_.find("D0"))->stalled());
  answer = rpc("bdev_delay_stall", {{"name", "E0"}, {"stall", true}});
  EXPECT_EQ(answer.message, "params.name: bdev \"E0\" is not a delay bdev") << answer;
  answer = rpc("bdev_delay_stall", {{"name", "D0"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;

  // Top down they go.
  ASSERT_TRUE(rpc("bdev_delete", {{"name", "E0"}}).ok);
  ASSERT_TRUE(rpc("bdev_delete", {{"name", "M0"}}).ok);
}

TEST_F(NvmfTgtRpcTest, SubsystemCreateListDelete) {
  Answer answer = rpc("subsystem_create", {{"nqn", kNqn},
                                           {"serial_number", "SN0001"},
                                           {"model_number", "rpc model"},
                                           {"allow_any_host", false},
                                           {"hosts", {kHostNqn}},
                                           {"max_namespaces", 8}});
  ASSERT_TRUE(answer.ok) << answer;
  EXPECT_EQ(answer.result, Json({{"nqn", kNqn}}));
  const Json list = rpc("subsystem_list").result;
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["nqn"], "nqn.2014-08.org.nvmexpress.discovery");
  EXPECT_EQ(list[0]["subtype"], "discovery");
  EXPECT_EQ(list[1], Json({{"nqn", kNqn},
                           {"subtype", "nvme"},
                           {"serial_number", "SN0001"},
                           {"model_number", "rpc model"},
                           {"allow_any_host", false},
                           {"hosts", {kHostNqn}},
                           {"max_namespaces", 8},
                           {"namespaces", Json::array()},
                           {"listeners", Json::array()},
                           {"controllers", Json::array()}}));
  const uint64_t generation = target_->discovery_generation();
  answer = rpc("subsystem_delete", {{"nqn", kNqn}});
  ASSERT_TRUE(answer.ok) << answer;
  EXPECT_TRUE(subsystem(kNqn).is_null());
  EXPECT_GT(target_->discovery_generation(), generation);
  // The NQN is free again.
  EXPECT_TRUE(rpc("subsystem_create", {{"nqn", kNqn}}).ok);
  EXPECT_EQ(subsystem(kNqn)["max_namespaces"], 32);  // TargetOpts::max_namespaces_default
}

TEST_F(NvmfTgtRpcTest, SubsystemCreateErrorsAddNothing) {
  ASSERT_TRUE(rpc("subsystem_create", {{"nqn", kNqn}}).ok);
  const Json before = rpc("subsystem_list").result;
  const uint64_t generation = target_->discovery_generation();

  Answer answer =
      rpc("subsystem_create", {{"nqn", kOtherNqn}, {"serial_number", std::string(21, 'S')}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.serial_number: must be at most 20 printable ASCII characters");
  answer = rpc("subsystem_create", {{"nqn", kOtherNqn}, {"model_number", "tab\there"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  // (A name without the nqn. form passes with a warning, as on nvmet; a '/' does not.)
  answer = rpc("subsystem_create", {{"nqn", "bad/name"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.nqn: \"bad/name\" is not a valid NQN");
  answer = rpc("subsystem_create", {{"nqn", "nqn.2014-08.org.nvmexpress.discovery"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  answer = rpc("subsystem_create", {{"nqn", kOtherNqn}, {"max_namespaces", 2000}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.max_namespaces: 2000 is outside [1, 1024]");
  answer = rpc("subsystem_create", {{"nqn", kOtherNqn}, {"hosts", {"bad host"}}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  answer = rpc("subsystem_create", {{"nqn", kOtherNqn}, {"namespaces", Json::array()}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;  // namespace_add does those
  answer = rpc("subsystem_create", Json::object());
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.nqn: required");
  answer = rpc("subsystem_create", {{"nqn", kNqn}});
  EXPECT_EQ(answer.code, code::exists) << answer;
  EXPECT_EQ(answer.message, std::string("subsystem ") + kNqn + " exists");

  EXPECT_EQ(rpc("subsystem_list").result, before);
  EXPECT_EQ(target_->discovery_generation(), generation);
}

TEST_F(NvmfTgtRpcTest, SubsystemDeleteErrors) {
  Answer answer = rpc("subsystem_delete", {{"nqn", kNqn}});
  EXPECT_EQ(answer.code, code::not_found) << answer;
  EXPECT_EQ(answer.message, std::string("no subsystem named \"") + kNqn + "\"");
  answer = rpc("subsystem_delete", {{"nqn", "nqn.2014-08.org.nvmexpress.discovery"}});
  EXPECT_EQ(answer.code, code::failed) << answer;
  EXPECT_EQ(answer.message, "the discovery subsystem is built in and cannot be deleted");
  EXPECT_EQ(rpc("subsystem_list").result.size(), 1u);
}

TEST_F(NvmfTgtRpcTest, NamespaceAddAndRemove) {
  ASSERT_TRUE(rpc("bdev_create", {{"type", "malloc"},
                                  {"name", "Malloc0"},
                                  {"num_blocks", 64},
                                  {"uuid", "11111111-2222-4333-8444-555555555555"}})
                  .ok);
  ASSERT_TRUE(rpc("bdev_create", {{"type", "null"}, {"name", "Null0"}, {"num_blocks", 64}}).ok);
  ASSERT_TRUE(rpc("subsystem_create", {{"nqn", kNqn}, {"max_namespaces", 8}}).ok);

  Answer answer = rpc("namespace_add", {{"nqn", kNqn}, {"bdev", "Malloc0"}});
  ASSERT_TRUE(answer.ok) << answer;
  EXPECT_EQ(answer.result, Json({{"nsid", 1}}));
  answer = rpc("namespace_add", {{"nqn", kNqn},
                                 {"bdev", "Null0"},
                                 {"nsid", 5},
                                 {"uuid", "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"},
                                 {"nguid", "00112233445566778899aabbccddeeff"},
                                 {"eui64", "0123456789abcdef"}});
  ASSERT_TRUE(answer.ok) << answer;
  EXPECT_EQ(answer.result, Json({{"nsid", 5}}));
  const Json namespaces = subsystem(kNqn)["namespaces"];
  ASSERT_EQ(namespaces.size(), 2u);
  EXPECT_EQ(namespaces[0], Json({{"nsid", 1},
                                 {"bdev", "Malloc0"},
                                 {"uuid", "11111111-2222-4333-8444-555555555555"},
                                 {"nguid", nullptr},
                                 {"eui64", nullptr}}));
  EXPECT_EQ(namespaces[1], Json({{"nsid", 5},
                                 {"bdev", "Null0"},
                                 {"uuid", "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"},
                                 {"nguid", "00112233445566778899aabbccddeeff"},
                                 {"eui64", "0123456789abcdef"}}));

  answer = rpc("namespace_remove", {{"nqn", kNqn}, {"nsid", 5}});
  ASSERT_TRUE(answer.ok) << answer;
  EXPECT_EQ(subsystem(kNqn)["namespaces"].size(), 1u);
}

TEST_F(NvmfTgtRpcTest, NamespaceErrorsChangeNothing) {
  ASSERT_TRUE(rpc("bdev_create", {{"type", "malloc"}, {"name", "Malloc0"}, {"num_blocks", 64}}).ok);
  ASSERT_TRUE(rpc("subsystem_create", {{"nqn", kNqn}, {"max_namespaces", 2}}).ok);
  ASSERT_TRUE(rpc("namespace_add", {{"nqn", kNqn}, {"bdev", "Malloc0"}, {"nsid", 2}}).ok);
  const Json before = rpc("subsystem_list").result;

  Answer answer = rpc("namespace_add", {{"nqn", kNqn}, {"bdev", "Nope"}});
  EXPECT_EQ(answer.code, code::not_found) << answer;
  EXPECT_EQ(answer.message, "no bdev named \"Nope\"");
  answer = rpc("namespace_add", {{"nqn", kOtherNqn}, {"bdev", "Malloc0"}});
  EXPECT_EQ(answer.code, code::not_found) << answer;
  EXPECT_EQ(answer.message, std::string("no subsystem named \"") + kOtherNqn + "\"");
  answer = rpc("namespace_add", {{"nqn", kNqn}, {"bdev", "Malloc0"}, {"nsid", 2}});
  EXPECT_EQ(answer.code, code::exists) << answer;
  EXPECT_EQ(answer.message, std::string("subsystem ") + kNqn + " already has namespace 2");
  answer = rpc("namespace_add", {{"nqn", kNqn}, {"bdev", "Malloc0"}, {"nsid", 3}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.nsid: 3 is outside [1, 2]");
  answer = rpc("namespace_add", {{"nqn", kNqn}, {"bdev", "Malloc0"}, {"nguid", "12"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.nguid: \"12\" is not 32 hex digits");
  answer = rpc("namespace_add", {{"nqn", kNqn}, {"bdev", "Malloc0"}, {"uuid", "x"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  answer = rpc("namespace_add", {{"nqn", kNqn}, {"bdev", "Malloc0"}, {"colour", "red"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  answer =
      rpc("namespace_add", {{"nqn", "nqn.2014-08.org.nvmexpress.discovery"}, {"bdev", "Malloc0"}});
  EXPECT_EQ(answer.code, code::not_found) << answer;
  answer = rpc("namespace_remove", {{"nqn", kNqn}, {"nsid", 3}});
  EXPECT_EQ(answer.code, code::not_found) << answer;
  EXPECT_EQ(answer.message, std::string("subsystem ") + kNqn + " has no namespace 3");
  answer = rpc("namespace_remove", {{"nqn", kNqn}, {"nsid", 0}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  answer = rpc("namespace_remove", {{"nqn", kOtherNqn}, {"nsid", 1}});
  EXPECT_EQ(answer.code, code::not_found) << answer;
  EXPECT_EQ(rpc("subsystem_list").result, before);

  // NSID 1 is still free; after it, none is.
  ASSERT_TRUE(rpc("namespace_add", {{"nqn", kNqn}, {"bdev", "Malloc0"}}).ok);
  const Json full = rpc("subsystem_list").result;
  answer = rpc("namespace_add", {{"nqn", kNqn}, {"bdev", "Malloc0"}});
  EXPECT_EQ(answer.code, code::failed) << answer;
  EXPECT_EQ(answer.message,
            std::string("subsystem ") + kNqn + " has no free NSID (max_namespaces 2)");
  EXPECT_EQ(rpc("subsystem_list").result, full);
}

TEST_F(NvmfTgtRpcTest, ListenerAddOpensAndRemoveClosesTheRdmaListener) {
  make_served_subsystem(kNqn, "Malloc0", 4420);
  EXPECT_TRUE(listening(kAddress, 4420));
  EXPECT_EQ(
      subsystem(kNqn)["listeners"],
      Json::array(
          {{{"trtype", "rdma"}, {"adrfam", "ipv4"}, {"traddr", kAddress}, {"trsvcid", "4420"}}}));
  // A host reaches the subsystem through it.
  RawHost& host = new_host();
  ASSERT_NE(connect_controller(host, kNqn, 4420), 0);

  // A second subsystem on the same address: the listener is shared.
  ASSERT_TRUE(rpc("subsystem_create", {{"nqn", kOtherNqn}}).ok);
  ASSERT_TRUE(rpc("listener_add", {{"nqn", kOtherNqn},
                                   {"traddr", kAddress},
                                   {"trsvcid", "4420"},
                                   {"adrfam", "ipv4"},
                                   {"trtype", "rdma"}})
                  .ok);
  ASSERT_TRUE(rpc("listener_remove", {{"nqn", kNqn}, {"traddr", kAddress}, {"trsvcid", 4420}}).ok);
  EXPECT_TRUE(listening(kAddress, 4420)) << "still used by " << kOtherNqn;
  EXPECT_EQ(subsystem(kNqn)["listeners"], Json::array());
  ASSERT_TRUE(rpc("listener_remove", {{"nqn", kOtherNqn}, {"traddr", kAddress}}).ok);
  EXPECT_FALSE(listening(kAddress, 4420));
  // The connection made through it stays; new ones are refused.
  EXPECT_EQ(target_->controller_count(kNqn), 1u);
  RawHost& late = new_host();
  EXPECT_FALSE(late.connect(kAddress, 4420, 0, 32, 31).established);
}

TEST_F(NvmfTgtRpcTest, ListenerWildcardServesTheAddressesOnItsPort) {
  ASSERT_TRUE(rpc("subsystem_create", {{"nqn", kNqn}}).ok);
  ASSERT_TRUE(rpc("subsystem_create", {{"nqn", kOtherNqn}}).ok);
  ASSERT_TRUE(rpc("listener_add", {{"nqn", kNqn}, {"traddr", "0.0.0.0"}}).ok);
  // 10.0.0.1:4420 is served by 0.0.0.0:4420 already: no second listener.
  Answer answer = rpc("listener_add", {{"nqn", kOtherNqn}, {"traddr", kAddress}});
  ASSERT_TRUE(answer.ok) << answer;
  EXPECT_TRUE(listening("0.0.0.0", 4420));
  EXPECT_FALSE(listening(kAddress, 4420));
  // The wildcard goes: the address another subsystem lists gets a listener of its own.
  ASSERT_TRUE(rpc("listener_remove", {{"nqn", kNqn}, {"traddr", "0.0.0.0"}}).ok);
  EXPECT_FALSE(listening("0.0.0.0", 4420));
  EXPECT_TRUE(listening(kAddress, 4420));
}

TEST_F(NvmfTgtRpcTest, ListenerErrorsChangeNothing) {
  ASSERT_TRUE(rpc("subsystem_create", {{"nqn", kNqn}}).ok);
  ASSERT_TRUE(rpc("listener_add", {{"nqn", kNqn}, {"traddr", kAddress}}).ok);
  const Json before = rpc("subsystem_list").result;
  const uint64_t generation = target_->discovery_generation();

  Answer answer = rpc("listener_add", {{"nqn", kNqn}, {"traddr", kAddress}, {"trsvcid", "4420"}});
  EXPECT_EQ(answer.code, code::exists) << answer;
  EXPECT_EQ(answer.message, std::string("subsystem ") + kNqn + " already listens on 10.0.0.1:4420");
  answer = rpc("listener_add", {{"nqn", kNqn}, {"traddr", "10.0.0.300"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.traddr: \"10.0.0.300\" is not an ipv4 address");
  answer = rpc("listener_add", {{"nqn", kNqn}, {"traddr", kAddress}, {"trsvcid", "0"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  answer = rpc("listener_add", {{"nqn", kNqn}, {"traddr", kAddress}, {"trtype", "tcp"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.trtype: \"tcp\" is not supported (rdma)");
  answer = rpc("listener_add", {{"nqn", kOtherNqn}, {"traddr", kAddress}});
  EXPECT_EQ(answer.code, code::not_found) << answer;
  answer = rpc("listener_add", {{"nqn", kNqn}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.traddr: required");

  // Someone else (outside the transport) holds 10.0.0.2:4420: the CM refuses, and the
  // subsystem does not list an address nobody serves.
  auto channel = provider_->create_cm_channel();
  ASSERT_TRUE(channel);
  auto squatter = (*channel)->create_id();
  ASSERT_TRUE(squatter);
  ASSERT_TRUE((*squatter)->listen("10.0.0.2", 4420, 16));
  answer = rpc("listener_add", {{"nqn", kNqn}, {"traddr", "10.0.0.2"}});
  EXPECT_EQ(answer.code, code::failed) << answer;
  EXPECT_EQ(answer.message.rfind("cannot listen on 10.0.0.2:4420: ", 0), 0u) << answer;

  answer = rpc("listener_remove", {{"nqn", kNqn}, {"traddr", kAddress}, {"trsvcid", "4421"}});
  EXPECT_EQ(answer.code, code::not_found) << answer;
  EXPECT_EQ(answer.message, std::string("subsystem ") + kNqn + " does not listen on 10.0.0.1:4421");
  answer = rpc("listener_remove", {{"nqn", kOtherNqn}, {"traddr", kAddress}});
  EXPECT_EQ(answer.code, code::not_found) << answer;

  EXPECT_EQ(rpc("subsystem_list").result, before);
  EXPECT_EQ(target_->discovery_generation(), generation);
  EXPECT_TRUE(listening(kAddress, 4420));
  EXPECT_FALSE(listening("10.0.0.2", 4420));
}

TEST_F(NvmfTgtRpcTest, HostsAndAllowAnyHost) {
  ASSERT_TRUE(rpc("subsystem_create", {{"nqn", kNqn}}).ok);
  Answer answer = rpc("host_add", {{"nqn", kNqn}, {"host", kHostNqn}});
  ASSERT_TRUE(answer.ok) << answer;
  EXPECT_EQ(subsystem(kNqn)["hosts"], Json::array({kHostNqn}));
  answer = rpc("host_add", {{"nqn", kNqn}, {"host", kHostNqn}});
  EXPECT_EQ(answer.code, code::exists) << answer;
  EXPECT_EQ(answer.message, std::string("subsystem ") + kNqn + " already allows host " + kHostNqn);
  answer = rpc("host_add", {{"nqn", kNqn}, {"host", "not an nqn"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.host: \"not an nqn\" is not a valid NQN");
  answer = rpc("host_add", {{"nqn", kOtherNqn}, {"host", kHostNqn}});
  EXPECT_EQ(answer.code, code::not_found) << answer;
  EXPECT_EQ(subsystem(kNqn)["hosts"], Json::array({kHostNqn}));

  answer = rpc("host_remove", {{"nqn", kNqn}, {"host", kHostNqn}});
  ASSERT_TRUE(answer.ok) << answer;
  EXPECT_EQ(subsystem(kNqn)["hosts"], Json::array());
  answer = rpc("host_remove", {{"nqn", kNqn}, {"host", kHostNqn}});
  EXPECT_EQ(answer.code, code::not_found) << answer;
  EXPECT_EQ(answer.message, std::string("subsystem ") + kNqn + " does not list host " + kHostNqn);

  ASSERT_TRUE(rpc("subsystem_allow_any_host", {{"nqn", kNqn}, {"allow", true}}).ok);
  EXPECT_EQ(subsystem(kNqn)["allow_any_host"], true);
  ASSERT_TRUE(rpc("subsystem_allow_any_host", {{"nqn", kNqn}, {"allow", false}}).ok);
  EXPECT_EQ(subsystem(kNqn)["allow_any_host"], false);
  answer = rpc("subsystem_allow_any_host", {{"nqn", kNqn}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message, "params.allow: required");
  answer = rpc("subsystem_allow_any_host", {{"nqn", kNqn}, {"allow", "yes"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  answer = rpc("subsystem_allow_any_host", {{"nqn", kOtherNqn}, {"allow", true}});
  EXPECT_EQ(answer.code, code::not_found) << answer;
  EXPECT_EQ(subsystem(kNqn)["allow_any_host"], false);
}

TEST_F(NvmfTgtRpcTest, SubsystemListShowsControllersAndQueues) {
  make_served_subsystem(kNqn, "Malloc0", 4420);
  RawHost& admin = new_host();
  const uint16_t cntlid = connect_controller(admin, kNqn, 4420);
  ASSERT_NE(cntlid, 0);
  RawHost& io = new_host();
  ASSERT_TRUE(io.connect(kAddress, 4420, 1, 16, 15).established);
  ASSERT_TRUE(io.fabrics_connect(1, 16, cntlid, kNqn, kHostNqn).ok());

  const Json controllers = subsystem(kNqn)["controllers"];
  ASSERT_EQ(controllers.size(), 1u);
  EXPECT_EQ(controllers[0]["cntlid"], cntlid);
  EXPECT_EQ(controllers[0]["hostnqn"], kHostNqn);
  EXPECT_EQ(controllers[0]["hostid"].get<std::string>().size(), 36u);
  EXPECT_EQ(controllers[0]["qpairs"],
            Json::array({{{"qid", 0}, {"depth", 32}}, {{"qid", 1}, {"depth", 16}}}));

  // bdev_delete refuses while the namespace is in use, and the I/O queue keeps its channel.
  const Answer answer = rpc("bdev_delete", {{"name", "Malloc0"}});
  EXPECT_EQ(answer.code, code::busy) << answer;
}

TEST_F(NvmfTgtRpcTest, SubsystemDeleteDisconnectsConnectedHosts) {
  make_served_subsystem(kNqn, "Malloc0", 4420);
  RawHost& admin = new_host();
  const uint16_t cntlid = connect_controller(admin, kNqn, 4420);
  ASSERT_NE(cntlid, 0);
  RawHost& io = new_host();
  ASSERT_TRUE(io.connect(kAddress, 4420, 1, 32, 31).established);
  ASSERT_TRUE(io.fabrics_connect(1, 32, cntlid, kNqn, kHostNqn).ok());
  // I/O opens the reactor's channel to the bdev.
  spec::Sqe write = spec::make_sqe(spec::nvm_opcode::write, io.next_cid(), 1);
  spec::rw_set_range(write, 0, 8);
  write.sgl1 = spec::make_keyed_data_block(io.address(0), 4096, io.rkey(), false);
  RawCompletion done;
  ASSERT_TRUE(io.execute(write, &done));
  ASSERT_TRUE(done.ok());
  ASSERT_EQ(target_->controller_count(kNqn), 1u);

  const Answer answer = rpc("subsystem_delete", {{"nqn", kNqn}});
  ASSERT_TRUE(answer.ok) << answer;
  // When the call returns the controller is gone, and both connections were dropped.
  EXPECT_EQ(target_->removed_controller_count(kNqn), 0u);
  EXPECT_TRUE(admin.wait_disconnected());
  EXPECT_TRUE(io.wait_disconnected());
  EXPECT_TRUE(subsystem(kNqn).is_null());
  EXPECT_FALSE(listening(kAddress, 4420)) << "no subsystem lists 10.0.0.1:4420 any more";

  // A host reconnecting finds no listener; with one (another subsystem's), no such NQN.
  RawHost& again = new_host();
  EXPECT_FALSE(again.connect(kAddress, 4420, 0, 32, 31).established);
  ASSERT_TRUE(rpc("subsystem_create", {{"nqn", kOtherNqn}, {"allow_any_host", true}}).ok);
  ASSERT_TRUE(rpc("listener_add", {{"nqn", kOtherNqn}, {"traddr", kAddress}}).ok);
  RawHost& retry = new_host();
  ASSERT_TRUE(retry.connect(kAddress, 4420, 0, 32, 31).established);
  EXPECT_FALSE(retry.fabrics_connect(0, 32, 0xFFFF, kNqn, kHostNqn).ok());

  // Its bdev is free now.
  const Answer deleted = rpc("bdev_delete", {{"name", "Malloc0"}});
  EXPECT_TRUE(deleted.ok) << deleted;
}

TEST_F(NvmfTgtRpcTest, StatsReportWhatIsMeasured) {
  make_served_subsystem(kNqn, "Malloc0", 4420);
  RawHost& admin = new_host();
  const uint16_t cntlid = connect_controller(admin, kNqn, 4420);
  ASSERT_NE(cntlid, 0);
  RawHost& io = new_host();
  ASSERT_TRUE(io.connect(kAddress, 4420, 1, 32, 31).established);
  ASSERT_TRUE(io.fabrics_connect(1, 32, cntlid, kNqn, kHostNqn).ok());
  spec::Sqe write = spec::make_sqe(spec::nvm_opcode::write, io.next_cid(), 1);
  spec::rw_set_range(write, 0, 8);
  write.sgl1 = spec::make_keyed_data_block(io.address(0), 4096, io.rkey(), false);
  RawCompletion done;
  ASSERT_TRUE(io.execute(write, &done));
  ASSERT_TRUE(done.ok());

  const Answer answer = rpc("stats");
  ASSERT_TRUE(answer.ok) << answer;
  const Json& stats = answer.result;
  ASSERT_EQ(stats["reactors"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Json& reactor = stats["reactors"][i];
    EXPECT_EQ(reactor["index"], i);
    for (const char* key : {"name", "iterations", "busy_iterations", "idle_iterations", "messages",
                            "timer_fires", "sleeps"}) {
      EXPECT_TRUE(reactor.contains(key)) << key;
    }
    EXPECT_GT(reactor["iterations"].get<uint64_t>(), 0u);
  }
  EXPECT_EQ(stats["transport"]["trtype"], "rdma");
  EXPECT_EQ(stats["transport"]["connections"], 2);
  EXPECT_EQ(stats["transport"]["connects_accepted"], 2);
  EXPECT_EQ(stats["transport"]["connects_rejected"], 0);
  // Nothing had to wait or was left behind in this quiet run.
  EXPECT_EQ(stats["transport"]["buffer_waits"], 0);
  EXPECT_EQ(stats["transport"]["send_queue_waits"], 0);
  EXPECT_EQ(stats["target"]["bdev_busy_waits"], 0);
  EXPECT_EQ(stats["target"]["abandoned_qpairs"], 0);
  EXPECT_EQ(stats["target"]["late_completions"], 0);
  ASSERT_EQ(stats["bdevs"].size(), 1u);
  const Json& bdev = stats["bdevs"][0];
  EXPECT_EQ(bdev["name"], "Malloc0");
  EXPECT_EQ(bdev["ops"]["write"], 1);
  EXPECT_EQ(bdev["bytes"]["write"], 4096);
  EXPECT_EQ(bdev["ops"]["read"], 0);
  EXPECT_EQ(bdev["errors"], 0);
  EXPECT_EQ(bdev["completions"], 1);
  EXPECT_GE(bdev["latency_ns_max"].get<uint64_t>(), 0u);
  EXPECT_TRUE(bdev.contains("latency_ns_total"));
  EXPECT_EQ(rpc("stats", {{"verbose", true}}).code, code::invalid_params);
}

// Device async events injected on the target's device show in transport.async_events, one
// count per kind under rdma-core's name; COMM_EST on a live queue's QP also reaches the CM.
TEST_F(NvmfTgtRpcTest, StatsCountDeviceAsyncEventsByKind) {
  make_served_subsystem(kNqn, "Malloc0", 4420);
  RawHost& admin = new_host();
  ASSERT_NE(connect_controller(admin, kNqn, 4420), 0);
  const std::vector<uint32_t> qps = provider_->qp_nums();
  ASSERT_EQ(qps.size(), 1u);
  auto inject = [&](verbs::AsyncEventType type, uint32_t qp_num = 0) {
    verbs::AsyncEvent event;
    event.type = type;
    event.qp_num = qp_num;
    event.port_num = 1;
    return static_cast<bool>(provider_->inject_async_event(event));
  };
  ASSERT_TRUE(inject(verbs::AsyncEventType::port_error));
  ASSERT_TRUE(inject(verbs::AsyncEventType::port_active));
  ASSERT_TRUE(inject(verbs::AsyncEventType::port_error));
  ASSERT_TRUE(inject(verbs::AsyncEventType::srq_limit_reached));
  ASSERT_TRUE(inject(verbs::AsyncEventType::comm_established, qps[0]));

  // The acceptor reads events at its own pace, on its own thread.
  Json transport;
  for (int i = 0; i < 3000; ++i) {
    transport = rpc("stats").result["transport"];
    if (transport.contains("established_notifications") &&
        transport["established_notifications"] == 1 && transport["async_events"]["COMM_EST"] == 1)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(transport.contains("async_events")) << transport.dump();
  Json events = transport["async_events"];  // a copy: [] of a name it lacks gives null
  EXPECT_EQ(events.size(), verbs::kAsyncEventTypeCount) << "every kind, zero or not";
  EXPECT_EQ(events["PORT_ERR"], 2);
  EXPECT_EQ(events["PORT_ACTIVE"], 1);
  EXPECT_EQ(events["SRQ_LIMIT_REACHED"], 1);
  EXPECT_EQ(events["COMM_EST"], 1);
  for (const char* quiet : {"QP_FATAL", "CQ_ERR", "DEVICE_FATAL", "SRQ_ERR"}) {
    EXPECT_EQ(events[quiet], 0) << quiet;
  }
  EXPECT_EQ(transport["established_notifications"], 1);
  EXPECT_EQ(transport["connections"], 1) << "no event here closes a connection";
}

TEST_F(NvmfTgtRpcTest, LogLevel) {
  const std::string before = rpc("log_get_level").result["level"].get<std::string>();
  ASSERT_TRUE(rpc("log_set_level", {{"level", "debug"}}).ok);
  EXPECT_EQ(rpc("log_get_level").result, Json({{"level", "debug"}}));
  ASSERT_TRUE(rpc("log_set_level", {{"level", "error"}}).ok);
  EXPECT_EQ(rpc("log_get_level").result, Json({{"level", "error"}}));
  const Answer answer = rpc("log_set_level", {{"level", "loud"}});
  EXPECT_EQ(answer.code, code::invalid_params) << answer;
  EXPECT_EQ(answer.message,
            "params.level: \"loud\" is not one of error, warn, notice, info, debug");
  EXPECT_EQ(rpc("log_get_level").result, Json({{"level", "error"}}));
  EXPECT_EQ(rpc("log_set_level", Json::object()).code, code::invalid_params);
  LogLevel level;
  ASSERT_TRUE(log_level_parse(before.c_str(), &level));
  log_set_level(level);
}

TEST_F(NvmfTgtRpcTest, SaveConfigRoundTrip) {
  // A target made at run time: bdevs of two types with their options, two subsystems with
  // hosts, namespaces (one with its own identifiers) and listeners.
  ASSERT_TRUE(rpc("bdev_create", {{"type", "malloc"},
                                  {"name", "Malloc0"},
                                  {"num_blocks", 2048},
                                  {"block_size", 4096},
                                  {"queue_depth", 64}})
                  .ok);
  ASSERT_TRUE(rpc("bdev_create", {{"type", "null"},
                                  {"name", "Null0"},
                                  {"num_blocks", 4096},
                                  {"completion_delay_ns", 1000},
                                  {"zero_read_buffers", true}})
                  .ok);
  ASSERT_TRUE(
      rpc("bdev_create", {{"type", "nvme"}, {"name", "Nvme0n1"}, {"pci", "0000:00:04.0"}}).ok);
  ASSERT_TRUE(rpc("subsystem_create", {{"nqn", kNqn},
                                       {"serial_number", "SN1"},
                                       {"model_number", "MN1"},
                                       {"hosts", {kHostNqn}},
                                       {"max_namespaces", 4}})
                  .ok);
  ASSERT_TRUE(rpc("namespace_add", {{"nqn", kNqn}, {"bdev", "Malloc0"}, {"nsid", 3}}).ok);
  ASSERT_TRUE(rpc("namespace_add", {{"nqn", kNqn},
                                    {"bdev", "Null0"},
                                    {"uuid", "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"},
                                    {"nguid", "00112233445566778899aabbccddeeff"},
                                    {"eui64", "0123456789abcdef"}})
                  .ok);
  ASSERT_TRUE(rpc("namespace_add", {{"nqn", kNqn}, {"bdev", "Nvme0n1"}}).ok);
  ASSERT_TRUE(rpc("listener_add", {{"nqn", kNqn}, {"traddr", kAddress}, {"trsvcid", 4420}}).ok);
  ASSERT_TRUE(rpc("listener_add",
                  {{"nqn", kNqn}, {"traddr", "fe80::1"}, {"adrfam", "ipv6"}, {"trsvcid", "4421"}})
                  .ok);
  ASSERT_TRUE(rpc("subsystem_create", {{"nqn", kOtherNqn}, {"allow_any_host", true}}).ok);
  ASSERT_TRUE(rpc("namespace_add", {{"nqn", kOtherNqn}, {"bdev", "Malloc0"}}).ok);
  ASSERT_TRUE(rpc("listener_add", {{"nqn", kOtherNqn}, {"traddr", kAddress}}).ok);

  char dir_template[] = "/tmp/nvmf_tgt_rpc_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string path = std::string(dir_template) + "/saved.json";
  const Answer saved = rpc("save_config", {{"path", path}});
  ASSERT_TRUE(saved.ok) << saved;
  std::ifstream file(path);
  ASSERT_TRUE(file);
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(Json::parse(text.str()), saved.result);
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0) << "the temporary file is renamed";
  EXPECT_EQ(rpc("save_config").result, saved.result) << "without a path: the same text";
  EXPECT_EQ(saved.result["subsystems"].size(), 2u);
  EXPECT_EQ(saved.result["bdevs"].size(), 3u);

  // A restart from it: parse, build into a fresh target, and the subsystems read the same.
  std::string message;
  auto config = target::parse_target_config(text.str(), &message);
  ASSERT_TRUE(config) << message;
  auto fresh = target::Target::create(config->opts);
  ASSERT_TRUE(fresh);
  bdev::NvmeControllerPool pool(model_opener(), nvme_pcie::ControllerOpts{});
  bdev::BdevRegistry registry;
  ASSERT_TRUE(target::build_target(*config, registry, **fresh, &message, &pool)) << message;
  RpcContext restarted{.target = **fresh,
                       .registry = registry,
                       .nvme_pool = pool,
                       .transport = nullptr,  // a configuration check: no transport, no reactors
                       .reactors = {},
                       .transport_config = config->transport,
                       .bdevs = config->bdevs};
  rpc::Dispatcher fresh_dispatcher;
  register_rpc_methods(fresh_dispatcher, restarted);
  EXPECT_EQ(call(fresh_dispatcher, "subsystem_list").result, rpc("subsystem_list").result);
  // The bdevs too, but for the nvme bdev's UUID: the model reports none, so each start makes
  // one (the namespace keeps its UUID: save_config writes it down, compared above).
  Json bdevs_before = rpc("bdev_list").result;
  Json bdevs_after = call(fresh_dispatcher, "bdev_list").result;
  ASSERT_EQ(bdevs_before.size(), 3u);
  ASSERT_EQ(bdevs_after.size(), 3u);
  ASSERT_EQ(bdevs_before[2]["type"], "nvme");
  bdevs_before[2].erase("uuid");
  bdevs_after[2].erase("uuid");
  EXPECT_EQ(bdevs_after, bdevs_before);
  EXPECT_EQ(call(fresh_dispatcher, "save_config").result, saved.result);

  const Answer unwritable = rpc("save_config", {{"path", "/nonexistent/dir/saved.json"}});
  EXPECT_EQ(unwritable.code, code::failed) << unwritable;
  EXPECT_EQ(unwritable.message,
            "cannot write /nonexistent/dir/saved.json: No such file or directory");
  fresh->reset();
  unlink(path.c_str());
  rmdir(dir_template);
}

TEST(NvmfTgtConfigText, EveryBdevTypeRoundTrips) {
  // target_config_to_json is the inverse of parse_target_config, option by option.
  const std::string text = R"({
    "target": {"max_namespaces_default": 16, "keep_alive_granularity_ms": 500,
               "discovery_keep_alive_timeout_ms": 60000},
    "transports": [{"type": "rdma", "max_queue_depth": 64, "in_capsule_data_size": 8192,
                    "max_io_size": 262144, "send_with_invalidate": "off"}],
    "bdevs": [
      {"type": "null", "name": "N", "num_blocks": 10, "block_size": 4096,
       "completion_delay_ns": 7, "zero_read_buffers": true, "queue_depth": 8},
      {"type": "malloc", "name": "M", "num_blocks": 20,
       "uuid": "11111111-2222-4333-8444-555555555555"},
      {"type": "uring", "name": "U", "path": "/tmp/u.img", "create_file": true,
       "size_bytes": 1048576, "direct_io": "off", "fallocate": false},
      {"type": "nvme", "name": "E", "pci": "0000:01:00.0", "nsid": 2}],
    "subsystems": [{"nqn": "nqn.2026-01.io.example:a", "hosts": ["nqn.2026-01.io.example:h"],
                    "namespaces": [{"bdev": "M", "nsid": 2, "eui64": "0011223344556677"}],
                    "listeners": [{"traddr": "::1", "adrfam": "ipv6", "trsvcid": 4421}]}]
  })";
  std::string message;
  auto first = target::parse_target_config(text, &message);
  ASSERT_TRUE(first) << message;
  const std::string written = target::target_config_to_json(*first);
  auto second = target::parse_target_config(written, &message);
  ASSERT_TRUE(second) << message << "\n" << written;
  EXPECT_EQ(target::target_config_to_json(*second), written);
  EXPECT_EQ(second->opts.max_queue_depth, 64u);
  EXPECT_EQ(second->transport.send_with_invalidate, target::SendWithInvalidate::off);
  EXPECT_EQ(second->bdevs[0].null_opts.completion_delay_ns, 7u);
  EXPECT_EQ(second->bdevs[2].uring_opts.direct_io, bdev::DirectIo::off);
  EXPECT_EQ(second->bdevs[2].uring_opts.block_size_bytes, 0u) << "left to the device";
  EXPECT_EQ(second->bdevs[3].nvme_opts.nsid, 2u);
  EXPECT_EQ(second->subsystems[0].namespaces[0].eui64, first->subsystems[0].namespaces[0].eui64);
  EXPECT_EQ(second->subsystems[0].listeners[0], first->subsystems[0].listeners[0]);
}

}  // namespace
}  // namespace nvmf::tgt
