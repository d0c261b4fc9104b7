// Cost of the interposer's forwarding path: ncclX through the interposer's entry point to a
// pnccl* that does nothing (the test-only stub libnccl), minus the same pnccl* called
// directly. Cases: no communicator served in the process (one atomic load), another
// communicator served (registry lookup under a shared lock), and group start/end.
// Prints a table; --json FILE writes the rows. Median of repeats; never a pass/fail test.
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "plugin/interposer/comm_state.h"
#include "sched/placement.h"
#include "tests/interposer/stub_nccl.h"
#include "topo/generators.h"

namespace ti = topocoll::plugin::interposer;

namespace {

template <class Fn>
double ns_per_call(Fn&& fn, int calls) {
  std::vector<double> reps;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    const auto t1 = std::chrono::steady_clock::now();
    reps.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / calls);
  }
  std::sort(reps.begin(), reps.end());
  return reps[reps.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const char* json_path = nullptr;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--json")) json_path = argv[i + 1];
  stub_nccl::set_recording(false);
  const int calls = 2000000;
  float in[4], out[4];
  ncclComm_t user = reinterpret_cast<ncclComm_t>(0x5000);
  ncclComm_t other = reinterpret_cast<ncclComm_t>(0x6000);

  struct Row { std::string name; double direct_ns, interposed_ns; };
  std::vector<Row> rows;
  auto direct_ar = [&] { pncclAllReduce(in, out, 4, ncclFloat32, ncclSum, user, nullptr); };
  auto interposed_ar = [&] { ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, user, nullptr); };
  rows.push_back({"allreduce, no communicator served", ns_per_call(direct_ar, calls),
                  ns_per_call(interposed_ar, calls)});

  // Another communicator served: the hot path now looks the handle up.
  auto st = std::make_unique<ti::CommState>();
  st->comm = other;
  st->served = true;
  ti::CommRegistry::instance().insert(std::move(st));
  for (int i = 0; i < 64; ++i) {  // a realistic registry: several unserved communicators too
    auto s = std::make_unique<ti::CommState>();
    s->comm = reinterpret_cast<ncclComm_t>(0x10000 + 64 * i);
    ti::CommRegistry::instance().insert(std::move(s));
  }
  rows.push_back({"allreduce, another communicator served", ns_per_call(direct_ar, calls),
                  ns_per_call(interposed_ar, calls)});
  // The call's own communicator served and its cached route says NCCL: served-state lookup,
  // argument checks, then the route cache (one mutex and hash lookup).
  {
    topocoll::topo::BiGraphShape shape;
    shape.switches_per_group = 2;
    shape.endpoints_per_switch = 2;
    auto topology = std::make_shared<const topocoll::topo::Topology>(topocoll::topo::generate_bigraph(shape));
    auto served = std::make_unique<ti::CommState>();
    served->comm = user;
    served->nranks = 8;
    served->rank = 0;
    served->topology = topology;
    served->placement = topocoll::sched::first_endpoints(*topology, 8);
    served->served = true;
    auto nccl = std::make_shared<ti::Route>();  // the decision for this call, cached
    nccl->target = ti::RouteTarget::Nccl;
    nccl->algo = "nccl";
    served->routes.insert({topocoll::sched::Collective::AllReduce, int(ncclFloat32), 4}, nccl);
    ti::CommRegistry::instance().insert(std::move(served));
    rows.push_back({"allreduce on a served communicator -> NCCL", ns_per_call(direct_ar, calls / 4),
                    ns_per_call(interposed_ar, calls / 4)});
    ti::CommRegistry::instance().remove(user);
  }
  auto direct_group = [&] { pncclGroupStart(); pncclGroupEnd(); };
  auto interposed_group = [&] { ncclGroupStart(); ncclGroupEnd(); };
  rows.push_back({"groupStart+groupEnd", ns_per_call(direct_group, calls),
                  ns_per_call(interposed_group, calls)});

  std::printf("%-42s %12s %14s %12s\n", "path", "direct(ns)", "interposed(ns)", "added(ns)");
  for (const Row& r : rows)
    std::printf("%-42s %12.1f %14.1f %12.1f\n", r.name.c_str(), r.direct_ns, r.interposed_ns,
                r.interposed_ns - r.direct_ns);
  if (json_path) {
    FILE* f = std::fopen(json_path, "w");
    if (!f) return 1;
    std::fprintf(f, "[\n");
    for (std::size_t i = 0; i < rows.size(); ++i)
      std::fprintf(f, "  {\"path\": \"%s\", \"direct_ns\": %.2f, \"interposed_ns\": %.2f, \"added_ns\": %.2f}%s\n",
                   rows[i].name.c_str(), rows[i].direct_ns, rows[i].interposed_ns,
                   rows[i].interposed_ns - rows[i].direct_ns, i + 1 < rows.size() ? "," : "");
    std::fprintf(f, "]\n");
    std::fclose(f);
  }
  return 0;
}
