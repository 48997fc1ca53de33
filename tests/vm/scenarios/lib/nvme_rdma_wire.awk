# Checks a capture of nvmf_perf sessions against nvmf_tgt, decoded by tshark's InfiniBand
# (RRoCE) and nvme-rdma dissectors, against what both sides meant to send. Used by
# wire_rxe.sh; reads `tshark -2 -T fields -E header=y -E separator=/t -E occurrence=f` output
# with the fields of WIRE_FIELDS there (any order: columns are found by the header's names).
#
# One session = one nvmf_perf run: an admin queue (CM REQ with QID 0), then one I/O queue
# (QID 1). Sessions must not overlap in time; a CM REQ for QID 0 starts the next one.
# Variables (awk -v), space-separated lists with one word per session:
#   nqns      subsystem NQN of each session
#   entries   I/O queue entries each session should negotiate (HRQSIZE = CRQSIZE = entries,
#             HSQSIZE = Connect SQSIZE = entries - 1)
#   ios       I/Os nvmf_perf reported (read + write commands on the wire must add up to it)
#   admin     admin queue entries (HRQSIZE = CRQSIZE = admin, HSQSIZE = SQSIZE = admin - 1)
#   nlb       blocks per I/O as tshark shows NLB (it prints NLB + 1: 16 for 8 KiB of 512 B)
#   port addr peer   the target's port and address, the host's address
# Prints one block of decoded values per session; exits 1 after printing every mismatch.

function bad(session, what) {
  printf "wire: FAIL: session %d: %s\n", session, what
  failures++
}
function frame_bad(session, what) {   # per-frame mismatches: the first 5 are printed
  if (++frame_failures <= 5) bad(session, "frame " col("frame.number") ": " what)
  else failures++
}
function col(name) {
  return (name in index_of) ? $(index_of[name]) : ""
}
function qid_of(hex) {   # nvme-rdma.cmd.qid is printed as 0x0000, 0x0001, ...
  return hex == "0x0000" ? 0 : (hex == "0x0001" ? 1 : hex)
}
function count(array, key) {
  return (key in array) ? array[key] : 0
}
function opcode_list(session, queue,    key, parts, out) {
  out = ""
  for (key in opc) {
    split(key, parts, SUBSEP)
    if (parts[1] == session && parts[2] == queue) out = out " " parts[3] " x" opc[key]
  }
  return out
}

BEGIN {
  sessions = split(nqns, nqn_of, " ")
  split(entries, entries_of, " ")
  split(ios, ios_of, " ")
  dport = sprintf("0x%04x", port)
  s = 0
}
NR == 1 {
  for (i = 1; i <= NF; i++) index_of[$i] = i
  next
}
{
  attr = col("infiniband.mad.attributeid")
  tid = col("infiniband.mad.transactionid")
  if (attr == "0x0010") {   # CM REQ
    if (tid in tid_session) { retransmitted++; next }
    q = col("nvme-rdma.cm.req.qid")
    if (q == "") { frame_bad(s, "CM REQ without decoded NVMe/RDMA private data"); next }
    if (q == "0") s++
    tid_session[tid] = s SUBSEP q
    req[s, q] = col("nvme-rdma.cm.req.recfmt") " " col("nvme-rdma.cm.req.hrqsize") " " \
                col("nvme-rdma.cm.req.hsqsize") " " col("nvme-rdma.cm.req.cntlid")
    req_seen[s, q]++
    if (col("infiniband.cm.req.serviceid.dport") != dport)
      bad(s, "CM REQ for QID " q ": service ID port " col("infiniband.cm.req.serviceid.dport") ", not " dport)
    if (col("infiniband.cm.req.ip_cm.sip4") != peer || col("infiniband.cm.req.ip_cm.dip4") != addr)
      bad(s, "CM REQ for QID " q ": IP CM " col("infiniband.cm.req.ip_cm.sip4") " -> " col("infiniband.cm.req.ip_cm.dip4"))
    next
  }
  if (attr == "0x0013" || attr == "0x0014") {   # CM REP, RTU: the REQ's transaction ID
    if (!(tid in tid_session)) { bad(s, "CM " (attr == "0x0013" ? "REP" : "RTU") " for an unknown REQ"); next }
    split(tid_session[tid], key, SUBSEP)
    if (attr == "0x0013") rep[key[1], key[2]] = col("nvme-rdma.cm.rsp.recfmt") " " col("nvme-rdma.cm.rsp.crqsize")
    else rtu[key[1], key[2]]++
    next
  }
  if (attr == "0x0015") { dreq[s]++; next }
  if (attr == "0x0016") { drep[s]++; next }
  if (attr != "") next

  q = qid_of(col("nvme-rdma.cmd.qid"))
  if (q == "") next
  bth = col("infiniband.bth.opcode")
  if (bth == "12") rdma_read[s, q]++                    # RDMA READ request: the target pulls data
  if (bth == "6" || bth == "10") rdma_write[s, q]++       # RDMA WRITE first/only: the target pushes data
  if (col("nvme.fabrics.cmd.opc") == "7f") {
    fct = col("nvme.fabrics.cmd.fctype")
    fabrics[s, q, fct]++
    if (fct == "0x01") connect[s, q] = col("nvme.fabrics.cmd.connect.qid") " " col("nvme.fabrics.cmd.connect.sqsize")
  } else if (col("nvme.cmd.opc") != "") {
    op = col("nvme.cmd.opc")
    opc[s, q, op]++
    if (q == 1 && (op == "0x01" || op == "0x02")) {
      if (col("nvme.cmd.nsid") != "0x00000001") frame_bad(s, "I/O command NSID " col("nvme.cmd.nsid") ", not 0x00000001")
      if (col("nvme.cmd.nlb") != nlb) frame_bad(s, "I/O command NLB " col("nvme.cmd.nlb") ", not " nlb)
    }
  }
  if (col("nvme.fabrics.cmd.connect.data.subnqn") != "")
    connect_data[s, q] = col("nvme.fabrics.cmd.connect.data.subnqn") " " col("nvme.fabrics.cmd.connect.data.cntrlid")
  if (col("nvme.cqe.status") != "") {
    cqes[s, q]++
    if (col("nvme.cqe.status") != "0x0000") frame_bad(s, "CQE status " col("nvme.cqe.status"))
    if (col("nvme.fabrics.cqe.connect.cntrlid") != "") cntlid[s, q] = col("nvme.fabrics.cqe.connect.cntrlid")
  }
}
END {
  if (s != sessions) bad(s, "the capture holds " s " sessions (admin queue CM REQs), expected " sessions)
  for (i = 1; i <= sessions && i <= s; i++) {
    e = entries_of[i]
    c = (i SUBSEP 0) in cntlid ? cntlid[i, 0] : "?"
    printf "session %d: %s, I/O queue of %d entries expected\n", i, nqn_of[i], e
    for (q = 0; q <= 1; q++) {
      n = q == 0 ? admin : e
      want_req = "0 " n " " (n - 1) " " (q == 0 ? "0x0000" : c)
      printf "  QID %d  CM REQ: RECFMT HRQSIZE HSQSIZE CNTLID = %s; CM REP: RECFMT CRQSIZE = %s; RTU x%d\n", \
        q, req[i, q], rep[i, q], count(rtu, i SUBSEP q)
      printf "         Connect (0x7f/0x01): QID SQSIZE = %s; data: SUBNQN CNTLID = %s; CQE CNTLID %s\n", \
        connect[i, q], connect_data[i, q], cntlid[i, q]
      if (count(req_seen, i SUBSEP q) != 1) bad(i, "QID " q ": " count(req_seen, i SUBSEP q) " CM REQs, expected 1")
      if (req[i, q] != want_req) bad(i, "QID " q ": CM REQ RECFMT HRQSIZE HSQSIZE CNTLID are '" req[i, q] "', expected '" want_req "'")
      if (rep[i, q] != "0 " n) bad(i, "QID " q ": CM REP RECFMT CRQSIZE are '" rep[i, q] "', expected '0 " n "'")
      if (count(rtu, i SUBSEP q) != 1) bad(i, "QID " q ": " count(rtu, i SUBSEP q) " CM RTUs, expected 1")
      if (connect[i, q] != q " " (n - 1)) bad(i, "QID " q ": Connect QID SQSIZE are '" connect[i, q] "', expected '" q " " (n - 1) "'")
      want_data = nqn_of[i] " " (q == 0 ? "0xffff" : c)
      if (connect_data[i, q] != want_data) bad(i, "QID " q ": Connect data SUBNQN CNTLID are '" connect_data[i, q] "', expected '" want_data "'")
      if (cntlid[i, q] != c || c == "0xffff") bad(i, "QID " q ": Connect CQE CNTLID '" cntlid[i, q] "', expected the admin queue's (" c ")")
    }
    reads = count(opc, i SUBSEP 1 SUBSEP "0x02"); writes = count(opc, i SUBSEP 1 SUBSEP "0x01")
    printf "  admin: Property Get (0x7f/0x04) x%d, Property Set (0x7f/0x00) x%d, opcodes%s\n", \
      count(fabrics, i SUBSEP 0 SUBSEP "0x04"), count(fabrics, i SUBSEP 0 SUBSEP "0x00"), opcode_list(i, 0)
    printf "  I/O:  opcodes%s (nvmf_perf: %d I/Os), NSID 1, NLB %s; RDMA READ requests %d, RDMA WRITEs %d; CQEs %d\n", \
      opcode_list(i, 1), ios_of[i], nlb, count(rdma_read, i SUBSEP 1), count(rdma_write, i SUBSEP 1), count(cqes, i SUBSEP 1)
    printf "  CM DREQ x%d, DREP x%d\n", count(dreq, i), count(drep, i)
    if (count(fabrics, i SUBSEP 0 SUBSEP "0x04") < 1) bad(i, "no Property Get on the admin queue")
    if (count(fabrics, i SUBSEP 0 SUBSEP "0x00") < 1) bad(i, "no Property Set on the admin queue")
    if (count(opc, i SUBSEP 0 SUBSEP "0x06") < 1) bad(i, "no Identify (0x06) on the admin queue")
    if (count(opc, i SUBSEP 0 SUBSEP "0x01") + count(opc, i SUBSEP 0 SUBSEP "0x02") > 0) bad(i, "read/write opcodes on the admin queue")
    if (reads < 1 || writes < 1) bad(i, "reads " reads ", writes " writes ": expected both")
    if (opcode_list(i, 1) != " 0x01 x" writes " 0x02 x" reads && opcode_list(i, 1) != " 0x02 x" reads " 0x01 x" writes)
      bad(i, "I/O queue opcodes other than read and write:" opcode_list(i, 1))
    if (reads + writes != ios_of[i]) bad(i, "reads + writes on the wire = " reads + writes ", nvmf_perf counted " ios_of[i])
    # Keyed SGLs (8 KiB > the 4 KiB in-capsule limit): one RDMA READ per write and per Connect
    # (its 1 KiB data), one RDMA WRITE (first or only packet) per read.
    if (count(rdma_read, i SUBSEP 1) != writes + 1) bad(i, "RDMA READ requests on the I/O queue " count(rdma_read, i SUBSEP 1) ", expected writes + 1 = " writes + 1)
    if (count(rdma_write, i SUBSEP 1) != reads) bad(i, "RDMA WRITEs on the I/O queue " count(rdma_write, i SUBSEP 1) ", expected reads = " reads)
    if (count(cqes, i SUBSEP 1) != reads + writes + 1) bad(i, "CQEs on the I/O queue " count(cqes, i SUBSEP 1) ", expected reads + writes + Connect = " reads + writes + 1)
    if (count(dreq, i) < 2) bad(i, count(dreq, i) " CM DREQs, expected one per queue")
  }
  if (retransmitted) printf "(%d retransmitted CM REQs ignored)\n", retransmitted
  if (frame_failures > 5) printf "wire: FAIL: %d per-frame mismatches in all, the first 5 above\n", frame_failures
  exit failures ? 1 : 0
}
