// The JSON-RPC server: one thread polling the listening socket, a stop eventfd and up to
// clients_max clients. Reads accumulate per client until the framing scanner finds a complete
// value; complete requests are served one at a time in arrival order (the Dispatcher need not
// be thread-safe); answers are sent without blocking so that no client can stall the others.
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <deque>
#include <system_error>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "rpc/framing.h"
#include "rpc/rpc.h"

NVMF_LOG_COMPONENT(rpc);

namespace nvmf::rpc {

namespace {

using detail::errno_text;
using detail::now_ms;
using detail::set_message;

constexpr size_t kReadChunkBytes = 64 * 1024;  // one recv() per wake-up: fair across clients
constexpr unsigned kAcceptPauseMs = 100;       // out of fds: retry later instead of spinning


// One accepted client. States, in the order a request goes through them:
//  reading        no complete value in `in` yet (POLLIN; the idle timeout runs when a value
//                 has begun);
//  ready          `in` holds a complete value, queued in Impl::ready (not polled);
//  writing        `out` holds an answer not yet taken by the client (POLLOUT; the write
//                 timeout runs);
//  closing        close_after_flush: an answer to write, then close;
// and `closed`, reaped at the end of the poll iteration.
struct Connection {
  int fd = -1;
  uint64_t number = 0;           // "client 3" in logs
  std::string in;                // received, not yet served
  detail::ValueScanner scanner;  // where the first value of `in` ends
  bool request_ready = false;    // `in` holds a complete value at [ready_begin, ready_end)
  size_t ready_begin = 0;
  size_t ready_end = 0;
  std::string out;  // answer bytes not yet sent
  size_t out_sent = 0;
  bool close_after_flush = false;  // parse error or invalid request: answer, then close
  bool peer_done = false;          // EOF: the client will send nothing more
  bool closed = false;
  uint64_t last_receive_ms = 0;  // idle timeout of a partial request
  uint64_t last_send_ms = 0;     // write timeout: last progress while `out` is not empty
};

}  // namespace

struct Server::Impl {
  Impl(const ServerOpts& server_opts, const Dispatcher& server_dispatcher)
      : opts(server_opts), dispatcher(server_dispatcher) {}
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void run();
  void accept_clients(uint64_t now);
  void receive(Connection& connection, uint64_t now);
  void flush(Connection& connection, uint64_t now);
  void advance(Connection& connection, uint64_t now);
  void answer_oversized(Connection& connection, uint64_t now);
  void serve_ready();
  void expire(uint64_t now);
  int poll_timeout_ms(uint64_t now) const;
  void close_connection(Connection& connection, const char* why);

  const ServerOpts opts;
  const Dispatcher& dispatcher;
  int listen_fd = -1;
  int stop_fd = -1;      // eventfd: the destructor's "stop"
  bool bound = false;    // the socket file is ours to remove
  dev_t socket_dev = 0;  // identity of the socket file we bound, so that the destructor
  ino_t socket_ino = 0;  // does not remove a successor's
  std::thread thread;
  std::vector<std::unique_ptr<Connection>> connections;
  std::deque<Connection*> ready;  // complete requests, in arrival order
  uint64_t next_number = 1;
  uint64_t accept_resume_ms = 0;
  std::vector<char> read_buffer = std::vector<char>(kReadChunkBytes);
};

Server::Impl::~Impl() {
  if (thread.joinable()) {
    const uint64_t one = 1;
    ssize_t written = ::write(stop_fd, &one, sizeof(one));
    (void)written;  // an eventfd write of 1 cannot fail short of a counter overflow
    thread.join();
  }
  for (auto& connection : connections) {
    if (!connection->closed) ::close(connection->fd);
  }
  connections.clear();
  if (bound) {
    struct stat now_there {};
    if (::lstat(opts.socket_path.c_str(), &now_there) == 0 && now_there.st_dev == socket_dev &&
        now_there.st_ino == socket_ino) {
      ::unlink(opts.socket_path.c_str());
    }
  }
  if (listen_fd >= 0) ::close(listen_fd);
  if (stop_fd >= 0) ::close(stop_fd);
}

void Server::Impl::close_connection(Connection& connection, const char* why) {
  if (connection.closed) return;
  NVMF_DEBUGLOG(rpc, "client %llu: closed (%s)", static_cast<unsigned long long>(connection.number),
                why);
  ::close(connection.fd);
  connection.fd = -1;
  connection.closed = true;
}

void Server::Impl::accept_clients(uint64_t now) {
  while (connections.size() < opts.clients_max) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN) return;
      NVMF_WARNLOG(rpc, "accept on %s: %s; retrying in %u ms", opts.socket_path.c_str(),
                   errno_text(errno).c_str(), kAcceptPauseMs);
      accept_resume_ms = now + kAcceptPauseMs;
      return;
    }
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    connection->number = next_number++;
    connection->last_receive_ms = now;
    ucred peer{};
    socklen_t peer_size = sizeof(peer);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_size) == 0) {
      NVMF_DEBUGLOG(rpc, "client %llu: connected (pid %d, uid %u)",
                    static_cast<unsigned long long>(connection->number), static_cast<int>(peer.pid),
                    static_cast<unsigned>(peer.uid));
    }
    connections.push_back(std::move(connection));
  }
}

void Server::Impl::receive(Connection& connection, uint64_t now) {
  ssize_t received = ::recv(connection.fd, read_buffer.data(), read_buffer.size(), 0);
  if (received > 0) {
    connection.in.append(read_buffer.data(), static_cast<size_t>(received));
    connection.last_receive_ms = now;
  } else if (received == 0) {
    connection.peer_done = true;
  } else if (errno == EAGAIN || errno == EINTR) {
    return;
  } else {
    close_connection(connection, "receive failed");
    return;
  }
  advance(connection, now);
}

// Decides what a connection waits for next, once it has nothing to send.
void Server::Impl::advance(Connection& connection, uint64_t now) {
  if (connection.closed || !connection.out.empty() || connection.request_ready) return;
  if (connection.close_after_flush) {
    close_connection(connection, "after a parse error or an invalid request");
    return;
  }
  const detail::ScanResult scanned = connection.scanner.scan(connection.in);
  if (scanned.complete) {
    if (scanned.end - scanned.begin > opts.request_bytes_max) {
      answer_oversized(connection, now);
      return;
    }
    connection.request_ready = true;
    connection.ready_begin = scanned.begin;
    connection.ready_end = scanned.end;
    ready.push_back(&connection);
    return;
  }
  if (!connection.scanner.value_started()) {
    connection.in.clear();  // whitespace between requests
    connection.scanner.reset();
  } else if (connection.in.size() - connection.scanner.value_begin() > opts.request_bytes_max) {
    answer_oversized(connection, now);
    return;
  }
  if (connection.peer_done) close_connection(connection, "end of stream");
}

void Server::Impl::answer_oversized(Connection& connection, uint64_t now) {
  NVMF_WARNLOG(rpc, "client %llu: request larger than %zu bytes; closing",
               static_cast<unsigned long long>(connection.number), opts.request_bytes_max);
  connection.in.clear();
  connection.scanner.reset();
  connection.out = detail::dump(detail::error_response(
      nullptr, error_code::invalid_request,
      "request larger than " + std::to_string(opts.request_bytes_max) + " bytes"));
  connection.out += '\n';
  connection.out_sent = 0;
  connection.last_send_ms = now;
  connection.close_after_flush = true;
  flush(connection, now);
}

void Server::Impl::flush(Connection& connection, uint64_t now) {
  while (connection.out_sent < connection.out.size()) {
    ssize_t sent = ::send(connection.fd, connection.out.data() + connection.out_sent,
                          connection.out.size() - connection.out_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      connection.out_sent += static_cast<size_t>(sent);
      connection.last_send_ms = now;
    } else if (sent < 0 && errno == EINTR) {
      continue;
    } else if (sent < 0 && errno == EAGAIN) {
      return;  // the socket buffer is full: POLLOUT calls again
    } else {
      // EPIPE / ECONNRESET: the client left before reading its answer.
      close_connection(connection, "gone before reading its answer");
      return;
    }
  }
  connection.out.clear();
  connection.out_sent = 0;
  advance(connection, now);
}

void Server::Impl::serve_ready() {
  while (!ready.empty()) {
    Connection& connection = *ready.front();
    ready.pop_front();
    if (connection.closed) continue;
    assert(connection.request_ready);
    std::string_view text(connection.in.data() + connection.ready_begin,
                          connection.ready_end - connection.ready_begin);
    bool close_after = false;
    std::string response = dispatcher.handle(text, &close_after);
    const uint64_t now = now_ms();  // a method may take a while
    connection.in.erase(0, connection.ready_end);
    connection.scanner.reset();
    connection.request_ready = false;
    if (close_after) connection.close_after_flush = true;
    if (!response.empty()) {
      connection.out = std::move(response);
      connection.out += '\n';
      connection.out_sent = 0;
      connection.last_send_ms = now;
    }
    // Usually the whole answer fits in the socket buffer; otherwise POLLOUT finishes it. A
    // pipelined next request is queued behind the others that are ready (round robin).
    flush(connection, now);
  }
}

void Server::Impl::expire(uint64_t now) {
  for (auto& connection : connections) {
    if (connection->closed) continue;
    if (!connection->out.empty()) {
      if (now - connection->last_send_ms >= opts.write_timeout_ms) {
        NVMF_WARNLOG(rpc, "client %llu: has not read its answer for %u ms; closing",
                     static_cast<unsigned long long>(connection->number), opts.write_timeout_ms);
        close_connection(*connection, "write timeout");
      }
    } else if (!connection->request_ready && connection->scanner.value_started() &&
               now - connection->last_receive_ms >= opts.idle_timeout_ms) {
      NVMF_NOTICELOG(rpc, "client %llu: sent part of a request, then nothing for %u ms; closing",
                     static_cast<unsigned long long>(connection->number), opts.idle_timeout_ms);
      close_connection(*connection, "idle timeout");
    }
  }
}

int Server::Impl::poll_timeout_ms(uint64_t now) const {
  uint64_t deadline = UINT64_MAX;
  if (accept_resume_ms > now) deadline = accept_resume_ms;
  for (const auto& connection : connections) {
    if (!connection->out.empty()) {
      deadline = std::min<uint64_t>(deadline, connection->last_send_ms + opts.write_timeout_ms);
    } else if (!connection->request_ready && connection->scanner.value_started()) {
      deadline = std::min<uint64_t>(deadline, connection->last_receive_ms + opts.idle_timeout_ms);
    }
  }
  if (deadline == UINT64_MAX) return -1;
  return deadline <= now ? 0 : static_cast<int>(std::min<uint64_t>(deadline - now, INT32_MAX));
}

void Server::Impl::run() {
  NVMF_INFOLOG(rpc, "serving JSON-RPC on %s", opts.socket_path.c_str());
  std::vector<pollfd> fds;
  std::vector<Connection*> polled;
  for (;;) {
    uint64_t now = now_ms();
    fds.clear();
    polled.clear();
    fds.push_back({stop_fd, POLLIN, 0});
    // At clients_max (or out of fds) the listening socket is not polled: new clients wait in
    // the backlog. poll() ignores a negative fd.
    const bool accepting = connections.size() < opts.clients_max && now >= accept_resume_ms;
    fds.push_back({accepting ? listen_fd : -1, POLLIN, 0});
    for (auto& connection : connections) {
      short events = 0;
      if (!connection->out.empty()) {
        events = POLLOUT;
      } else if (!connection->request_ready && !connection->close_after_flush &&
                 !connection->peer_done) {
        events = POLLIN;
      }
      fds.push_back({connection->fd, events, 0});
      polled.push_back(connection.get());
    }
    int count = ::poll(fds.data(), fds.size(), poll_timeout_ms(now));
    if (count < 0) {
      if (errno == EINTR) continue;
      NVMF_ERRLOG(rpc, "poll: %s; the RPC server on %s stops serving", errno_text(errno).c_str(),
                  opts.socket_path.c_str());
      return;
    }
    if (fds[0].revents != 0) break;
    now = now_ms();
    if (fds[1].revents & POLLIN) accept_clients(now);
    for (size_t i = 0; i < polled.size(); ++i) {
      Connection& connection = *polled[i];
      const short events = fds[i + 2].events;
      const short revents = fds[i + 2].revents;
      if (revents == 0 || connection.closed) continue;
      if (events & POLLOUT) {
        flush(connection, now);  // POLLHUP / POLLERR show up as a failing send
      } else if (events & POLLIN) {
        receive(connection, now);  // POLLHUP: recv() drains what is left, then reads EOF
      } else if (revents & (POLLHUP | POLLERR)) {
        close_connection(connection, "hung up");
      }
    }
    serve_ready();
    expire(now_ms());
    assert(ready.empty());
    std::erase_if(connections, [](const std::unique_ptr<Connection>& c) { return c->closed; });
  }
  NVMF_INFOLOG(rpc, "stopped serving JSON-RPC on %s", opts.socket_path.c_str());
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() = default;

const std::string& Server::socket_path() const noexcept { return impl_->opts.socket_path; }

namespace {

// Connects to an existing socket file to learn whether a server is behind it. Ok: nobody is
// (the stale file was removed).
Result<void> probe_existing_socket(const sockaddr_un& address, const std::string& path,
                                   std::string* message) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    const int os_errno = errno;
    set_message(message, "cannot create a socket: " + errno_text(os_errno));
    return Unexpected{make_system_error(os_errno, "socket")};
  }
  int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  const int os_errno = rc == 0 ? 0 : errno;
  ::close(fd);
  // EAGAIN: a live server whose backlog is full.
  if (rc == 0 || os_errno == EAGAIN || os_errno == EINPROGRESS) {
    set_message(message, "another nvmf_tgt is serving " + path);
    return Unexpected{Errc::already_exists, "rpc socket in use"};
  }
  if (os_errno == ECONNREFUSED) {
    NVMF_NOTICELOG(rpc, "replacing the stale socket %s", path.c_str());
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      const int unlink_errno = errno;
      set_message(message,
                  "cannot remove the stale socket " + path + ": " + errno_text(unlink_errno));
      return Unexpected{make_system_error(unlink_errno, "unlink stale rpc socket")};
    }
    return {};
  }
  set_message(message,
              "cannot tell whether a server is behind " + path + ": " + errno_text(os_errno));
  return Unexpected{make_system_error(os_errno, "probe rpc socket")};
}

}  // namespace

Result<std::unique_ptr<Server>> Server::start(const ServerOpts& opts, const Dispatcher& dispatcher,
                                              std::string* message) {
  const std::string& path = opts.socket_path;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    set_message(message, "rpc socket path '" + path + "' must be 1.." +
                             std::to_string(sizeof(address.sun_path) - 1) + " bytes long");
    return Unexpected{Errc::invalid_argument, "rpc socket path length"};
  }
  if (opts.clients_max == 0 || opts.request_bytes_max == 0) {
    set_message(message, "rpc clients_max and request_bytes_max must be at least 1");
    return Unexpected{Errc::invalid_argument, "rpc server opts"};
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);

  struct stat existing {};
  if (::lstat(path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) {
      set_message(message, path + " exists and is not a socket (not replacing it)");
      return Unexpected{Errc::already_exists, "rpc socket path is not a socket"};
    }
    Result<void> probed = probe_existing_socket(address, path, message);
    if (!probed) return Unexpected{probed.error()};
  } else if (errno != ENOENT) {
    const int os_errno = errno;
    set_message(message, "cannot stat " + path + ": " + errno_text(os_errno));
    return Unexpected{make_system_error(os_errno, "stat rpc socket")};
  }

  auto impl = std::make_unique<Impl>(opts, dispatcher);
  impl->listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (impl->listen_fd < 0) {
    const int os_errno = errno;
    set_message(message, "cannot create a socket: " + errno_text(os_errno));
    return Unexpected{make_system_error(os_errno, "socket")};
  }
  if (::bind(impl->listen_fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int os_errno = errno;
    if (os_errno == EADDRINUSE) {
      set_message(message, "another nvmf_tgt is serving " + path);
      return Unexpected{Errc::already_exists, "rpc socket in use", os_errno};
    }
    set_message(message, "cannot bind " + path + ": " + errno_text(os_errno));
    return Unexpected{make_system_error(os_errno, "bind rpc socket")};
  }
  struct stat created {};
  if (::lstat(path.c_str(), &created) == 0) {
    impl->bound = true;
    impl->socket_dev = created.st_dev;
    impl->socket_ino = created.st_ino;
  }
  // Before listen(): until then a connect is refused, so no client ever sees the mode that
  // the umask gave the file.
  if (::chmod(path.c_str(), opts.mode) != 0) {
    const int os_errno = errno;
    set_message(message, "cannot chmod " + path + ": " + errno_text(os_errno));
    return Unexpected{make_system_error(os_errno, "chmod rpc socket")};
  }
  if (::listen(impl->listen_fd, SOMAXCONN) != 0) {
    const int os_errno = errno;
    set_message(message, "cannot listen on " + path + ": " + errno_text(os_errno));
    return Unexpected{make_system_error(os_errno, "listen rpc socket")};
  }
  impl->stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->stop_fd < 0) {
    const int os_errno = errno;
    set_message(message, "cannot create an eventfd: " + errno_text(os_errno));
    return Unexpected{make_system_error(os_errno, "eventfd")};
  }
  try {
    Impl* serving = impl.get();
    impl->thread = std::thread([serving] { serving->run(); });
  } catch (const std::system_error& error) {
    set_message(message, std::string("cannot start the rpc thread: ") + error.what());
    return Unexpected{make_system_error(error.code().value(), "rpc thread")};
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

}  // namespace nvmf::rpc
