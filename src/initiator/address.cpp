// Addresses and identities of include/nvmf/host.h: TransportId in SPDK's string form, the
// memory-registration policy names, the host NQN and host ID as nvme-cli finds them (and, for
// resolve_host_identity, saves them), UUID text and DiscoveryEntry -> TransportId.
// Configuration-path code: it allocates freely.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <random>

#include "nvmf/host.h"
#include "spec/discovery.h"
#include "spec/string_field.h"

namespace nvmf::host {

namespace {

constexpr std::string_view kWhitespace = " \t\r\n\v\f";

char to_lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool equals_ignore_case(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (to_lower(a[i]) != to_lower(b[i])) return false;
  }
  return true;
}

std::string_view trim(std::string_view text) noexcept {
  const size_t begin = text.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  const size_t end = text.find_last_not_of(kWhitespace);
  return text.substr(begin, end - begin + 1);
}

// Discovery log entries pad TRSVCID and TRADDR with spaces (NVMe-oF 5.4, Discovery Log Page);
// the NUL-terminated SUBNQN may carry NULs if copied whole.
std::string_view trim_padding(std::string_view text) noexcept {
  const size_t end = text.find_last_not_of(std::string_view(" \0", 2));
  return end == std::string_view::npos ? std::string_view{} : text.substr(0, end + 1);
}

Result<TransportId> parse_failed(std::string* message, std::string text) {
  if (message != nullptr) *message = std::move(text);
  return Unexpected(Errc::invalid_argument, "transport ID");
}

// The first line of a small text file, trimmed; empty when the file is missing or unreadable.
std::string read_first_line(const std::string& path) {
  FILE* file = fopen(path.c_str(), "re");
  if (file == nullptr) return {};
  // An NQN is at most 223 bytes; a UUID 36. Longer lines are someone else's file.
  char line[512];
  const bool got = fgets(line, sizeof(line), file) != nullptr;
  fclose(file);
  if (!got) return {};
  return std::string(trim(line));
}

// 16 random bytes, from /dev/urandom (std::random_device where it cannot be read).
std::array<uint8_t, 16> random_bytes() {
  std::array<uint8_t, 16> bytes{};
  size_t have = 0;
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    while (have < bytes.size()) {
      const ssize_t n = read(fd, bytes.data() + have, bytes.size() - have);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      have += static_cast<size_t>(n);
    }
    close(fd);
  }
  if (have < bytes.size()) {
    std::random_device device;
    for (auto& byte : bytes) byte = static_cast<uint8_t>(device());
  }
  return bytes;
}

// A random (version 4, RFC 4122 variant) UUID.
std::array<uint8_t, 16> random_uuid() {
  std::array<uint8_t, 16> uuid = random_bytes();
  uuid[6] = static_cast<uint8_t>((uuid[6] & 0x0F) | 0x40);  // version 4: random
  uuid[8] = static_cast<uint8_t>((uuid[8] & 0x3F) | 0x80);  // variant 10xx: RFC 4122
  return uuid;
}

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// TransportId

Result<TransportId> TransportId::parse(std::string_view text, std::string* message) {
  TransportId trid;
  // Which keys were given, to refuse duplicates and to know whether traddr came.
  bool seen_trtype = false, seen_adrfam = false, seen_traddr = false, seen_trsvcid = false,
       seen_subnqn = false;
  size_t position = 0;
  while (true) {
    const size_t begin = text.find_first_not_of(kWhitespace, position);
    if (begin == std::string_view::npos) break;
    size_t end = text.find_first_of(kWhitespace, begin);
    if (end == std::string_view::npos) end = text.size();
    position = end;
    const std::string_view pair = text.substr(begin, end - begin);

    // SPDK accepts "key:value" and "key=value"; the value may contain either (IPv6, NQNs).
    const size_t separator = pair.find_first_of(":=");
    if (separator == std::string_view::npos || separator == 0) {
      return parse_failed(message,
                          "transport ID: expected key:value, got '" + std::string(pair) + "'");
    }
    const std::string_view key = pair.substr(0, separator);
    const std::string_view value = pair.substr(separator + 1);
    if (value.empty()) {
      return parse_failed(message, "transport ID: empty value for " + std::string(key));
    }

    bool* seen = nullptr;
    if (equals_ignore_case(key, "trtype")) {
      seen = &seen_trtype;
    } else if (equals_ignore_case(key, "adrfam")) {
      seen = &seen_adrfam;
    } else if (equals_ignore_case(key, "traddr")) {
      seen = &seen_traddr;
    } else if (equals_ignore_case(key, "trsvcid")) {
      seen = &seen_trsvcid;
    } else if (equals_ignore_case(key, "subnqn")) {
      seen = &seen_subnqn;
    } else {
      return parse_failed(message, "transport ID: unknown key '" + std::string(key) +
                                       "' (expected trtype, adrfam, traddr, trsvcid, subnqn)");
    }
    if (*seen) {
      return parse_failed(message, "transport ID: " + std::string(key) + " given twice");
    }
    *seen = true;

    if (seen == &seen_trtype) {
      if (!equals_ignore_case(value, "RDMA")) {
        return parse_failed(
            message, "transport ID: trtype '" + std::string(value) + "' not supported (only RDMA)");
      }
      trid.trtype = "RDMA";
    } else if (seen == &seen_adrfam) {
      if (equals_ignore_case(value, "IPv4")) {
        trid.adrfam = "IPv4";
      } else if (equals_ignore_case(value, "IPv6")) {
        trid.adrfam = "IPv6";
      } else {
        return parse_failed(message, "transport ID: adrfam '" + std::string(value) +
                                         "' not supported (IPv4 or IPv6)");
      }
    } else if (seen == &seen_traddr) {
      trid.traddr = std::string(value);
    } else if (seen == &seen_trsvcid) {
      unsigned port = 0;
      const auto [rest, error] = std::from_chars(value.data(), value.data() + value.size(), port);
      if (error != std::errc{} || rest != value.data() + value.size() || port == 0 ||
          port > 65535) {
        return parse_failed(message, "transport ID: trsvcid '" + std::string(value) +
                                         "' is not a port number (1..65535)");
      }
      trid.trsvcid = std::string(value);
    } else {
      if (!spec::nqn_valid(value)) {
        return parse_failed(message, "transport ID: subnqn '" + std::string(value) +
                                         "' is not an NQN (nqn.yyyy-mm.reverse.domain:name, at "
                                         "most 223 bytes)");
      }
      trid.subnqn = std::string(value);
    }
  }
  if (!seen_traddr) return parse_failed(message, "transport ID: traddr is required");
  return trid;
}

std::string TransportId::to_string() const {
  return "trtype:" + trtype + " adrfam:" + adrfam + " traddr:" + traddr + " trsvcid:" + trsvcid +
         " subnqn:" + subnqn;
}

uint16_t TransportId::port() const noexcept {
  unsigned port = 0;
  const auto [rest, error] = std::from_chars(trsvcid.data(), trsvcid.data() + trsvcid.size(), port);
  if (error != std::errc{} || rest != trsvcid.data() + trsvcid.size() || port > 65535) return 0;
  return static_cast<uint16_t>(port);
}

TransportId DiscoveryEntry::trid() const {
  TransportId id;
  switch (trtype) {
    case spec::trtype::rdma:
      id.trtype = "RDMA";
      break;
    case spec::trtype::fibre_channel:
      id.trtype = "FC";
      break;
    case spec::trtype::tcp:
      id.trtype = "TCP";
      break;
    default:
      // Not connectable here; the number keeps it visible in logs (parse() refuses it).
      id.trtype = std::to_string(trtype);
      break;
  }
  switch (adrfam) {
    case spec::adrfam::ipv4:
      id.adrfam = "IPv4";
      break;
    case spec::adrfam::ipv6:
      id.adrfam = "IPv6";
      break;
    case spec::adrfam::infiniband:
      id.adrfam = "IB";
      break;
    case spec::adrfam::fibre_channel:
      id.adrfam = "FC";
      break;
    default:
      id.adrfam = std::to_string(adrfam);
      break;
  }
  id.traddr = std::string(trim_padding(traddr));
  id.trsvcid = std::string(trim_padding(trsvcid));
  id.subnqn = std::string(trim_padding(subnqn));
  return id;
}

// ---------------------------------------------------------------------------------------
// Memory-registration policies

const char* memreg_policy_name(MemregPolicy policy) noexcept {
  switch (policy) {
    case MemregPolicy::global:
      return "global";
    case MemregPolicy::unsafe:
      return "unsafe";
    case MemregPolicy::sagi:
      return "sagi";
    case MemregPolicy::max:
      return "max";
    case MemregPolicy::deferred:
      return "deferred";
  }
  return "?";
}

bool memreg_policy_parse(std::string_view text, MemregPolicy* policy) noexcept {
  for (MemregPolicy candidate : {MemregPolicy::global, MemregPolicy::unsafe, MemregPolicy::sagi,
                                 MemregPolicy::max, MemregPolicy::deferred}) {
    if (text == memreg_policy_name(candidate)) {
      *policy = candidate;
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------
// Host identity

std::string uuid_to_string(const std::array<uint8_t, 16>& uuid) {
  // 36 characters + NUL.
  char text[37];
  snprintf(text, sizeof(text),
           "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", uuid[0], uuid[1],
           uuid[2], uuid[3], uuid[4], uuid[5], uuid[6], uuid[7], uuid[8], uuid[9], uuid[10],
           uuid[11], uuid[12], uuid[13], uuid[14], uuid[15]);
  return text;
}

bool uuid_parse(std::string_view text, std::array<uint8_t, 16>* uuid) {
  if (!spec::uuid_text_valid(text)) return false;
  std::array<uint8_t, 16> bytes{};
  size_t byte = 0;
  for (size_t i = 0; i < text.size(); i += 2) {
    if (text[i] == '-') ++i;  // dashes sit before an even number of hex digits
    bytes[byte++] = static_cast<uint8_t>(hex_value(text[i]) * 16 + hex_value(text[i + 1]));
  }
  *uuid = bytes;
  return true;
}

HostIdentity default_host_identity(const std::string& etc_dir) {
  HostIdentity identity;
  identity.hostnqn = read_first_line(etc_dir + "/hostnqn");
  const std::array<uint8_t, 16> generated = random_uuid();
  if (identity.hostnqn.empty()) {
    identity.hostnqn = std::string(spec::nqn_uuid_prefix) + uuid_to_string(generated);
  }
  // The host ID: the hostid file, else the UUID of a "...:uuid:<uuid>" host NQN (nvme-cli's
  // rule, so both name the same host), else a random one.
  if (uuid_parse(read_first_line(etc_dir + "/hostid"), &identity.hostid)) return identity;
  const size_t at = identity.hostnqn.rfind(":uuid:");
  if (at != std::string::npos &&
      uuid_parse(std::string_view(identity.hostnqn).substr(at + 6), &identity.hostid)) {
    return identity;
  }
  identity.hostid = generated;
  return identity;
}

namespace {

// The UUID of a "...:uuid:<uuid>" NQN.
bool uuid_of_nqn(std::string_view nqn, std::array<uint8_t, 16>* uuid) {
  const size_t at = nqn.rfind(":uuid:");
  return at != std::string_view::npos && uuid_parse(nqn.substr(at + 6), uuid);
}

// `mkdir -p dir`; the directories it creates get mode 0755 (whatever the umask). "" or why not.
std::string make_directories(const std::string& dir) {
  for (size_t end = 1; end <= dir.size(); ++end) {
    if (end != dir.size() && dir[end] != '/') continue;
    const std::string prefix = dir.substr(0, end);
    if (::mkdir(prefix.c_str(), 0755) == 0) {
      ::chmod(prefix.c_str(), 0755);
    } else if (errno != EEXIST) {
      return "cannot create " + prefix + ": " + std::strerror(errno);
    }
  }
  return "";
}

enum class Saved : uint8_t { yes, raced, failed };

// Writes `value` and a newline to `path`, mode 0644 (whatever the umask), unless the file
// exists: a temporary file linked into place, so that no reader sees half a line and a file
// another process made meanwhile is kept (`raced`). `failed` with *why set otherwise.
Saved save_line(const std::string& path, const std::string& value, std::string* why) {
  std::string temporary = path + ".XXXXXX";
  const int fd = ::mkstemp(temporary.data());
  if (fd < 0) {
    *why = std::strerror(errno);
    return Saved::failed;
  }
  const std::string text = value + "\n";
  bool written = ::fchmod(fd, 0644) == 0;
  for (size_t done = 0; written && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    written = n > 0;
    if (written) done += static_cast<size_t>(n);
  }
  written = written && ::fsync(fd) == 0;
  int os_errno = errno;
  ::close(fd);
  if (written && ::link(temporary.c_str(), path.c_str()) != 0) {
    written = false;
    os_errno = errno;
  }
  ::unlink(temporary.c_str());
  if (written) return Saved::yes;
  if (os_errno == EEXIST) return Saved::raced;
  *why = std::strerror(os_errno);
  return Saved::failed;
}

// Saves one piece unless its file exists: one that exists and holds nothing usable (empty, a
// hostid that is not a UUID) is the administrator's and is left alone, with a warning.
Saved save_piece(const std::string& path, const char* what, const std::string& value,
                 std::string* warning) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    *warning = path + " holds no " + what + ": left as it is, " + value + " used this time";
    return Saved::failed;
  }
  std::string why;
  const Saved saved = save_line(path, value, &why);
  if (saved == Saved::failed) {
    *warning = "cannot save the " + std::string(what) + " in " + path + ": " + why;
  }
  return saved;
}

}  // namespace

HostIdentity resolve_host_identity(const HostIdentity& given, const std::string& etc_dir, bool save,
                                   std::string* warning) {
  const std::string nqn_path = etc_dir + "/hostnqn";
  const std::string id_path = etc_dir + "/hostid";
  HostIdentity identity;
  if (warning != nullptr) warning->clear();
  // One more pass for each file that appeared while saving (it is read then): two at most,
  // since files are never removed here.
  for (int pass = 0; pass < 3; ++pass) {
    identity = given;
    bool nqn_made = false;
    bool id_made = false;
    if (identity.hostnqn.empty()) {
      identity.hostnqn = read_first_line(nqn_path);
      nqn_made = identity.hostnqn.empty();
    }
    if (identity.hostid == std::array<uint8_t, 16>{} &&
        !uuid_parse(read_first_line(id_path), &identity.hostid)) {
      id_made = true;
      if (nqn_made || !uuid_of_nqn(identity.hostnqn, &identity.hostid)) {
        identity.hostid = random_uuid();
      }
    }
    if (nqn_made) {
      identity.hostnqn = std::string(spec::nqn_uuid_prefix) + uuid_to_string(identity.hostid);
    }
    if (!save || (!nqn_made && !id_made)) return identity;

    const std::string made = make_directories(etc_dir);
    if (!made.empty()) {
      if (warning != nullptr) *warning = "cannot save the host identity: " + made;
      return identity;
    }
    std::string nqn_warning;
    std::string id_warning;
    if (nqn_made &&
        save_piece(nqn_path, "host NQN", identity.hostnqn, &nqn_warning) == Saved::raced) {
      continue;
    }
    if (id_made && save_piece(id_path, "host ID", uuid_to_string(identity.hostid), &id_warning) ==
                       Saved::raced) {
      continue;
    }
    if (warning != nullptr) {
      *warning = nqn_warning.empty() || id_warning.empty() ? nqn_warning + id_warning
                                                           : nqn_warning + "; " + id_warning;
    }
    return identity;
  }
  return identity;
}

}  // namespace nvmf::host
