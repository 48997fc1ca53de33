#!/usr/bin/env bash
# Mechanical house-style checks (STYLE.md point 14). Exits non-zero with one line per finding.
#  - banned everywhere in src/ and tools/: sprintf, strcpy, strcat, atoi, gets (unbounded or
#    silently failing); use snprintf, bounded copies, strtoul/std::from_chars with checks.
#  - on data-path folders: new, malloc and std::function. A line that must allocate on the
#    setup path says so with the marker `setup-path` in a comment on the same line.
#  - layer boundaries: verbs / rdma_cm headers only in src/verbs, DPDK headers only in
#    src/env, VFIO only in src/nvme_pcie.
set -uo pipefail
cd "$(dirname "$0")/.."

DATA_PATH_DIRS=(src/reactor src/nvme_pcie src/bdev src/memreg src/transport_rdma src/initiator src/target src/nbd)
findings=0

report() {
  echo "style: $1"
  findings=$((findings + 1))
}

# Prints "file:line:code" with // comments and string literals removed, for C/C++ sources.
code_lines() {
  local dir
  for dir in "$@"; do
    [ -d "$dir" ] || continue
    find "$dir" -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.c' \) -print0 |
      xargs -0 -r grep -Hn '' |
      sed -E 's#//.*$##; s#"([^"\\]|\\.)*"#""#g'
  done
}

while IFS= read -r hit; do
  report "banned call (use a bounded/checked alternative): $hit"
done < <(code_lines src tools | grep -E '\b(sprintf|vsprintf|strcpy|strcat|atoi|atol|gets)\s*\(' || true)

while IFS= read -r hit; do
  report "allocation or std::function on the data path (mark setup-path if it is not): $hit"
done < <(for dir in "${DATA_PATH_DIRS[@]}"; do
           [ -d "$dir" ] || continue
           find "$dir" -type f \( -name '*.h' -o -name '*.cpp' \) ! -name 'harness.*' -print0 |
             xargs -0 -r grep -Hn '' | grep -v 'setup-path' |
             sed -E 's#//.*$##; s#"([^"\\]|\\.)*"#""#g' |
             grep -vE '^[^:]+:[0-9]+:\s*(\*|#\s*include)' |
             grep -E '^[^:]+:[0-9]+:.*(\bnew\b|\bmalloc\s*\(|std::function)'
         done || true)

while IFS= read -r hit; do
  report "verbs/rdma_cm header outside src/verbs: $hit"
done < <(grep -rnE '#\s*include\s*[<"](infiniband|rdma)/' src tools include 2>/dev/null |
           grep -v '^src/verbs/' || true)

while IFS= read -r hit; do
  report "DPDK header outside src/env: $hit"
done < <(grep -rnE '#\s*include\s*[<"]rte_[a-z_]+\.h' src tools include 2>/dev/null |
           grep -v '^src/env/' || true)

while IFS= read -r hit; do
  report "VFIO outside src/nvme_pcie: $hit"
done < <(grep -rnE '#\s*include\s*[<"]linux/vfio\.h' src tools include 2>/dev/null |
           grep -v '^src/nvme_pcie/' || true)

if [ "$findings" -ne 0 ]; then
  echo "style: $findings finding(s)"
  exit 1
fi
echo "style: clean"
