#include "sched/generator.h"

#include <stdexcept>

#include "sched/all_to_all.h"
#include "sched/fc_direct.h"
#include "sched/halving_doubling.h"
#include "sched/nap_log_step.h"
#include "sched/recursive_doubling.h"
#include "sched/ring.h"

namespace topocoll::sched {
namespace {

using Fn = Schedule (*)(int, int64_t, std::span<const int>);

struct Entry {
  std::string_view algo;
  Collective collective;
  Fn fn;  // null: needs the request (hier)
};

constexpr Entry kEntries[] = {
    {"ring", Collective::AllReduce, &ring_allreduce},
    {"ring", Collective::ReduceScatter, &ring_reduce_scatter},
    {"ring", Collective::AllGather, &ring_allgather},
    {"ring", Collective::AllToAll, &ring_all_to_all},
    {"hd", Collective::AllReduce, &hd_allreduce},
    {"hd", Collective::ReduceScatter, &hd_reduce_scatter},
    {"hd", Collective::AllGather, &hd_allgather},
    {"rd", Collective::AllReduce, &rd_allreduce},
    {"fc", Collective::AllReduce, &log_step_allreduce},
    {"fc", Collective::AllGather, &log_step_allgather},
    {"fc", Collective::AllToAll, &direct_all_to_all},
    {"fc-direct", Collective::AllReduce, &fc_direct_allreduce},
    {"fc-direct", Collective::ReduceScatter, &fc_direct_reduce_scatter},
    {"fc-direct", Collective::AllGather, &fc_direct_allgather},
    {"fc-direct", Collective::AllToAll, &direct_all_to_all},
    {"direct", Collective::AllToAll, &direct_all_to_all},
    {"hier", Collective::AllReduce, nullptr},
};

const Entry* find(std::string_view algo, Collective c) {
  for (const Entry& e : kEntries)
    if (e.algo == algo && e.collective == c) return &e;
  return nullptr;
}

}  // namespace

bool is_supported(std::string_view algo, Collective collective) {
  return find(algo, collective) != nullptr;
}

std::vector<std::string> algorithms_for(Collective collective) {
  std::vector<std::string> out;
  for (const Entry& e : kEntries)
    if (e.collective == collective) out.emplace_back(e.algo);
  return out;
}

Schedule generate(const GenerateRequest& r) {
  const Entry* e = find(r.algo, r.collective);
  if (!e) {
    std::string known;
    for (const std::string& a : algorithms_for(r.collective)) known += (known.empty() ? "" : ", ") + a;
    throw std::invalid_argument("no '" + r.algo + "' schedule for " +
                                std::string(to_string(r.collective)) + " (have: " + known + ")");
  }
  if (r.nranks < 1) throw std::invalid_argument("nranks must be >= 1, got " + std::to_string(r.nranks));
  if (r.count < 0) throw std::invalid_argument("count must be >= 0, got " + std::to_string(r.count));
  Schedule s = e->fn ? e->fn(r.nranks, r.count, r.order)
                     : hierarchical_allreduce(r.nranks, r.count, r.hier, r.order);
  s.algo = r.algo;
  return s;
}

Schedule generate(std::string_view algo, Collective collective, int nranks, int64_t count,
                  std::span<const int> order) {
  GenerateRequest r;
  r.algo = std::string(algo);
  r.collective = collective;
  r.nranks = nranks;
  r.count = count;
  r.order.assign(order.begin(), order.end());
  return generate(r);
}

}  // namespace topocoll::sched
