#include "bdev/registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bdev/malloc_bdev.h"
#include "bdev/null_bdev.h"
#include "bdev_test_util.h"

namespace nvmf::bdev {
namespace {

std::unique_ptr<Bdev> null_named(const char* name) {
  auto bdev = create_null_bdev({.name = name});
  EXPECT_TRUE(bdev.has_value());
  return std::move(*bdev);
}

TEST(BdevRegistryTest, AddFindRemove) {
  BdevRegistry registry;
  ASSERT_TRUE(registry.add(null_named("b")));
  auto malloc_bdev = create_malloc_bdev({.name = "a", .block_count = 8});
  ASSERT_TRUE(malloc_bdev);
  ASSERT_TRUE(registry.add(std::move(*malloc_bdev)));
  EXPECT_EQ(registry.size(), 2u);

  Bdev* found = registry.find("a");
  ASSERT_NE(found, nullptr);
  EXPECT_STREQ(found->backend_name(), "malloc");
  EXPECT_EQ(registry.find("missing"), nullptr);

  std::vector<std::string> names;
  registry.for_each([&](const Bdev& bdev) { names.push_back(bdev.name()); });
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));

  auto removed = registry.remove("b");
  ASSERT_TRUE(removed);
  EXPECT_EQ((*removed)->name(), "b");
  EXPECT_EQ(registry.find("b"), nullptr);
  auto again = registry.remove("b");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, Errc::not_found);
  EXPECT_TRUE(registry.add(null_named("b")));  // the name is free again
}

TEST(BdevRegistryTest, DuplicateNameIsAlreadyExists) {
  testing::LogCapture log;
  BdevRegistry registry;
  ASSERT_TRUE(registry.add(null_named("dup")));
  auto result = registry.add(null_named("dup"));
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::already_exists);
  EXPECT_EQ(registry.size(), 1u);
  EXPECT_TRUE(log.contains("already exists"));
  EXPECT_EQ(registry.add(nullptr).error().code, Errc::invalid_argument);
}

TEST(BdevRegistryTest, RemoveRefusesWhileChannelsAreOpen) {
  testing::LogCapture log;
  BdevRegistry registry;
  ASSERT_TRUE(registry.add(null_named("busy")));
  auto channel = registry.find("busy")->create_channel();
  ASSERT_TRUE(channel);
  auto result = registry.remove("busy");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::busy);
  channel->reset();
  EXPECT_TRUE(registry.remove("busy"));
}

}  // namespace
}  // namespace nvmf::bdev
