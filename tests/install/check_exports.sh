#!/usr/bin/env bash
# check_exports.sh LIBRARY INCLUDE_DIR
# Fails if the shared library exports a defined dynamic symbol outside the public API, or if
# the API is missing. The rule, for each symbol `nm -D --defined-only` lists, demangled:
#   - the symbol version NVMF_HOST_0 (src/initiator/libnvmf_host.map) passes;
#   - in namespace nvmf or nvmf::host, a member (constructor, destructor, function) of a class
#     declared `class NVMF_API X` in INCLUDE_DIR/nvmf/*.h, whose name those headers declare,
#     or X's vtable or typeinfo, passes;
#   - in namespace nvmf or nvmf::host, a function declared with NVMF_API in those headers
#     (free, or a member of a declared struct: TransportId::parse) passes;
#   - anything else fails: other namespaces (nvmf::memreg, ..., std:: template instances, C
#     symbols), an Impl (a class's private implementation), templates, anonymous namespaces.
# Required: a few entry points every application needs (Host::create, ...).
set -uo pipefail
library=$1
include_dir=$2

headers=$(cat "$include_dir"/nvmf/*.h | sed -E 's#//.*$##')
api_classes=$(grep -oE '\bclass NVMF_API [A-Za-z_][A-Za-z0-9_]*' <<< "$headers" | awk '{print $3}')
api_functions=$(grep -E '\bNVMF_API\b' <<< "$headers" | grep -vE '\b(class|struct) NVMF_API\b' |
                  sed -E 's/\(.*//' | grep -oE '[A-Za-z_][A-Za-z0-9_]*$')
declared_types=$(grep -oE '\b(class|struct)( NVMF_API)? [A-Za-z_][A-Za-z0-9_]*\b' <<< "$headers" |
                   awk '{print $NF}')
declared_names=$(grep -oE '[A-Za-z_][A-Za-z0-9_]*\s*\(' <<< "$headers" | sed -E 's/\s*\($//')

in_list() {  # in_list WORD LIST
  grep -qxF -- "$1" <<< "$2"
}

# Prints why the symbol is not public API; nothing when it is.
judge() {
  local name=$1 entity=$1 vague=0
  case "$name" in
    NVMF_HOST_0) return ;;
    "vtable for "* | "typeinfo for "* | "typeinfo name for "* | "VTT for "*)
      entity=${name#* for }
      entity=${entity#name for }
      vague=1 ;;
    "non-virtual thunk to "*) entity=${name#non-virtual thunk to } ;;
  esac
  case "$entity" in
    *Impl*) echo "the library's private implementation (Impl)"; return ;;
    *"(anonymous namespace)"*) echo "an anonymous namespace"; return ;;
  esac
  local path
  path=$(sed -E 's/\[abi:[a-z0-9_]+\]//g' <<< "${entity%%(*}")  # C++11 ABI tags: not names
  if [[ "$path" == *"<"* || "$path" == *" "* ]]; then
    echo "a template instance or special symbol"
    return
  fi
  local rest
  case "$path" in
    nvmf::host::*) rest=${path#nvmf::host::} ;;
    nvmf::*) rest=${path#nvmf::} ;;
    *) echo "outside namespaces nvmf and nvmf::host"; return ;;
  esac
  local scope=${rest%%::*} member=${rest#*::}
  if [ "$vague" -eq 1 ]; then
    [[ "$rest" != *::* ]] && in_list "$rest" "$api_classes" && return
    echo "vtable/typeinfo of a class not declared NVMF_API"
    return
  fi
  if [[ "$rest" != *::* ]]; then
    in_list "$rest" "$api_functions" && return
    echo "a function not declared NVMF_API in include/nvmf"
    return
  fi
  if [[ "$member" == *::* ]]; then
    echo "a nested scope"
    return
  fi
  if in_list "$scope" "$api_classes"; then
    [ "$member" = "$scope" ] || [ "$member" = "~$scope" ] && return  # constructor, destructor
    in_list "$member" "$declared_names" && return
    echo "a member that include/nvmf does not declare"
    return
  fi
  if in_list "$scope" "$declared_types" && in_list "$member" "$api_functions"; then
    return
  fi
  echo "a member of a type that is not public API"
}

symbols=$(nm -D --defined-only -C "$library") || { echo "FAIL: nm $library"; exit 1; }
failures=0
count=0
paths=""
while read -r _address type name; do
  [ -n "$name" ] || continue
  name=$(sed -E 's/@@?[A-Za-z0-9_.]+$//' <<< "$name")
  count=$((count + 1))
  reason=$(judge "$name")
  if [ -n "$reason" ]; then
    echo "FAIL: exported ($type) $name: $reason"
    failures=$((failures + 1))
  fi
  paths+="${name%%(*}"$'\n'
done <<< "$symbols"

for required in nvmf::host::Host::create nvmf::host::Host::connect nvmf::host::TransportId::parse \
                nvmf::host::Namespace::write nvmf::host::IoQpair::process_completions \
                nvmf::error_describe; do
  if ! grep -qxF -- "$required" <<< "$paths"; then
    echo "FAIL: $required is not exported"
    failures=$((failures + 1))
  fi
done
echo "$count exported symbol(s), $failures failure(s)"
[ "$failures" -eq 0 ]
