// nvmfctl tgt -o human: a JSON-RPC result as text a person reads. Pure, shape-driven (no
// per-method code, so a method added to the target renders without a change here):
//
//   null                     "ok"
//   string, number, bool     the value
//   object                   "key: value" lines, keys aligned; a nested object or list of
//                            objects below its key, indented
//   list of flat objects     an aligned table, one row each (bdev_list, and lists in stats)
//   list of objects that hold lists or objects (subsystem_list: namespaces, listeners,
//                            controllers; stats: bdevs)  one block per object, titled by its
//                            "nqn" or "name" (or "cntlid N", "nsid N"), its lists as indented
//                            tables
//   list of scalars          one per line; inside an object: "a, b, c" on the key's line
//   empty list               "(none)"
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace nvmf::ctl {

using Json = nlohmann::json;

// The whole result, ending with a newline.
std::string render_human(const Json& result);
// `method`'s result: as above, without the members its human view leaves to -o json
// (bdev_list: "config", the creation parameters again, so that the list is a table).
std::string render_human(const std::string& method, const Json& result);

// An aligned table: columns separated by two spaces, numbers right-aligned, no trailing
// blanks; `indent` spaces before each line.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> right_aligned;  // per column; missing = left
};
std::string render_table(const Table& table, size_t indent = 0);

// A list of objects as a Table: columns are the union of the members (identifying ones first:
// nqn, name, nsid, cntlid, then in order of appearance), a missing member is "-", a list of
// scalars is "a, b".
Table table_of(const Json& objects);

// rpc_get_methods' result as (name, summary) pairs, by name. Takes the shapes a method list
// comes in: {"name": "summary", ...}, [{"name": ..., "summary": ...}, ...], ["name", ...],
// or any of these under "methods"; names without a summary get "".
std::vector<std::pair<std::string, std::string>> method_list(const Json& result);

// A scalar as a cell: strings bare (the empty one as ""), null "-", numbers and booleans as
// JSON.
std::string scalar_text(const Json& value);

}  // namespace nvmf::ctl
