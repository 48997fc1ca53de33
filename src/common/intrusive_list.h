// Intrusive containers: the element carries its own links, so putting a request on a list
// never allocates. Used for free lists of preallocated requests and for pending queues.
// Not thread-safe: a list belongs to one owner thread like the objects on it.
#pragma once

#include <cassert>
#include <cstddef>

namespace nvmf {

// Links for IntrusiveList. A node is on at most one list per ListNode member.
struct ListNode {
  ListNode* prev = nullptr;
  ListNode* next = nullptr;
  bool linked() const noexcept { return next != nullptr; }
};

// Doubly linked, circular around a sentinel: O(1) push/pop at both ends and O(1) removal
// of any element. `Member` names the ListNode inside T.
template <typename T, ListNode T::*Member>
class IntrusiveList {
 public:
  IntrusiveList() noexcept { head_.prev = head_.next = &head_; }
  IntrusiveList(const IntrusiveList&) = delete;
  IntrusiveList& operator=(const IntrusiveList&) = delete;
  ~IntrusiveList() { clear(); }

  bool empty() const noexcept { return head_.next == &head_; }
  size_t size() const noexcept { return size_; }

  void push_back(T& item) noexcept { insert_before(&head_, node_of(item)); }
  void push_front(T& item) noexcept { insert_before(head_.next, node_of(item)); }

  T& front() noexcept { assert(!empty()); return owner_of(head_.next); }
  T& back() noexcept { assert(!empty()); return owner_of(head_.prev); }

  T* pop_front() noexcept {
    if (empty()) return nullptr;
    T& item = owner_of(head_.next);
    remove(item);
    return &item;
  }
  T* pop_back() noexcept {
    if (empty()) return nullptr;
    T& item = owner_of(head_.prev);
    remove(item);
    return &item;
  }

  void remove(T& item) noexcept {
    ListNode* node = node_of(item);
    assert(node->linked());
    node->prev->next = node->next;
    node->next->prev = node->prev;
    node->prev = node->next = nullptr;
    --size_;
  }

  // The element after `item`, or nullptr at the end. `item` must be on this list.
  T* next_of(T& item) noexcept {
    ListNode* next = node_of(item)->next;
    return next == &head_ ? nullptr : &owner_of(next);
  }

  // Links `item` in front of `position`, which must be on this list.
  void insert_before(T& position, T& item) noexcept {
    insert_before(node_of(position), node_of(item));
  }

  // Unlinks everything (elements are not owned, so nothing is destroyed).
  void clear() noexcept {
    while (pop_front() != nullptr) {
    }
  }

  class iterator {
   public:
    iterator(ListNode* node) : node_(node) {}  // NOLINT
    T& operator*() const { return owner_of(node_); }
    T* operator->() const { return &owner_of(node_); }
    iterator& operator++() { node_ = node_->next; return *this; }
    bool operator==(const iterator& other) const { return node_ == other.node_; }
    bool operator!=(const iterator& other) const { return node_ != other.node_; }
   private:
    ListNode* node_;
  };
  // Iteration must not remove the current element; copy next first if it does.
  iterator begin() noexcept { return iterator(head_.next); }
  iterator end() noexcept { return iterator(&head_); }

 private:
  static ListNode* node_of(T& item) noexcept { return &(item.*Member); }
  static T& owner_of(ListNode* node) noexcept {
    // offsetof on a pointer-to-member: the distance from T to its ListNode member.
    const auto offset = reinterpret_cast<size_t>(&(static_cast<T*>(nullptr)->*Member));
    return *reinterpret_cast<T*>(reinterpret_cast<char*>(node) - offset);
  }
  void insert_before(ListNode* position, ListNode* node) noexcept {
    assert(!node->linked() && "element is already on a list");
    node->next = position;
    node->prev = position->prev;
    position->prev->next = node;
    position->prev = node;
    ++size_;
  }

  ListNode head_;
  size_t size_ = 0;
};

// Links for IntrusiveStack (a LIFO free list: the most recently freed request is the one
// whose cache lines are still warm).
struct StackNode {
  StackNode* next = nullptr;
};

template <typename T, StackNode T::*Member>
class IntrusiveStack {
 public:
  IntrusiveStack() = default;
  IntrusiveStack(const IntrusiveStack&) = delete;
  IntrusiveStack& operator=(const IntrusiveStack&) = delete;

  bool empty() const noexcept { return top_ == nullptr; }
  size_t size() const noexcept { return size_; }

  void push(T& item) noexcept {
    StackNode* node = &(item.*Member);
    node->next = top_;
    top_ = node;
    ++size_;
  }
  T* pop() noexcept {
    if (top_ == nullptr) return nullptr;
    StackNode* node = top_;
    top_ = node->next;
    node->next = nullptr;
    --size_;
    const auto offset = reinterpret_cast<size_t>(&(static_cast<T*>(nullptr)->*Member));
    return reinterpret_cast<T*>(reinterpret_cast<char*>(node) - offset);
  }

 private:
  StackNode* top_ = nullptr;
  size_t size_ = 0;
};

}  // namespace nvmf
