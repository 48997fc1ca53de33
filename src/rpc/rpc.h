// JSON-RPC 2.0 over a Unix stream socket, for the control plane (nvmf_tgt's runtime
// configuration, nvmfctl). Off the data path: the server has one thread of its own that
// accepts clients and serves their requests one at a time, in arrival order.
//
// Framing: each request and each response is one JSON value; requests may be separated by
// whitespace or newlines (rpc.py style: the client writes the request and reads until the
// response parses). Responses end with a newline.
//
// Errors (the JSON-RPC 2.0 codes): -32700 parse error (malformed JSON: the connection is
// closed after the answer, since the stream cannot be resynchronised), -32600 invalid request
// (not an object, no "method", wrong "jsonrpc", or larger than ServerOpts::request_bytes_max:
// closed after the answer too), -32601 method not found, -32602 invalid params (a method
// throws ParamError), -32603 internal error (a method threw anything else). A method's own
// failure is an RpcError it returns, with a message naming the problem ("subsystem nqn.x:y
// has no namespace 3"); codes -32000..-32099 are for those.
//
// Threads: a Dispatcher is filled on the setup thread before the Server starts; from then on
// its methods run on the Server's thread, one at a time (a method that touches reactor-owned
// state sends it a message and waits). A Client belongs to the thread that uses it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "common/result.h"

namespace nvmf::rpc {

using Json = nlohmann::json;

namespace error_code {
inline constexpr int parse_error = -32700;
inline constexpr int invalid_request = -32600;
inline constexpr int method_not_found = -32601;
inline constexpr int invalid_params = -32602;
inline constexpr int internal_error = -32603;
inline constexpr int failed = -32000;     // the method ran and failed; message says why
inline constexpr int not_found = -32001;  // a named object does not exist
inline constexpr int exists = -32002;     // a named object exists already
inline constexpr int busy = -32003;       // the object is in use (e.g. a bdev with namespaces)
}  // namespace error_code

struct RpcError {
  int code = error_code::failed;
  std::string message;
};

// What a method returns: a result (any JSON value, null for "done") or an error.
using Outcome = std::variant<Json, RpcError>;
// A method's params are an object (or absent: an empty object). It may throw ParamError
// for bad params; nothing it throws takes the server down.
using Method = std::function<Outcome(const Json& params)>;

struct ParamError {
  std::string message;  // "params.nqn: required", "params.nsid: must be 1..4294967294"
};

// Helpers for methods: typed access to params that throw ParamError naming the field:
// "params.KEY: required", "params.KEY: must be a string" (or "an integer within MIN..MAX",
// "true or false"), "params.KEY: 0 is not within 1..4294967294", "params.KEY: unknown key".
// A present key of the wrong type is an error, never the fallback (null included).
std::string param_string(const Json& params, const char* key);  // required
std::string param_string(const Json& params, const char* key, const std::string& fallback);
uint64_t param_uint(const Json& params, const char* key, uint64_t min, uint64_t max);  // required
uint64_t param_uint(const Json& params, const char* key, uint64_t min, uint64_t max,
                    uint64_t fallback);
bool param_bool(const Json& params, const char* key, bool fallback);
// Refuses keys not in `allowed` (typos must not pass silently).
void params_allow_only(const Json& params, std::initializer_list<const char*> allowed);

class Dispatcher {
 public:
  // Registers the built-in `rpc_get_methods` (params: none; result: [{"name", "summary"}]
  // sorted by name, itself included). Addition to the first draft of this header.
  Dispatcher();
  // Registers `name` (setup path, before the server starts). `summary` is one line for
  // `rpc_get_methods` and nvmfctl's help. A name registered twice is a programmer error
  // (asserts; in release builds the later method wins).
  void add(const std::string& name, const std::string& summary, Method method);
  // Handles one request text: the response text (one JSON object, no newline), or "" for a
  // notification (a request without "id"). `*close_after` is set when the stream should be
  // closed (parse errors, invalid requests). A batch (a JSON array) is answered with an array
  // of the responses of its non-notifications, or "" when all of them are notifications; an
  // empty batch is one invalid_request object. `close_after` may be null. Never throws.
  std::string handle(std::string_view request, bool* close_after) const;
  // name -> summary, for rpc_get_methods (registered by the Dispatcher itself).
  const std::map<std::string, std::string>& summaries() const noexcept { return summaries_; }

 private:
  std::map<std::string, Method> methods_;
  std::map<std::string, std::string> summaries_;
};

struct ServerOpts {
  std::string socket_path = "/var/tmp/nvmf_tgt.sock";
  uint32_t mode = 0600;                  // the socket file's permissions
  size_t request_bytes_max = 1u << 20;   // one request; larger is invalid_request + close
  unsigned clients_max = 16;             // connections at once; more wait in the backlog
  unsigned idle_timeout_ms = 60000;      // a client that sends half a request and stalls
  // Addition: how long an answer may sit unread (no byte taken by the client) before the
  // client is closed. Answers are sent without blocking, so a client that never reads only
  // delays itself; this bounds the memory it holds.
  unsigned write_timeout_ms = 5000;
};

class Server {
 public:
  // Binds and listens, then serves on a thread of its own. A socket path in use by a live
  // server (a connect succeeds) is refused with already_exists and the message naming it;
  // a stale socket file (connect refused) is removed and replaced. Errors: already_exists,
  // invalid_argument (path too long for sun_path), permission_denied, system_error. A path
  // that exists and is not a socket is refused with already_exists (never deleted).
  // `dispatcher` must outlive the Server. `message` (may be null) gets a one-line reason.
  static Result<std::unique_ptr<Server>> start(const ServerOpts& opts, const Dispatcher& dispatcher,
                                               std::string* message);
  // Stops the thread, closes every client, removes the socket file (unless another server
  // has replaced it meanwhile).
  ~Server();

  const std::string& socket_path() const noexcept;

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A blocking client (nvmfctl, tests).
class Client {
 public:
  // Errors (with `message`, which may be null): connection_refused "no nvmf_tgt is listening
  // on PATH (start it, or give --rpc-socket)" (no file, or a stale socket), permission_denied,
  // busy (the server's backlog is full for 10 s), invalid_argument (path too long).
  static Result<std::unique_ptr<Client>> connect(const std::string& socket_path,
                                                 std::string* message);
  ~Client();
  Client(const Client&) = delete;  // owns the socket
  Client& operator=(const Client&) = delete;
  // Sends {"jsonrpc":"2.0","method":...,"params":...,"id":N} and waits for the answer (up to
  // timeout_ms). The response's "result", or its "error" as an RpcError; transport failures
  // are RpcError{internal_error, "..."} with the reason. Null `params` are left out of the
  // request. Answers to earlier calls that timed out are skipped. After the server closed
  // the connection every call fails at once; after a timeout the connection stays usable.
  Outcome call(const std::string& method, const Json& params, unsigned timeout_ms = 30000);

 private:
  explicit Client(int fd);
  int fd_ = -1;
  uint64_t next_id_ = 1;
  std::string buffer_;
};

}  // namespace nvmf::rpc
