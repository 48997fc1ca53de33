#include "hostd_render.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <utility>
#include <vector>

#include "render.h"

namespace nvmf::ctl {

namespace {

// A member as text: a string bare, a number as JSON; absent, null or "" as "-" (no hole in a
// table column).
std::string member_text(const Json& object, const char* key) {
  const auto found = object.find(key);
  if (found == object.end() || found->is_null()) return "-";
  if (!found->is_string()) return found->dump();
  return found->get_ref<const std::string&>().empty() ? "-" : found->get<std::string>();
}

const Json& namespaces_of(const Json& controller) {
  static const Json kNone = Json::array();
  const auto found = controller.find("namespaces");
  return found == controller.end() || found->is_null() ? kNone : *found;
}

}  // namespace

std::string devices_text(const Json& controller) {
  std::string out;
  for (const Json& ns : namespaces_of(controller)) out += ns.at("device").get<std::string>() + "\n";
  return out;
}

std::string disconnected_text(const Json& result, const std::string& nqn) {
  std::vector<std::pair<std::string, size_t>> counts;  // NQN -> controllers, first seen first
  for (const Json& controller : result.at("disconnected")) {
    const std::string subnqn = member_text(controller, "subnqn");
    auto found = counts.begin();
    while (found != counts.end() && found->first != subnqn) ++found;
    if (found == counts.end()) {
      counts.emplace_back(subnqn, 1);
    } else {
      ++found->second;
    }
  }
  if (counts.empty()) {
    return (nqn.empty() ? std::string() : "NQN:" + nqn + " ") + "disconnected 0 controller(s)\n";
  }
  std::string out;
  for (const auto& [subnqn, count] : counts) {
    out += "NQN:" + subnqn + " disconnected " + std::to_string(count) + " controller(s)\n";
  }
  return out;
}

std::string size_text(uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  if (bytes < 1000) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1000 && unit + 1 < std::size(kUnits)) {
    value /= 1000;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f %s", value, kUnits[unit]);
  return text;
}

std::string address_text(const std::string& traddr, const std::string& trsvcid) {
  const bool ipv6 = traddr.find(':') != std::string::npos;
  return (ipv6 ? "[" + traddr + "]" : traddr) + ":" + trsvcid;
}

std::string controller_list_text(const Json& result) {
  const Json& controllers = result.at("controllers");
  if (controllers.empty()) return "No controllers are connected through nvmf_hostd.\n";
  Table table;
  table.header = {"Node",          "Namespace", "Size",  "Format",
                  "Subsystem NQN", "Address",   "State", "Memreg"};
  table.right_aligned = {false, true, true, false, false, false, false, false};
  for (const Json& controller : controllers) {
    const std::vector<std::string> tail = {
        member_text(controller, "subnqn"),
        address_text(member_text(controller, "traddr"), member_text(controller, "trsvcid")),
        member_text(controller, "state"), member_text(controller, "memreg")};
    std::vector<std::vector<std::string>> rows;
    for (const Json& ns : namespaces_of(controller)) {
      const auto size = ns.find("size_bytes");
      const auto block = ns.find("block_size");
      rows.push_back(
          {member_text(ns, "device"), member_text(ns, "nsid"),
           size != ns.end() && size->is_number_unsigned() ? size_text(size->get<uint64_t>()) : "-",
           block != ns.end() && block->is_number_unsigned()
               ? std::to_string(block->get<uint64_t>()) + " B"
               : "-"});
    }
    if (rows.empty()) rows.push_back({"-", "-", "-", "-"});
    for (auto& row : rows) {
      row.insert(row.end(), tail.begin(), tail.end());
      table.rows.push_back(std::move(row));
    }
  }
  // nvme list's dashes under each heading, as wide as the column.
  std::vector<std::string> dashes;
  for (size_t column = 0; column < table.header.size(); ++column) {
    size_t width = table.header[column].size();
    for (const auto& row : table.rows) width = std::max(width, row[column].size());
    dashes.emplace_back(width, '-');
  }
  table.rows.insert(table.rows.begin(), dashes);
  return render_table(table);
}

}  // namespace nvmf::ctl
