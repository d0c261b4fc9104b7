// Makes one chosen operator new of the calling thread throw std::bad_alloc, as a host out of
// memory would, so a test can show what a failed allocation at that point does. Link
// tests/common/failing_allocation.cpp into the test program: it replaces the global operator
// new and delete (on malloc and free) for the whole program.
#pragma once

namespace topocoll::testing {

// The k-th allocation of this thread from now throws (k >= 1); 0 disarms.
void fail_allocation(long k);
// Whether an armed failure has not happened yet (the code made fewer than k allocations).
bool allocation_failure_pending();

}  // namespace topocoll::testing
