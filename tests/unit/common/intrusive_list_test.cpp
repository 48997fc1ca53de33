#include "common/intrusive_list.h"

#include <gtest/gtest.h>

#include <vector>

namespace nvmf {
namespace {

struct Request {
  explicit Request(int request_id = 0) : id(request_id) {}
  int id;
  ListNode pending_link;
  ListNode timeout_link;
  StackNode free_link;
};

using PendingList = IntrusiveList<Request, &Request::pending_link>;
using TimeoutList = IntrusiveList<Request, &Request::timeout_link>;
using FreeStack = IntrusiveStack<Request, &Request::free_link>;

std::vector<int> ids(PendingList& list) {
  std::vector<int> out;
  for (auto& r : list) out.push_back(r.id);
  return out;
}

TEST(IntrusiveList, PushPopBothEnds) {
  Request a(1), b(2), c(3);
  PendingList list;
  EXPECT_TRUE(list.empty());
  list.push_back(a);
  list.push_back(b);
  list.push_front(c);
  EXPECT_EQ(ids(list), (std::vector<int>{3, 1, 2}));
  EXPECT_EQ(list.size(), 3u);
  EXPECT_EQ(list.front().id, 3);
  EXPECT_EQ(list.back().id, 2);
  EXPECT_EQ(list.pop_front()->id, 3);
  EXPECT_EQ(list.pop_back()->id, 2);
  EXPECT_EQ(list.pop_back()->id, 1);
  EXPECT_EQ(list.pop_front(), nullptr);
  EXPECT_TRUE(list.empty());
}

TEST(IntrusiveList, RemoveFromMiddleAndRelink) {
  Request a(1), b(2), c(3);
  PendingList list;
  list.push_back(a);
  list.push_back(b);
  list.push_back(c);
  list.remove(b);
  EXPECT_FALSE(b.pending_link.linked());
  EXPECT_EQ(ids(list), (std::vector<int>{1, 3}));
  list.push_back(b);
  EXPECT_EQ(ids(list), (std::vector<int>{1, 3, 2}));
  list.clear();
  EXPECT_FALSE(a.pending_link.linked());
  EXPECT_TRUE(list.empty());
}

TEST(IntrusiveList, ElementOnTwoListsAtOnce) {
  Request a(1), b(2);
  PendingList pending;
  TimeoutList timeouts;
  pending.push_back(a);
  pending.push_back(b);
  timeouts.push_back(b);
  EXPECT_EQ(&timeouts.front(), &b);
  pending.remove(b);
  EXPECT_TRUE(b.timeout_link.linked());
  EXPECT_EQ(timeouts.size(), 1u);
}

TEST(IntrusiveStack, LifoOrder) {
  Request pool[4];
  FreeStack free_list;
  for (int i = 0; i < 4; ++i) {
    pool[i].id = i;
    free_list.push(pool[i]);
  }
  EXPECT_EQ(free_list.size(), 4u);
  EXPECT_EQ(free_list.pop()->id, 3);
  EXPECT_EQ(free_list.pop()->id, 2);
  free_list.push(pool[3]);
  EXPECT_EQ(free_list.pop()->id, 3);
  EXPECT_EQ(free_list.pop()->id, 1);
  EXPECT_EQ(free_list.pop()->id, 0);
  EXPECT_EQ(free_list.pop(), nullptr);
  EXPECT_TRUE(free_list.empty());
}

}  // namespace
}  // namespace nvmf
