// The blocking JSON-RPC client of nvmfctl and the tests: one request at a time, poll() with a
// deadline around every send and receive, answers matched by id.
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "rpc/framing.h"
#include "rpc/rpc.h"

namespace nvmf::rpc {

namespace {

using detail::errno_text;
using detail::now_ms;
using detail::set_message;

// How long connect() may wait while the server's backlog is full (it serves clients_max
// clients at once and does not accept more meanwhile).
constexpr int kConnectTimeoutS = 10;
constexpr size_t kReadChunkBytes = 64 * 1024;


RpcError transport_error(std::string text) {
  return RpcError{error_code::internal_error, std::move(text)};
}

// Waits for `events` on fd until deadline_ms: >0 ready, 0 timed out, <0 failed (errno).
int wait_for(int fd, short events, uint64_t deadline_ms) {
  for (;;) {
    const uint64_t now = now_ms();
    const int timeout = deadline_ms <= now ? 0 : static_cast<int>(deadline_ms - now);
    pollfd pfd{fd, events, 0};
    int count = ::poll(&pfd, 1, timeout);
    if (count < 0 && errno == EINTR) continue;
    return count;
  }
}

Outcome outcome_of(const Json& response) {
  auto error = response.find("error");
  if (error != response.end()) {
    RpcError rpc_error{error_code::internal_error, "error answer without a message"};
    if (error->is_object()) {
      auto code = error->find("code");
      if (code != error->end() && code->is_number_integer()) rpc_error.code = code->get<int>();
      auto text = error->find("message");
      if (text != error->end()) {
        rpc_error.message = text->is_string() ? text->get<std::string>() : detail::dump(*text);
      }
    } else {
      rpc_error.message = detail::dump(*error);
    }
    return rpc_error;
  }
  auto result = response.find("result");
  if (result == response.end()) return transport_error("answer has neither result nor error");
  return *result;
}

}  // namespace

Result<std::unique_ptr<Client>> Client::connect(const std::string& socket_path,
                                                std::string* message) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(address.sun_path)) {
    set_message(message, "rpc socket path '" + socket_path + "' must be 1.." +
                             std::to_string(sizeof(address.sun_path) - 1) + " bytes long");
    return Unexpected{Errc::invalid_argument, "rpc socket path length"};
  }
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int os_errno = errno;
    set_message(message, "cannot create a socket: " + errno_text(os_errno));
    return Unexpected{make_system_error(os_errno, "socket")};
  }
  // A blocking connect to a full backlog waits for SO_SNDTIMEO, then fails with EAGAIN.
  timeval connect_timeout{kConnectTimeoutS, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &connect_timeout, sizeof(connect_timeout));
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int os_errno = errno;
    ::close(fd);
    switch (os_errno) {
      case ENOENT:
      case ECONNREFUSED:
        set_message(message, "no nvmf_tgt is listening on " + socket_path +
                                 " (start it, or give --rpc-socket)");
        return Unexpected{Errc::connection_refused, "rpc connect", os_errno};
      case EACCES:
      case EPERM:
        set_message(message, "permission denied on " + socket_path +
                                 " (run as the user that started nvmf_tgt, or as root)");
        return Unexpected{Errc::permission_denied, "rpc connect", os_errno};
      case EAGAIN:
        set_message(message, "nvmf_tgt on " + socket_path + " accepted no connection within " +
                                 std::to_string(kConnectTimeoutS) + " s (all its clients busy?)");
        return Unexpected{Errc::busy, "rpc connect", os_errno};
      default:
        set_message(message, "cannot connect to " + socket_path + ": " + errno_text(os_errno));
        return Unexpected{make_system_error(os_errno, "rpc connect")};
    }
  }
  return std::unique_ptr<Client>(new Client(fd));
}

Client::Client(int fd) : fd_(fd) {}

Client::~Client() {
  if (fd_ >= 0) ::close(fd_);
}

Outcome Client::call(const std::string& method, const Json& params, unsigned timeout_ms) {
  if (fd_ < 0) return transport_error("not connected: nvmf_tgt closed the connection earlier");
  const uint64_t id = next_id_++;
  Json request{{"jsonrpc", "2.0"}, {"method", method}, {"id", id}};
  if (!params.is_null()) request["params"] = params;
  const std::string text = detail::dump(request) + "\n";
  const uint64_t deadline = now_ms() + timeout_ms;
  const std::string waited = " within " + std::to_string(timeout_ms) + " ms";
  auto lost = [this](const std::string& why) {
    ::close(fd_);
    fd_ = -1;
    buffer_.clear();
    return transport_error(why);
  };

  for (size_t sent = 0; sent < text.size();) {
    ssize_t n = ::send(fd_, text.data() + sent, text.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      int ready = wait_for(fd_, POLLOUT, deadline);
      // A half-sent request cannot be taken back: the stream is out of step.
      if (ready == 0) return lost("nvmf_tgt took no request" + waited);
      if (ready < 0) return lost("poll: " + errno_text(errno));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return lost("nvmf_tgt closed the connection (" + errno_text(errno) + ")");
    }
  }

  for (;;) {
    // Every complete value buffered: ours, or an answer to an earlier call that timed out.
    for (;;) {
      detail::ValueScanner scanner;
      const detail::ScanResult scanned = scanner.scan(buffer_);
      if (!scanned.complete) {
        if (!scanner.value_started()) buffer_.clear();
        break;
      }
      const std::string_view value(buffer_.data() + scanned.begin, scanned.end - scanned.begin);
      Json response = Json::parse(value.begin(), value.end(), nullptr, false);
      buffer_.erase(0, scanned.end);
      if (response.is_discarded()) return lost("malformed answer from nvmf_tgt");
      if (!response.is_object()) continue;
      auto response_id = response.find("id");
      if (response_id == response.end()) continue;
      // A null id: the server could not read our request (parse error); it is about this one.
      if (*response_id == id || (response_id->is_null() && response.contains("error"))) {
        return outcome_of(response);
      }
    }
    int ready = wait_for(fd_, POLLIN, deadline);
    if (ready == 0) return transport_error("no answer from nvmf_tgt" + waited);
    if (ready < 0) return lost("poll: " + errno_text(errno));
    const size_t old_size = buffer_.size();
    buffer_.resize(old_size + kReadChunkBytes);
    ssize_t n = ::recv(fd_, buffer_.data() + old_size, kReadChunkBytes, MSG_DONTWAIT);
    buffer_.resize(old_size + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n > 0) continue;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    const bool partial = !buffer_.empty();
    if (n == 0 || errno == ECONNRESET) {
      return lost(partial ? "nvmf_tgt closed the connection in the middle of its answer"
                          : "nvmf_tgt closed the connection before answering");
    }
    return lost("receive: " + errno_text(errno));
  }
}

}  // namespace nvmf::rpc
