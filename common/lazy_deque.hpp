// A std::deque that allocates nothing until its first element. libstdc++'s deque takes a
// 512-byte block and a 64-byte map as soon as it exists, and an open session holds about ten
// queues that stay empty for its whole life (held messages, backlogs, replay windows): 5.5 KiB of
// its 24.6 (bench/README.md, "Near the floor: the profile"). Once used, the deque is kept (a
// queue on the steady path allocates nothing per message); clear() gives it back.
//
// The members the bridge uses of std::deque, with its meaning; not thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <utility>

namespace mcpmqtt {

template <class T>
class LazyDeque {
 public:
  using value_type = T;
  using iterator = typename std::deque<T>::iterator;
  using const_iterator = typename std::deque<T>::const_iterator;

  LazyDeque() = default;
  LazyDeque(LazyDeque&&) noexcept = default;
  LazyDeque& operator=(LazyDeque&&) noexcept = default;
  LazyDeque(const LazyDeque& other)
      : d_(other.d_ ? std::make_unique<std::deque<T>>(*other.d_) : nullptr) {}
  LazyDeque& operator=(const LazyDeque& other) {
    if (this != &other) d_ = other.d_ ? std::make_unique<std::deque<T>>(*other.d_) : nullptr;
    return *this;
  }

  bool empty() const { return !d_ || d_->empty(); }
  std::size_t size() const { return d_ ? d_->size() : 0; }

  // Only on a deque that is not empty, as std::deque's.
  T& front() { return d_->front(); }
  const T& front() const { return d_->front(); }
  T& back() { return d_->back(); }
  const T& back() const { return d_->back(); }
  void pop_front() { d_->pop_front(); }
  void pop_back() { d_->pop_back(); }

  void push_back(T value) { get().push_back(std::move(value)); }
  void push_front(T value) { get().push_front(std::move(value)); }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    return get().emplace_back(std::forward<Args>(args)...);
  }
  iterator erase(const_iterator at) { return d_->erase(at); }
  // Empties it and gives its memory back.
  void clear() { d_.reset(); }

  iterator begin() { return d_ ? d_->begin() : iterator(); }
  iterator end() { return d_ ? d_->end() : iterator(); }
  const_iterator begin() const { return view().begin(); }
  const_iterator end() const { return view().end(); }
  // The elements as a std::deque (an empty one shared by all when nothing was ever added).
  const std::deque<T>& view() const {
    static const std::deque<T> none;
    return d_ ? *d_ : none;
  }

 private:
  std::deque<T>& get() {
    if (!d_) d_ = std::make_unique<std::deque<T>>();
    return *d_;
  }
  std::unique_ptr<std::deque<T>> d_;
};

}  // namespace mcpmqtt
