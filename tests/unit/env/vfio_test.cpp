// The read-only VFIO probe: false on this host (no /dev/vfio, no IOMMU groups) without
// crashing, and true on a fake tree that has both.
#include <gtest/gtest.h>

#include <string>

#include "env/vfio.h"
#include "test_util.h"

namespace nvmf::env {
namespace {

using testing::TempDir;

TEST(Vfio, ProbeOfThisHostAnswersWithAReason) {
  const VfioStatus status = vfio_probe();
  EXPECT_EQ(status.available(), vfio_available());
  if (status.available()) {
    EXPECT_STREQ(status.reason(), "");
  } else {
    EXPECT_GT(std::string(status.reason()).size(), 0u);
  }
}

TEST(Vfio, FakeTreeWithContainerAndIommuGroupIsAvailable) {
  TempDir root;
  const std::string sys = root.make_dir("sys");
  const std::string dev = root.make_dir("dev");

  VfioStatus nothing = vfio_probe(sys, dev);
  EXPECT_FALSE(nothing.available());
  EXPECT_NE(std::string(nothing.reason()).find("vfio-pci"), std::string::npos);

  root.write("dev/vfio/vfio", "");
  root.make_dir("sys/kernel/iommu_groups");
  VfioStatus no_groups = vfio_probe(sys, dev);
  EXPECT_TRUE(no_groups.container_present);
  EXPECT_FALSE(no_groups.iommu_groups_present);
  EXPECT_FALSE(no_groups.available());
  EXPECT_NE(std::string(no_groups.reason()).find("IOMMU"), std::string::npos);

  root.make_dir("sys/kernel/iommu_groups/7");
  root.make_dir("sys/bus/pci/drivers/vfio-pci");
  VfioStatus ready = vfio_probe(sys, dev);
  EXPECT_TRUE(ready.available());
  EXPECT_TRUE(ready.vfio_pci_loaded);
  EXPECT_STREQ(ready.reason(), "");
}

}  // namespace
}  // namespace nvmf::env
