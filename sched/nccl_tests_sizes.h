// nccl-tests' conventions for sizes and bandwidths, the one place every layer reads them:
// the planner (a "size" argument to a count), the interposer (a call's count back to a
// "size" for its thresholds and log), the order ranking and the host benchmarks.
//
//  size   the bytes nccl-tests reports: allreduce the vector, reduce-scatter and allgather
//         the whole P-rank buffer, all-to-all each rank's whole send buffer.
//  count  the element count NCCL is called with on each rank: size / element for
//         allreduce, size / element / P for the others. nccl-tests also rounds the latter
//         down to a multiple of 4 elements (ALIGN in src/all_gather.cu); here uneven counts
//         are normal, so they are kept.
//  busbw  algbw x 2(n-1)/n for allreduce, x (n-1)/n for the others (doc/PERFORMANCE.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "sched/schedule.h"

namespace topocoll::sched {

// The count NCCL is called with on each rank for a collective of nccl-tests `size_bytes`.
int64_t count_of_size(Collective collective, int64_t size_bytes, size_t elem_size, int nranks);
// The nccl-tests size of a call with NCCL's per-rank `count`.
int64_t size_of_count(Collective collective, int64_t count, size_t elem_size, int nranks);

// nccl-tests bus-bandwidth factors: allreduce 2(n-1)/n; reduce-scatter, allgather and
// all-to-all (n-1)/n; 0 for one rank.
double bus_bandwidth_factor(Collective collective, int nranks);
// Algorithm bandwidth in GB/s (bytes of the collective's size / time) and the matching bus
// bandwidth. `bytes` is the size nccl-tests reports.
double algbw_gbs(double bytes, double time_us);
double busbw_gbs(Collective collective, int nranks, double bytes, double time_us);

}  // namespace topocoll::sched
