// An in-process nvmf_hostd for nvmfctl's tests: an rpc::Server on a socket in a scratch
// directory, with connect, disconnect, disconnect_all and list as docs/cli.md gives nvmf_hostd's
// API (params checked the same way: unknown keys refused, exactly one of subnqn / device). It
// keeps the controllers it "connected" (each with one namespace, /dev/nbdN) so that exists and
// not_found answer as the daemon's do, records every call's params, and answers a chosen error
// to a connect of a chosen subsystem NQN. Methods run on the server's thread: the state is
// behind a mutex.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rpc/rpc.h"

namespace nvmf::ctl::testing {

using Json = nlohmann::json;

// mkdtemp under the temp directory, removed with everything in it when the object goes.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "nvmfctl_XXXXXX").string();
    path_ = mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write(const std::string& name, const std::string& contents) const {
    std::ofstream(file(name)) << contents;
  }
  // The file's contents, "" when it is missing.
  std::string read(const std::string& name) const {
    std::ifstream in(file(name));
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // The file's permission bits, -1 when it is missing.
  int mode(const std::string& name) const {
    struct stat info {};
    return ::stat(file(name).c_str(), &info) == 0 ? static_cast<int>(info.st_mode & 07777) : -1;
  }

 private:
  std::string path_;
};

class FakeHostd {
 public:
  // Serves on `socket_path`; check started() before use.
  explicit FakeHostd(const std::string& socket_path) {
    dispatcher_.add("connect", "connect to a subsystem",
                    [this](const Json& params) { return connect(params); });
    dispatcher_.add("disconnect", "disconnect controllers",
                    [this](const Json& params) { return disconnect(params); });
    dispatcher_.add("disconnect_all", "disconnect every controller",
                    [this](const Json& params) { return disconnect_all(params); });
    dispatcher_.add("list", "list the controllers", [this](const Json& params) {
      rpc::params_allow_only(params, {});
      std::lock_guard lock(mutex_);
      calls_.emplace_back("list", params);
      return rpc::Outcome{Json{{"controllers", controllers_}}};
    });
    rpc::ServerOpts opts;
    opts.socket_path = socket_path;
    auto server = rpc::Server::start(opts, dispatcher_, &message_);
    if (server) server_ = std::move(*server);
  }

  bool started() const { return server_ != nullptr; }
  const std::string& message() const { return message_; }

  // The next connects to `subnqn` answer `error`.
  void fail_connect(const std::string& subnqn, rpc::RpcError error) {
    std::lock_guard lock(mutex_);
    connect_errors_[subnqn] = std::move(error);
  }
  // The next answers of `method` are `result`, whatever the params (a malformed answer).
  void answer(const std::string& method, Json result) {
    std::lock_guard lock(mutex_);
    canned_[method] = std::move(result);
  }
  // A controller as a connect with these params would make it (exists for a later connect).
  Json add_controller(const Json& params) {
    std::lock_guard lock(mutex_);
    return add_controller_locked(params);
  }

  // (method, params) of every call so far; absent params are {}.
  std::vector<std::pair<std::string, Json>> calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }
  // The params of the calls of `method`.
  std::vector<Json> params_of(const std::string& method) const {
    std::vector<Json> found;
    for (const auto& [name, params] : calls()) {
      if (name == method) found.push_back(params);
    }
    return found;
  }
  Json controllers() const {
    std::lock_guard lock(mutex_);
    return controllers_;
  }

 private:
  Json add_controller_locked(const Json& params) {
    const unsigned index = next_index_++;
    Json controller = {{"name", "nvmf" + std::to_string(index)},
                       {"subnqn", params.value("subnqn", "")},
                       {"trtype", params.value("trtype", "rdma")},
                       {"adrfam", params.value("adrfam", "ipv4")},
                       {"traddr", params.value("traddr", "")},
                       {"trsvcid", params.value("trsvcid", "4420")},
                       {"hostnqn", params.value("hostnqn", "")},
                       {"hostid", params.value("hostid", "")},
                       {"cntlid", index + 1},
                       {"state", "live"},
                       {"memreg", params.value("memreg", "global")},
                       {"io_queues", params.value("nr_io_queues", 2)},
                       {"queue_size", params.value("queue_size", 128)},
                       {"model", "fake model"},
                       {"serial", "FAKE" + std::to_string(index)},
                       {"firmware", "1.0"},
                       {"namespaces", Json::array({{{"nsid", 1},
                                                    {"device", "/dev/nbd" + std::to_string(index)},
                                                    {"block_size", 512},
                                                    {"size_bytes", 4194304}}})}};
    controllers_.push_back(controller);
    return controller;
  }

  rpc::Outcome connect(const Json& params) {
    rpc::params_allow_only(params, {"trtype", "adrfam", "traddr", "trsvcid", "subnqn", "hostnqn",
                                    "hostid", "nr_io_queues", "queue_size", "keep_alive_tmo",
                                    "reconnect_delay", "ctrl_loss_tmo", "memreg"});
    const std::string traddr = rpc::param_string(params, "traddr");
    const std::string subnqn = rpc::param_string(params, "subnqn");
    const std::string trsvcid = rpc::param_string(params, "trsvcid", "4420");
    std::lock_guard lock(mutex_);
    calls_.emplace_back("connect", params);
    if (auto canned = canned_.find("connect"); canned != canned_.end()) return canned->second;
    if (auto error = connect_errors_.find(subnqn); error != connect_errors_.end()) {
      return error->second;
    }
    for (const Json& controller : controllers_) {
      if (controller["subnqn"] == subnqn && controller["traddr"] == traddr &&
          controller["trsvcid"] == trsvcid) {
        return rpc::RpcError{rpc::error_code::exists,
                             "already connected to " + subnqn + " at " + traddr + ":" + trsvcid +
                                 " (" + controller["name"].get<std::string>() + ")"};
      }
    }
    return add_controller_locked(params);
  }

  rpc::Outcome disconnect(const Json& params) {
    rpc::params_allow_only(params, {"subnqn", "device"});
    const std::string subnqn = rpc::param_string(params, "subnqn", "");
    std::string device = rpc::param_string(params, "device", "");
    if (subnqn.empty() == device.empty()) {
      throw rpc::ParamError{"params: exactly one of subnqn and device"};
    }
    if (!device.empty() && device.rfind("/dev/", 0) != 0) device = "/dev/" + device;
    std::lock_guard lock(mutex_);
    calls_.emplace_back("disconnect", params);
    if (auto canned = canned_.find("disconnect"); canned != canned_.end()) return canned->second;
    Json gone = Json::array();
    Json kept = Json::array();
    for (const Json& controller : controllers_) {
      bool match = controller["subnqn"] == subnqn;
      for (const Json& ns : controller["namespaces"]) match = match || ns["device"] == device;
      (match ? gone : kept).push_back(controller);
    }
    if (gone.empty()) {
      return rpc::RpcError{rpc::error_code::not_found,
                           subnqn.empty()
                               ? device + " is not exported by nvmf_hostd"
                               : "no controller of nvmf_hostd is connected to " + subnqn};
    }
    controllers_ = kept;
    for (Json& controller : gone) controller["state"] = "deleting";
    return Json{{"disconnected", gone}};
  }

  rpc::Outcome disconnect_all(const Json& params) {
    rpc::params_allow_only(params, {});
    std::lock_guard lock(mutex_);
    calls_.emplace_back("disconnect_all", params);
    Json gone = controllers_;
    controllers_ = Json::array();
    for (Json& controller : gone) controller["state"] = "deleting";
    return Json{{"disconnected", gone}};
  }

  rpc::Dispatcher dispatcher_;
  std::string message_;
  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, Json>> calls_;
  std::map<std::string, rpc::RpcError> connect_errors_;
  std::map<std::string, Json> canned_;
  Json controllers_ = Json::array();
  unsigned next_index_ = 0;
  std::unique_ptr<rpc::Server> server_;  // last: stops before the state it serves goes
};

}  // namespace nvmf::ctl::testing
