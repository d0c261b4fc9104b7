// Makes one chosen operator new of the calling thread throw std::bad_alloc, as a host out of
// memory would, so a test can show what a failed allocation at that point does. Link
// tests/common/failing_allocation.cpp into the test program: it replaces the global operator
// new and delete (on malloc and free) for the whole program.
#pragma once

#include <utility>

namespace topocoll::testing {

// The k-th allocation of this thread from now throws (k >= 1); with `from_then_on` every
// later one too (memory that stays exhausted); 0 disarms.
void fail_allocation(long k, bool from_then_on = false);
// Whether an armed failure has not happened yet (the code made fewer than k allocations).
bool allocation_failure_pending();

// Runs fn() with the k-th allocation of this thread failing (and, `from_then_on`, every one
// after it); whether that failure happened (false: fn made fewer than k allocations).
// Disarmed on return, also when fn throws.
template <class Fn>
bool with_allocation_failing(long k, bool from_then_on, Fn&& fn) {
  struct Disarm {
    ~Disarm() { fail_allocation(0); }
  } disarm;
  fail_allocation(k, from_then_on);
  fn();
  return !allocation_failure_pending();
}
template <class Fn>
bool with_allocation_failing(long k, Fn&& fn) {
  return with_allocation_failing(k, false, std::forward<Fn>(fn));
}

}  // namespace topocoll::testing
