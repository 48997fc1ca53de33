#include "render.h"

#include <algorithm>
#include <string_view>

namespace nvmf::ctl {

namespace {

// Members that name the object: its title in a block, the first columns of a table.
constexpr const char* kIdentifyingKeys[] = {"nqn", "name", "nsid", "cntlid"};

bool is_scalar(const Json& value) { return !value.is_object() && !value.is_array(); }

bool is_scalar_list(const Json& value) {
  return value.is_array() &&
         std::all_of(value.begin(), value.end(), [](const Json& v) { return is_scalar(v); });
}

bool is_object_list(const Json& value) {
  return value.is_array() && !value.empty() &&
         std::all_of(value.begin(), value.end(), [](const Json& v) { return v.is_object(); });
}

// A member that fits in one table cell or on one "key: value" line.
bool is_flat_member(const Json& value) { return is_scalar(value) || is_scalar_list(value); }

// Objects whose members are all flat make a table; otherwise each object gets a block.
bool is_flat_object_list(const Json& value) {
  return std::all_of(value.begin(), value.end(), [](const Json& object) {
    return std::all_of(object.begin(), object.end(),
                       [](const Json& member) { return is_flat_member(member); });
  });
}

std::string join_scalars(const Json& list) {
  if (list.empty()) return "(none)";
  std::string text;
  for (const Json& item : list) {
    if (!text.empty()) text += ", ";
    text += scalar_text(item);
  }
  return text;
}

std::string flat_text(const Json& value) {
  return value.is_array() ? join_scalars(value) : scalar_text(value);
}

std::string spaces(size_t count) { return std::string(count, ' '); }

void render_value(const Json& value, size_t indent, std::string* out);

// "key: value" lines for an object's flat members (keys aligned), then each nested member
// under its key. `skip` is a member already shown (a block's title).
void render_object(const Json& object, size_t indent, std::string* out,
                   const std::string& skip = "") {
  size_t width = 0;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (it.key() != skip && is_flat_member(*it)) width = std::max(width, it.key().size());
  }
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (it.key() == skip || !is_flat_member(*it)) continue;
    *out += spaces(indent) + it.key() + ":" + spaces(width - it.key().size() + 1) + flat_text(*it) +
            "\n";
  }
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (it.key() == skip || is_flat_member(*it)) continue;
    if (it->empty()) {
      *out += spaces(indent) + it.key() + ": (none)\n";
      continue;
    }
    *out += spaces(indent) + it.key() + ":\n";
    render_value(*it, indent + 2, out);
  }
}

std::string title_key(const Json& object) {
  for (const char* key : kIdentifyingKeys) {
    if (object.contains(key) && is_scalar(object[key])) return key;
  }
  return "";
}

// One block per object: its title (nqn or name), then its members indented.
void render_blocks(const Json& objects, size_t indent, std::string* out) {
  size_t index = 0;
  for (const Json& object : objects) {
    if (index != 0) *out += "\n";
    const std::string key = title_key(object);
    std::string title = "[" + std::to_string(index) + "]";
    if (key == "nqn" || key == "name") {
      title = scalar_text(object[key]);
    } else if (!key.empty()) {
      title = key + " " + scalar_text(object[key]);  // "cntlid 1": a bare number says little
    }
    *out += spaces(indent) + title + "\n";
    render_object(object, indent + 2, out, key);
    ++index;
  }
}

void render_value(const Json& value, size_t indent, std::string* out) {
  if (value.is_object()) {
    if (value.empty()) {
      *out += spaces(indent) + "(none)\n";
    } else {
      render_object(value, indent, out);
    }
  } else if (value.is_array()) {
    if (value.empty()) {
      *out += spaces(indent) + "(none)\n";
    } else if (is_object_list(value)) {
      if (is_flat_object_list(value)) {
        *out += render_table(table_of(value), indent);
      } else {
        render_blocks(value, indent, out);
      }
    } else {
      for (const Json& item : value) {
        if (is_scalar(item)) {
          *out += spaces(indent) + scalar_text(item) + "\n";
        } else {
          render_value(item, indent, out);  // a mixed list: each item in its own form
        }
      }
    }
  } else {
    *out += spaces(indent) + scalar_text(value) + "\n";
  }
}

}  // namespace

std::string scalar_text(const Json& value) {
  if (value.is_string()) {
    // An empty string would leave a hole in a table column (and a blank at a line's end).
    return value.get_ref<const std::string&>().empty() ? "\"\"" : value.get<std::string>();
  }
  if (value.is_null()) return "-";
  return value.dump();
}

Table table_of(const Json& objects) {
  Table table;
  std::vector<std::string> columns;
  auto add_column = [&](const std::string& key) {
    if (std::find(columns.begin(), columns.end(), key) == columns.end()) columns.push_back(key);
  };
  for (const char* key : kIdentifyingKeys) {
    for (const Json& object : objects) {
      if (object.contains(key)) {
        add_column(key);
        break;
      }
    }
  }
  for (const Json& object : objects) {
    for (auto it = object.begin(); it != object.end(); ++it) add_column(it.key());
  }
  table.header = columns;
  table.right_aligned.assign(columns.size(), true);
  for (const Json& object : objects) {
    std::vector<std::string> row;
    for (size_t c = 0; c < columns.size(); ++c) {
      const auto found = object.find(columns[c]);
      if (found == object.end()) {
        row.emplace_back("-");
        continue;
      }
      row.push_back(flat_text(*found));
      if (!found->is_number()) table.right_aligned[c] = false;
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::string render_table(const Table& table, size_t indent) {
  const size_t columns = table.header.size();
  std::vector<size_t> width(columns, 0);
  for (size_t c = 0; c < columns; ++c) width[c] = table.header[c].size();
  for (const auto& row : table.rows) {
    for (size_t c = 0; c < columns && c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text = spaces(indent);
    for (size_t c = 0; c < columns; ++c) {
      const std::string_view cell = c < cells.size() ? std::string_view(cells[c]) : "";
      const size_t pad = width[c] - cell.size();
      const bool right = c < table.right_aligned.size() && table.right_aligned[c];
      if (c != 0) text += "  ";
      if (right) text += spaces(pad);
      text += cell;
      if (!right) text += spaces(pad);
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  line(table.header);
  for (const auto& row : table.rows) line(row);
  return out;
}

std::vector<std::pair<std::string, std::string>> method_list(const Json& result) {
  std::vector<std::pair<std::string, std::string>> methods;
  const Json& list = result.is_object() && result.contains("methods") ? result["methods"] : result;
  auto text_of = [](const Json& object, std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
      const auto found = object.find(key);
      if (found != object.end() && found->is_string()) return found->get<std::string>();
    }
    return std::string();
  };
  if (list.is_object()) {
    for (auto it = list.begin(); it != list.end(); ++it) {
      methods.emplace_back(it.key(), it->is_string() ? it->get<std::string>() : "");
    }
  } else if (list.is_array()) {
    for (const Json& item : list) {
      if (item.is_string()) {
        methods.emplace_back(item.get<std::string>(), "");
      } else if (item.is_object()) {
        std::string name = text_of(item, {"name", "method"});
        if (!name.empty()) {
          methods.emplace_back(std::move(name), text_of(item, {"summary", "description", "help"}));
        }
      }
    }
  }
  std::sort(methods.begin(), methods.end());
  return methods;
}

std::string render_human(const Json& result) {
  if (result.is_null()) return "ok\n";
  std::string out;
  render_value(result, 0, &out);
  return out;
}

std::string render_human(const std::string& method, const Json& result) {
  if (method == "bdev_list" && result.is_array()) {
    Json shown = result;
    for (Json& bdev : shown) {
      if (bdev.is_object()) bdev.erase("config");
    }
    return render_human(shown);
  }
  return render_human(result);
}

}  // namespace nvmf::ctl
