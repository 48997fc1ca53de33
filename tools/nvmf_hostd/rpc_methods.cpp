#include "rpc_methods.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>

namespace nvmf::hostd {

namespace {

using rpc::ParamError;

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

uint32_t seconds_to_ms(uint64_t seconds) { return static_cast<uint32_t>(seconds * 1000); }

// ctrl_loss_tmo: seconds, or -1 for "never give up" (nvme-cli's meaning).
void parse_ctrl_loss(const Json& params, ConnectRequest* request) {
  auto it = params.find("ctrl_loss_tmo");
  if (it == params.end()) return;
  if (it->is_number_integer() && it->get<int64_t>() == -1) {
    request->ctrl_loss_forever = true;
    request->opts.ctrl_loss_timeout_ms = std::numeric_limits<uint32_t>::max();
    return;
  }
  request->opts.ctrl_loss_timeout_ms =
      seconds_to_ms(rpc::param_uint(params, "ctrl_loss_tmo", 0, 4000000));
}

host::TransportId parse_trid(const Json& params) {
  const std::string trtype = lower(rpc::param_string(params, "trtype", "rdma"));
  if (trtype != "rdma") throw ParamError{"params.trtype: only rdma is supported, not " + trtype};
  const std::string adrfam = lower(rpc::param_string(params, "adrfam", "ipv4"));
  if (adrfam != "ipv4" && adrfam != "ipv6") {
    throw ParamError{"params.adrfam: must be ipv4 or ipv6, not " + adrfam};
  }
  const std::string text = "trtype:RDMA adrfam:" + std::string(adrfam == "ipv4" ? "IPv4" : "IPv6") +
                           " traddr:" + rpc::param_string(params, "traddr") +
                           " trsvcid:" + rpc::param_string(params, "trsvcid", "4420") +
                           " subnqn:" + rpc::param_string(params, "subnqn");
  std::string message;
  auto trid = host::TransportId::parse(text, &message);
  if (!trid) throw ParamError{"params: " + message};
  return *trid;
}

}  // namespace

ConnectRequest parse_connect_params(const Json& params) {
  rpc::params_allow_only(params, {"trtype", "adrfam", "traddr", "trsvcid", "subnqn", "hostnqn",
                                  "hostid", "nr_io_queues", "queue_size", "keep_alive_tmo",
                                  "reconnect_delay", "ctrl_loss_tmo", "memreg"});
  ConnectRequest request;
  request.trid = parse_trid(params);
  request.opts.hostnqn = rpc::param_string(params, "hostnqn", "");
  const std::string hostid = rpc::param_string(params, "hostid", "");
  if (!hostid.empty() && !host::uuid_parse(hostid, &request.opts.hostid)) {
    throw ParamError{"params.hostid: '" + hostid + "' is not a UUID"};
  }
  request.nr_io_queues =
      static_cast<uint16_t>(rpc::param_uint(params, "nr_io_queues", 1, 65535, 0));
  request.opts.io_queue_size =
      static_cast<uint16_t>(rpc::param_uint(params, "queue_size", 2, 65535, 128));
  request.opts.keep_alive_timeout_ms =
      seconds_to_ms(rpc::param_uint(params, "keep_alive_tmo", 0, 3600, 10));
  request.opts.reconnect_delay_ms =
      seconds_to_ms(rpc::param_uint(params, "reconnect_delay", 1, 3600, 10));
  parse_ctrl_loss(params, &request);
  const std::string memreg = rpc::param_string(params, "memreg", "global");
  if (!host::memreg_policy_parse(memreg, &request.opts.memreg)) {
    throw ParamError{"params.memreg: '" + memreg +
                     "' is not one of global, unsafe, sagi, max, deferred"};
  }
  return request;
}

namespace {

rpc::RpcError to_rpc_error(const Error& error, const std::string& message) {
  const int code = error.code == Errc::already_exists ? rpc::error_code::exists
                   : error.code == Errc::not_found    ? rpc::error_code::not_found
                                                      : rpc::error_code::failed;
  return rpc::RpcError{code, message};
}

rpc::Outcome answer(const Result<Json>& result, const std::string& message) {
  if (result) return *result;
  return to_rpc_error(result.error(), message);
}

}  // namespace

void register_rpc_methods(rpc::Dispatcher& dispatcher, Daemon& daemon) {
  dispatcher.add("connect",
                 "connect to an NVMe-oF subsystem and export its namespaces as /dev/nbdN",
                 [&daemon](const Json& params) -> rpc::Outcome {
                   const ConnectRequest request = parse_connect_params(params);
                   std::string message;
                   return answer(daemon.connect(request, &message), message);
                 });
  dispatcher.add("disconnect", "remove the devices of a subsystem (subnqn) or of one device",
                 [&daemon](const Json& params) -> rpc::Outcome {
                   rpc::params_allow_only(params, {"subnqn", "device"});
                   const std::string subnqn = rpc::param_string(params, "subnqn", "");
                   const std::string device = rpc::param_string(params, "device", "");
                   if (subnqn.empty() == device.empty()) {
                     throw ParamError{"params: give exactly one of subnqn and device"};
                   }
                   std::string message;
                   return answer(subnqn.empty() ? daemon.disconnect_device(device, &message)
                                                : daemon.disconnect_nqn(subnqn, &message),
                                 message);
                 });
  dispatcher.add("disconnect_all", "remove every device and controller",
                 [&daemon](const Json& params) -> rpc::Outcome {
                   rpc::params_allow_only(params, {});
                   return daemon.disconnect_all();
                 });
  dispatcher.add("list", "the controllers and their devices",
                 [&daemon](const Json& params) -> rpc::Outcome {
                   rpc::params_allow_only(params, {});
                   return daemon.list();
                 });
}

}  // namespace nvmf::hostd
