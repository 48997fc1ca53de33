// The --verify pattern: what a write puts in each block and what a read accepts. A flipped
// byte, a block of the wrong LBA or namespace and a stale generation must all be caught.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "verify.h"

namespace nvmf::perf {
namespace {

constexpr uint32_t kBlock = 512;
constexpr uint32_t kBlocks = 8;  // a 4 KiB I/O
constexpr uint32_t kNsid = 3;
constexpr uint64_t kLba = 4096;

std::vector<uint8_t> written(uint32_t generation, uint64_t lba = kLba, uint32_t nsid = kNsid,
                             uint32_t block = kBlock, uint32_t blocks = kBlocks) {
  std::vector<uint8_t> buffer(size_t{block} * blocks);
  pattern_fill(buffer.data(), block, nsid, lba, blocks, generation);
  return buffer;
}

bool check(const std::vector<uint8_t>& buffer, uint32_t generation, PatternMismatch* mismatch,
           uint64_t lba = kLba, uint32_t nsid = kNsid) {
  return pattern_check(buffer.data(), kBlock, nsid, lba, kBlocks, generation, mismatch);
}

TEST(PerfVerify, WhatWasWrittenChecks) {
  PatternMismatch mismatch;
  for (uint32_t generation : {1u, 2u, 77u, 0xFFFFFFFEu}) {
    EXPECT_TRUE(check(written(generation), generation, &mismatch)) << generation;
  }
  // Other block sizes (4 KiB formats) and single blocks.
  std::vector<uint8_t> big = written(9, 10, 1, 4096, 2);
  EXPECT_TRUE(pattern_check(big.data(), 4096, 1, 10, 2, 9, &mismatch));
}

TEST(PerfVerify, BlocksCarryLbaNamespaceAndGeneration) {
  const std::vector<uint8_t> buffer = written(5);
  for (uint32_t b = 0; b < kBlocks; ++b) {
    uint64_t lba;
    uint64_t tag;
    std::memcpy(&lba, buffer.data() + b * kBlock, 8);
    std::memcpy(&tag, buffer.data() + b * kBlock + 8, 8);
    EXPECT_EQ(lba, kLba + b);
    EXPECT_EQ(tag, uint64_t{kNsid} << 32 | 5);
  }
  // Different blocks, generations and namespaces fill differently.
  EXPECT_NE(std::memcmp(buffer.data() + 16, buffer.data() + kBlock + 16, kBlock - 16), 0);
  EXPECT_NE(written(5), written(6));
  EXPECT_NE(written(5, kLba, 1), written(5, kLba, 2));
}

TEST(PerfVerify, AFlippedByteAnywhereIsCaught) {
  const std::vector<uint8_t> good = written(4);
  for (size_t offset = 0; offset < good.size(); offset += 37) {
    std::vector<uint8_t> bad = good;
    bad[offset] ^= 0x10;
    PatternMismatch mismatch;
    ASSERT_FALSE(check(bad, 4, &mismatch)) << "byte " << offset;
    EXPECT_EQ(mismatch.lba, kLba + offset / kBlock);
    EXPECT_EQ(mismatch.byte_offset, offset % kBlock / 8 * 8);
    EXPECT_NE(mismatch.expected, mismatch.actual);
  }
}

TEST(PerfVerify, AWrongLbaIsCaught) {
  PatternMismatch mismatch;
  // The data of LBA 4096.. read back as if from 4097..: the header says so at once.
  EXPECT_FALSE(check(written(4), 4, &mismatch, kLba + 1));
  EXPECT_EQ(mismatch.lba, kLba + 1);
  EXPECT_EQ(mismatch.byte_offset, 0u);
  EXPECT_EQ(mismatch.expected, kLba + 1);
  EXPECT_EQ(mismatch.actual, kLba);
  // One block of the I/O came from elsewhere (a misdirected write or read).
  std::vector<uint8_t> buffer = written(4);
  const std::vector<uint8_t> other = written(4, 999);
  std::memcpy(buffer.data() + 5 * kBlock, other.data(), kBlock);
  EXPECT_FALSE(check(buffer, 4, &mismatch));
  EXPECT_EQ(mismatch.lba, kLba + 5);
  // Only the LBA word right but the rest of another block: still caught.
  std::memcpy(buffer.data() + 5 * kBlock, written(4).data() + 5 * kBlock, 16);
  EXPECT_FALSE(check(buffer, 4, &mismatch));
  EXPECT_EQ(mismatch.byte_offset, 16u);
}

TEST(PerfVerify, AWrongNamespaceIsCaught) {
  PatternMismatch mismatch;
  EXPECT_FALSE(check(written(4, kLba, kNsid + 1), 4, &mismatch));
  EXPECT_EQ(mismatch.byte_offset, 8u);
}

TEST(PerfVerify, AStaleGenerationIsCaught) {
  PatternMismatch mismatch;
  EXPECT_FALSE(check(written(6), 7, &mismatch)) << "the last write was lost";
  EXPECT_EQ(mismatch.byte_offset, 8u);
  EXPECT_EQ(mismatch.expected, uint64_t{kNsid} << 32 | 7);
  EXPECT_EQ(mismatch.actual, uint64_t{kNsid} << 32 | 6);
  // Half of the blocks new, half old: a torn write.
  std::vector<uint8_t> torn = written(7);
  const std::vector<uint8_t> old = written(6);
  std::memcpy(torn.data() + 4 * kBlock, old.data() + 4 * kBlock, 4 * kBlock);
  EXPECT_FALSE(check(torn, 7, &mismatch));
  EXPECT_EQ(mismatch.lba, kLba + 4);
}

TEST(PerfVerify, NeverWrittenAcceptsZeroesOrAnIntactEarlierPattern) {
  PatternMismatch mismatch;
  std::vector<uint8_t> zeroes(kBlock * kBlocks, 0);
  EXPECT_TRUE(check(zeroes, kGenerationNone, &mismatch));
  // A real target keeps what an earlier run wrote: intact, it is fine.
  EXPECT_TRUE(check(written(1234), kGenerationNone, &mismatch));
  // A mix of zero blocks and earlier-run blocks too.
  std::vector<uint8_t> mixed = written(3);
  std::memset(mixed.data(), 0, kBlock);
  EXPECT_TRUE(check(mixed, kGenerationNone, &mismatch));
  // But not another LBA's or namespace's block, a corrupt one, or the poison of a read that
  // moved no data.
  EXPECT_FALSE(check(written(3, kLba + 8), kGenerationNone, &mismatch));
  EXPECT_FALSE(check(written(3, kLba, kNsid + 1), kGenerationNone, &mismatch));
  std::vector<uint8_t> corrupt = written(3);
  corrupt[kBlock * 2 + 100] ^= 1;
  EXPECT_FALSE(check(corrupt, kGenerationNone, &mismatch));
  EXPECT_EQ(mismatch.lba, kLba + 2);
  std::vector<uint8_t> poison(kBlock * kBlocks, 0xFF);
  EXPECT_FALSE(check(poison, kGenerationNone, &mismatch));
  zeroes[kBlock * 7 + 511] = 1;
  EXPECT_FALSE(check(zeroes, kGenerationNone, &mismatch));
  EXPECT_EQ(mismatch.lba, kLba + 7);
  EXPECT_EQ(mismatch.byte_offset, 504u);
  EXPECT_EQ(mismatch.expected, 0u);
}

TEST(PerfVerify, UnknownAcceptsAnything) {
  PatternMismatch mismatch;
  std::vector<uint8_t> poison(kBlock * kBlocks, 0xFF);
  EXPECT_TRUE(check(poison, kGenerationUnknown, &mismatch));
  EXPECT_TRUE(check(written(5), kGenerationUnknown, &mismatch));
}

// After a failed write (generation 8, the last acknowledged one 6) a block may hold either:
// the write may have landed on none, some or all of its blocks.
bool check_after_failed(const std::vector<uint8_t>& buffer, uint32_t acknowledged,
                        uint32_t failed_through, PatternMismatch* mismatch) {
  return pattern_check(buffer.data(), kBlock, kNsid, kLba, kBlocks, acknowledged, mismatch,
                       failed_through);
}

TEST(PerfVerify, AfterAFailedWriteOldOrNewDataPasses) {
  PatternMismatch mismatch;
  EXPECT_TRUE(check_after_failed(written(6), 6, 8, &mismatch)) << "the write landed nowhere";
  EXPECT_TRUE(check_after_failed(written(8), 6, 8, &mismatch)) << "the write landed whole";
  EXPECT_TRUE(check_after_failed(written(7), 6, 8, &mismatch)) << "an earlier failed write";
  std::vector<uint8_t> torn = written(8);
  const std::vector<uint8_t> old = written(6);
  std::memcpy(torn.data() + 3 * kBlock, old.data() + 3 * kBlock, 2 * kBlock);
  EXPECT_TRUE(check_after_failed(torn, 6, 8, &mismatch)) << "landed on some blocks";
  // A unit never written before the failed write: zeroes or the failed write's data.
  std::vector<uint8_t> zero_then_new = written(8);
  std::memset(zero_then_new.data(), 0, kBlock);
  EXPECT_TRUE(check_after_failed(zero_then_new, kGenerationNone, 8, &mismatch));
}

TEST(PerfVerify, AfterAFailedWriteAnythingElseIsCaught) {
  PatternMismatch mismatch;
  // Older than the acknowledged write: that write was lost.
  EXPECT_FALSE(check_after_failed(written(5), 6, 8, &mismatch));
  EXPECT_EQ(mismatch.lba, kLba);
  // Newer than any write issued to the unit: not data of this unit's history.
  EXPECT_FALSE(check_after_failed(written(9), 6, 8, &mismatch));
  // The failed write's data, corrupt in one block.
  std::vector<uint8_t> corrupt = written(8);
  corrupt[kBlock * 5 + 200] ^= 1;
  EXPECT_FALSE(check_after_failed(corrupt, 6, 8, &mismatch));
  EXPECT_EQ(mismatch.lba, kLba + 5);
  // Another LBA's or namespace's data of the failed generation; garbage; the read poison.
  EXPECT_FALSE(check_after_failed(written(8, kLba + 8), 6, 8, &mismatch));
  EXPECT_FALSE(check_after_failed(written(8, kLba, kNsid + 1), 6, 8, &mismatch));
  EXPECT_FALSE(check_after_failed(std::vector<uint8_t>(kBlock * kBlocks, 0x5A), 6, 8, &mismatch));
  EXPECT_FALSE(check_after_failed(std::vector<uint8_t>(kBlock * kBlocks, 0xFF), 6, 8, &mismatch));
  // Without a failed write, only the acknowledged generation passes.
  EXPECT_FALSE(check_after_failed(written(8), 6, kGenerationNone, &mismatch));
}

TEST(PerfVerify, FailedWriteRangeWrapsWithTheGenerations) {
  PatternMismatch mismatch;
  const uint32_t acknowledged = kGenerationUnknown - 2;
  const uint32_t failed = next_generation(next_generation(acknowledged));  // past the wrap
  ASSERT_EQ(failed, 1u);
  EXPECT_TRUE(check_after_failed(written(failed), acknowledged, failed, &mismatch));
  EXPECT_TRUE(check_after_failed(written(acknowledged + 1), acknowledged, failed, &mismatch));
  EXPECT_FALSE(check_after_failed(written(2), acknowledged, failed, &mismatch));
}

TEST(PerfVerify, GenerationsSkipTheReservedValues) {
  EXPECT_EQ(next_generation(kGenerationNone), 1u);
  EXPECT_EQ(next_generation(41), 42u);
  EXPECT_EQ(next_generation(kGenerationUnknown - 1), 1u);
}

}  // namespace
}  // namespace nvmf::perf
