#include "accept/acceptance_run.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <memory>
#include <random>
#include <set>

#include "accept/flow_probe.h"
#include "accept/interference.h"
#include "accept/path_probe.h"
#include "accept/recheck.h"
#include "accept/report_files.h"
#include "exec/benchmark.h"
#include "exec/host_backend.h"
#include "exec/socket_host_transport.h"
#include "kernels/datatype.h"
#include "sched/algorithm_registry.h"
#include "sched/plan.h"
#include "topo/cable_names.h"

namespace topocoll::accept {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string whole_percent(double ratio) { return std::to_string(int(std::lround(ratio * 100))) + " %"; }

std::string upper_case(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The wiring phase re-runs at most this many unexplained slow flows, the slowest first; more
// are left unresolved (the phase is then incomplete, not a pass).
constexpr int kMaxInterferenceChecks = 6;

double expected_gbps(const topo::Topology& t, const ProbeFlow& f) {
  double g = 1e300;
  for (int l : f.links) g = std::min(g, t.links()[l].gbps);
  return f.links.empty() ? 0 : g;
}

nlohmann::json outcome_json(const FlowOutcome& o) {
  return {{"flow", o.flow}, {"sending", o.sending}, {"bytes", o.bytes}, {"complete", o.complete},
          {"rate", o.rate_gbps}, {"connect_us", o.connect_us}, {"error", o.error}, {"local", o.local_error}};
}

class Run {
 public:
  Run(const AcceptanceOptions& o, exec::BootstrapClient& group,
      const std::function<void(const std::string&)>& progress)
      : o_(o), t_(o.topology), group_(group), progress_(progress), me_(group.rank()) {
    start_ = Clock::now();
    deadline_ = start_ + std::chrono::milliseconds(int64_t(o.budget_s * 1000));
    const std::time_t now = std::time(nullptr);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    r_.started = when;
    r_.topology_file = o.topology_file;
    r_.budget_s = o.budget_s;
    r_.threshold = o.threshold;
    r_.ranks = group.nranks();
  }

  int run() {
    std::string local_failure;
    try {
      inventory();
      if (wants("cables")) cables();
      else skip("cables", "not asked for");
      if (wants("wiring")) wiring();
      else skip("wiring", "not asked for");
      if (wants("collectives")) collectives(&local_failure);
      else skip("collectives", "not asked for");
      // Every rank reports how it ended; rank 0 learns which rank failed.
      const auto ends = group_.allgather(local_failure);
      for (size_t i = 0; i < ends.size(); ++i)
        if (!ends[i].empty() && r_.aborted.empty()) r_.aborted = "rank " + std::to_string(i) + ": " + ends[i];
    } catch (const std::exception& e) {
      r_.aborted = e.what();
      if (me_ != 0) {
        std::fprintf(stderr, "topocoll accept: rank %d: %s\n", me_, e.what());
        return 1;
      }
    }
    r_.duration_s = seconds_since(start_);
    if (me_ != 0) return local_failure.empty() ? 0 : 1;
    try {
      write_report();
    } catch (const ReportError& e) {
      if (progress_) progress_("report: NOT written: " + std::string(e.what()));
      return 1;  // a run whose report is lost does not pass, whatever it found
    }
    const std::string verdict = r_.verdict();
    return verdict == "pass" ? 0 : verdict == "incomplete" ? 2 : 1;
  }

 private:
  bool wants(const std::string& phase) const {
    return std::find(o_.phases.begin(), o_.phases.end(), phase) != o_.phases.end();
  }
  void say(const std::string& line) const {
    if (me_ == 0 && progress_) progress_(line);
  }
  // A phase asked for that cannot run measured nothing: not a pass.
  void cannot_run(const std::string& phase, const std::string& why) {
    r_.phases.push_back({phase, "incomplete", "not run: " + why});
    say("[" + phase + "] not run: " + why + "  INCOMPLETE");
  }
  void skip(const std::string& phase, const std::string& why) {
    r_.phases.push_back({phase, "skipped", why});
    say("[" + phase + "] skipped: " + why);
  }
  // The least the collectives phase runs in; the optional re-runs before it (slow flows run
  // again, interference checks) leave it that much when it will run, so on a loaded machine
  // they, not the collectives, are what the budget cuts. When the phase will not run (a dead
  // cable, an unreachable endpoint) nothing is kept for it: the re-runs that confirm a slow
  // cable get the time, or a one-off slow flow beside a dead one is reported as certain.
  static constexpr double kCollectivesMinSeconds = 10;
  double collectives_reserve_s() const {
    return wants("collectives") && collectives_blocked().empty() ? kCollectivesMinSeconds : 0;
  }
  // Why the collectives phase will not run whatever the budget ("" = it runs if time is left).
  // The same on every rank: inventory and localization are computed from gathered results.
  std::string collectives_blocked() const {
    if (r_.inventory.present.size() < 2) return "fewer than two measurable endpoints";
    for (const auto& f : r_.localization.findings)
      if (f.kind == "dead cable" || f.kind == "unreachable endpoint") return "dead cables or endpoints";
    if (!r_.inventory.problems.empty()) return "the inventory found problems";
    return "";
  }
  double budget_left() const { return std::chrono::duration<double>(deadline_ - Clock::now()).count(); }
  // The budget left to the rank with the least. Each rank's clock started when it did, and
  // busy ranks run late: a decision that changes which group steps come next (one more
  // round, a skipped phase, a collective's size) must be taken alike on every rank, or the
  // ranks go different ways through the bootstrap and plan different schedules.
  double agreed_budget_left() {
    double least = budget_left();
    for (const auto& left : group_.allgather(std::to_string(least))) least = std::min(least, std::stod(left));
    return least;
  }

  // --- 1. inventory ----------------------------------------------------------------------
  void inventory() {
    RankIdentity self = describe_this_rank(me_, o_.gpu, o_.bind, t_);
    if (!self.address.empty()) {
      try {
        listener_ = std::make_unique<FlowListener>(self.address);
        self.flow_port = listener_->port();
      } catch (const std::exception& e) {
        self.address_source = e.what();
        self.address.clear();
      }
    }
    nlohmann::json mine = identity_json(self);
    mine["run"] = std::random_device{}() * uint64_t(0x9e3779b97f4a7c15ULL) ^ uint64_t(::getpid());
    const auto all = group_.allgather(mine.dump());
    for (const auto& blob : all) {
      const auto j = nlohmann::json::parse(blob);
      r_.identities.push_back(identity_from_json(j));
    }
    run_id_ = nlohmann::json::parse(all[0])["run"].get<uint64_t>();
    r_.inventory = match_inventory(t_, r_.identities, o_.expected_endpoints);
    my_endpoint_ = r_.inventory.endpoint_of_rank[me_];
    for (size_t i = 0; i < r_.identities.size(); ++i)
      if (const int e = r_.inventory.endpoint_of_rank[i]; e >= 0) rank_of_endpoint_[e] = int(i);
    const auto& inv = r_.inventory;
    const std::string summary = std::to_string(r_.identities.size()) + " ranks: " +
                                std::to_string(inv.present.size()) + " endpoints measurable, " +
                                std::to_string(inv.missing.size()) + " missing, " +
                                std::to_string(inv.problems.size() - inv.missing.size()) + " other problems";
    r_.phases.push_back({"inventory", inv.ok() ? "pass" : "fail", summary});
    say("[inventory] " + summary + (inv.ok() ? "  PASS" : "  FAIL"));
    for (const auto& p : inv.problems) say("  " + p.kind + ": " + p.detail);
  }

  // --- 2. cables -------------------------------------------------------------------------
  // Runs one round of flows (this rank's part) and returns every flow's measurement.
  std::vector<FlowMeasurement> measure_round(uint32_t round_id, const std::vector<ProbeFlow>& flows,
                                            double seconds) {
    std::vector<FlowTask> tasks;
    for (size_t i = 0; i < flows.size(); ++i) {
      const auto& f = flows[i];
      const bool send = f.src == my_endpoint_, receive = f.dst == my_endpoint_;
      if (!send && !receive) continue;
      FlowTask task;
      task.flow = uint32_t(i);
      task.bytes = int64_t(1) << 40;  // the window decides
      task.expected_gbps = expected_gbps(t_, f);
      task.streams = o_.streams;
      task.local_address = r_.identities[me_].address;
      if (f.lane >= 0 && f.lane < int(o_.lane_marks.size())) task.mark = o_.lane_marks[f.lane];
      if (send) {
        const auto& peer = r_.identities[rank_of_endpoint_.at(f.dst)];
        task.sending = true;
        task.peer_address = peer.address;
        task.peer_port = peer.flow_port;
        tasks.push_back(task);
      }
      if (receive) {
        task.sending = false;
        tasks.push_back(task);
      }
    }
    // Every flow of the round runs for the same window, however slow it is.
    group_.barrier();
    const auto window_end = Clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
    const auto outcomes = listener_ ? run_flow_round(*listener_, round_id, run_id_, tasks, window_end)
                                    : std::vector<FlowOutcome>{};
    nlohmann::json blob = nlohmann::json::array();
    for (const auto& x : outcomes) blob.push_back(outcome_json(x));
    const auto all = group_.allgather(blob.dump());
    std::vector<FlowMeasurement> out(flows.size());
    for (size_t i = 0; i < flows.size(); ++i) {
      out[i].flow = flows[i];
      out[i].expected_gbps = expected_gbps(t_, flows[i]);
      out[i].dead = true;
    }
    std::vector<std::string> sender_error(flows.size()), receiver_error(flows.size());
    for (const auto& text : all)
      for (const auto& x : nlohmann::json::parse(text)) {
        const size_t i = x["flow"].get<size_t>();
        if (i >= out.size()) continue;
        if (x["sending"].get<bool>()) {
          out[i].rtt_us = x["connect_us"].get<double>();
          sender_error[i] = x["error"].get<std::string>();
          out[i].local_error = x.value("local", false);
        } else {
          out[i].measured_gbps = x["rate"].get<double>();
          out[i].dead = x["bytes"].get<int64_t>() == 0;
          receiver_error[i] = x["error"].get<std::string>();
        }
      }
    for (size_t i = 0; i < out.size(); ++i) {
      out[i].error = !sender_error[i].empty() ? sender_error[i] : receiver_error[i];
      if (out[i].dead && out[i].error.empty()) out[i].error = "nothing arrived";
    }
    return out;
  }

  // Where the file's flows stripe over local switches, each flow needs its lane's mark: an
  // unmarked one takes the default route, off the plan, and healthy cables would read slow.
  std::string lanes_unpinned() const {
    if (t_.kind() != topo::TopologyKind::Nap || t_.local_switches() < 2 ||
        int(o_.lane_marks.size()) >= t_.local_switches())
      return "";
    return "the topology's flows stripe over " + std::to_string(t_.local_switches()) + " local switches and " +
           std::to_string(o_.lane_marks.size()) +
           " lane marks were given (--lane-marks, one per local switch, with policy routing per mark)";
  }

  void cables() {
    if (r_.inventory.present.size() < 2) {
      cannot_run("cables", "fewer than two measurable endpoints");
      return;
    }
    if (const std::string why = lanes_unpinned(); !why.empty()) {
      cannot_run("cables", why);
      return;
    }
    const RoundPlan plan =
        plan_flow_rounds(t_, r_.inventory.present, o_.coverage, 48, o_.max_flows_per_round);
    r_.unreachable_links = plan.unreachable;
    // About 45 % of the budget for this phase: each round's flows run for `seconds`.
    const double seconds = std::clamp(o_.budget_s * 0.45 / std::max<size_t>(1, plan.rounds.size()) - 0.3, 0.3, 2.0);
    r_.flow_seconds = seconds;
    say("[cables] " + std::to_string(plan.rounds.size()) + " rounds, every cable direction crossed by up to " +
        std::to_string(o_.coverage) + " flows, " + std::to_string(int(seconds * 1000)) + " ms per round");
    std::vector<FlowMeasurement> all;
    int measured_rounds = 0;
    for (size_t r = 0; r < plan.rounds.size(); ++r) {
      if (agreed_budget_left() < seconds + 1) break;
      auto round = measure_round(uint32_t(r), plan.rounds[r].flows, seconds);
      int bad = 0, dead = 0;
      for (auto& m : round) {
        m.round = int(r);
        bad += !m.dead && m.ratio() < o_.threshold;
        dead += m.dead;
      }
      say("  round " + std::to_string(r + 1) + "/" + std::to_string(plan.rounds.size()) + ": " +
          std::to_string(round.size()) + " flows, " + std::to_string(bad) + " slow, " + std::to_string(dead) + " dead");
      all.insert(all.end(), round.begin(), round.end());
      r_.rounds.push_back(std::move(round));
      ++measured_rounds;
    }
    r_.localization = localize(t_, all, o_.threshold);
    const int not_rechecked = recheck_slow_flows(all, seconds);
    flows_ = all;
    int ok = 0, slow = 0, dead = 0, unmeasured = 0;
    for (int c : topo::cable_links(t_))
      for (int l : {c, t_.links()[c].reverse}) {
        const auto s = r_.localization.links[l].state;
        ok += s == CableState::Ok, slow += s == CableState::Slow, dead += s == CableState::Dead,
            unmeasured += s == CableState::Unmeasured;
      }
    bool failed = false;
    for (const auto& f : r_.localization.findings) failed = failed || f.kind != "unexplained";
    std::string summary = std::to_string(ok + slow + dead + unmeasured) + " cable directions: " +
                          std::to_string(ok) + " ok, " + std::to_string(slow) + " slow, " +
                          std::to_string(dead) + " dead, " + std::to_string(unmeasured) + " not measured";
    // Not a pass without every round: a dead cable only a later round crosses would pass.
    bool incomplete = false;
    if (measured_rounds < int(plan.rounds.size())) {
      incomplete = true;
      summary += " (the budget allowed " + std::to_string(measured_rounds) + " of " +
                 std::to_string(plan.rounds.size()) + " rounds)";
    }
    // A cable faster than every flow that crosses it (a fat spine behind slower NICs) is
    // shown to carry only what its flows can reach: say how many, not a pass of its rate.
    std::vector<double> fastest_flow(t_.links().size(), 0);
    for (const auto& m : all)
      for (int l : m.flow.links) fastest_flow[size_t(l)] = std::max(fastest_flow[size_t(l)], m.expected_gbps);
    int below_rate = 0;
    for (int c : topo::cable_links(t_))
      for (int l : {c, t_.links()[c].reverse})
        below_rate += fastest_flow[size_t(l)] > 0 && fastest_flow[size_t(l)] < o_.threshold * t_.links()[l].gbps;
    if (below_rate > 0)
      summary += "; " + std::to_string(below_rate) +
                 " cable directions are faster than any flow across them: tested only up to their flows' rate";
    if (not_rechecked > 0)
      summary += "; " + std::to_string(not_rechecked) +
                 " rounds of slow flows not run again (the budget, or six at most): cables slow in them are "
                 "named from one measurement";
    // A cable direction flows between the endpoints could cross but no round does (the
    // planner's round limit) is untested, not passed.
    int uncrossed = 0;
    for (int c : topo::cable_links(t_))
      for (int l : {c, t_.links()[c].reverse})
        uncrossed += plan.crossings[size_t(l)] == 0 &&
                     std::find(plan.unreachable.begin(), plan.unreachable.end(), l) == plan.unreachable.end();
    if (uncrossed > 0) {
      incomplete = true;
      summary += "; " + std::to_string(uncrossed) + " cable directions the endpoints reach were in no round";
    }
    // A flow slow though all its cables were cleared is judged by the wiring phase only.
    if (!r_.localization.unexplained_flows.empty() && !wants("wiring")) {
      incomplete = true;
      summary += "; " + std::to_string(r_.localization.unexplained_flows.size()) +
                 " slow flows unexplained (the wiring phase, not asked for, re-runs them)";
    }
    const std::string status = failed ? "fail" : incomplete ? "incomplete" : "pass";
    r_.phases.push_back({"cables", status, summary});
    say("[cables] " + summary + "  " + upper_case(status));
    for (const auto& f : r_.localization.findings)
      if (f.kind != "unexplained") say("  " + f.kind + ": " + f.detail + " (" + f.certainty + ")");
  }

  // A cable is named slow only when its slow flows are slow again (accept/recheck.h): each
  // round with such flows runs once more with only them, and every flow counts at its
  // faster run. `all` is the cable phase's flows, round after round, as r_.rounds holds them.
  // Returns how many rounds of slow flows across slow cables were not run again (the budget,
  // or six at most): their cables are named slow from one measurement.
  int recheck_slow_flows(std::vector<FlowMeasurement>& all, double seconds) {
    const size_t wanted = flows_to_recheck(r_.localization, all, o_.threshold, 1 << 20).size();
    const auto plan = flows_to_recheck(r_.localization, all, o_.threshold, 6);
    if (plan.empty()) return 0;
    int flows = 0, still_slow = 0, rounds = 0;
    for (const auto& [round, indices] : plan) {
      if (agreed_budget_left() - collectives_reserve_s() < seconds + 1) break;
      ++rounds;
      std::vector<ProbeFlow> again;
      for (int i : indices) again.push_back(all[i].flow);
      const auto measured = measure_round(uint32_t(50000 + round), again, seconds);
      for (size_t k = 0; k < indices.size(); ++k) {
        Recheck c{all[indices[k]], measured[k]};
        c.again.round = round;
        all[indices[k]] = c.best();
        ++flows;
        still_slow += all[indices[k]].dead || all[indices[k]].ratio() < o_.threshold;
        r_.rechecks.push_back(std::move(c));
      }
    }
    const int not_rechecked = int(wanted) - rounds;
    if (flows == 0) return not_rechecked;
    size_t at = 0;
    for (auto& round : r_.rounds)
      for (auto& m : round) m = all[at++];
    r_.localization = localize(t_, all, o_.threshold);
    say("  recheck: " + std::to_string(flows) + " slow flows across slow cables run again, " +
        std::to_string(still_slow) + " slow again");
    return not_rechecked;
  }

  // --- 3. wiring -------------------------------------------------------------------------
  void wiring() {
    if (flows_.empty()) {
      cannot_run("wiring", "no flows were measured");
      return;
    }
    // Probe the path of every distinct flow this rank sent.
    std::set<std::tuple<int, int, int>> probed;
    nlohmann::json mine = nlohmann::json::array();
    for (const auto& m : flows_) {
      const auto& f = m.flow;
      // A dead flow's path is broken, not miswired: the cable phase already named it.
      if (m.dead || f.src != my_endpoint_ || !probed.insert({f.src, f.dst, f.lane}).second) continue;
      if (budget_left() < 2) break;
      const uint32_t mark = f.lane >= 0 && f.lane < int(o_.lane_marks.size()) ? o_.lane_marks[f.lane] : 0;
      const PathTrace tr = trace_path(r_.identities[me_].address, r_.identities[rank_of_endpoint_.at(f.dst)].address,
                                      mark, int(f.links.size()) + 1, std::chrono::milliseconds(300));
      mine.push_back({{"src", f.src}, {"dst", f.dst}, {"lane", f.lane}, {"responders", tr.responders},
                      {"reached", tr.reached}, {"error", tr.error}});
    }
    std::vector<PathObservation> observations;
    for (const auto& text : group_.allgather(mine.dump()))
      for (const auto& x : nlohmann::json::parse(text)) {
        PathObservation o;
        o.flow.src = x["src"];
        o.flow.dst = x["dst"];
        o.flow.lane = x["lane"];
        o.flow.links = flow_links(t_, o.flow.src, o.flow.dst, o.flow.lane);
        o.trace.responders = x["responders"].get<std::vector<std::string>>();
        o.trace.reached = x["reached"];
        o.trace.error = x["error"];
        observations.push_back(std::move(o));
      }
    r_.wiring = analyze_wiring(t_, observations, o_.known_addresses);
    // Flows slow beside their round though every cable of theirs was fast elsewhere: alone,
    // then beside the same round once more (accept/interference.h judges them). About half
    // as fast beside it as alone, the flow shares a cable with one of them that the file
    // says it does not; faster, it was a passing disturbance.
    const double seconds = std::clamp(r_.flow_seconds, 0.3, 1.0);
    int checked = 0;
    std::vector<int> slowest = r_.localization.unexplained_flows;  // the slowest first
    std::stable_sort(slowest.begin(), slowest.end(), [&](int a, int b) { return flows_[a].ratio() < flows_[b].ratio(); });
    for (int i : slowest) {
      if (checked >= kMaxInterferenceChecks || agreed_budget_left() - collectives_reserve_s() < 3 * seconds + 2) break;
      ++checked;
      InterferenceCheck c{flows_[i], {}, {}, false};
      c.alone = measure_round(uint32_t(100000 + 2 * checked), {flows_[i].flow}, seconds)[0];
      if (!c.alone.dead && c.alone.ratio() >= o_.threshold) {
        const auto& round = r_.rounds[flows_[i].round];
        std::vector<ProbeFlow> same;
        size_t position = 0;
        for (size_t k = 0; k < round.size(); ++k) {
          if (round[k].flow == flows_[i].flow) position = k;
          same.push_back(round[k].flow);
        }
        c.again = measure_round(uint32_t(100001 + 2 * checked), same, seconds)[position];
      }
      c.interference = judge_interference(c, o_.threshold);
      r_.interference.push_back(c);
    }
    const int interfering = int(std::count_if(r_.interference.begin(), r_.interference.end(),
                                              [](const InterferenceCheck& c) { return c.interference; }));
    const int slow_paths = int(std::count_if(r_.interference.begin(), r_.interference.end(),
                                             [&](const InterferenceCheck& c) { return slow_alone(c, o_.threshold); }));
    const int not_rerun = int(slowest.size()) - checked;
    const bool failed = !r_.wiring.findings.empty() || interfering > 0 || slow_paths > 0;
    std::string summary = std::to_string(r_.wiring.probes) + " paths probed, " +
                          std::to_string(r_.wiring.hops_answered) + " of " + std::to_string(r_.wiring.hops_expected) +
                          " hops answered, " + std::to_string(r_.wiring.findings.size()) + " miswired; " +
                          std::to_string(r_.interference.size()) + " slow flows re-run, " +
                          std::to_string(interfering) + " slow beside their round but fast alone, " +
                          std::to_string(slow_paths) + " slow alone too";
    if (not_rerun > 0)
      summary += "; " + std::to_string(not_rerun) + " slow flows not re-run (the budget, or " +
                 std::to_string(kMaxInterferenceChecks) + " at most)";
    if (r_.wiring.hops_answered == 0)
      summary += " (no hop answered: switches send no ICMP time-exceeded here; only re-runs judge the wiring)";
    const std::string status = failed ? "fail" : not_rerun > 0 ? "incomplete" : "pass";
    r_.phases.push_back({"wiring", status, summary});
    say("[wiring] " + summary + "  " + upper_case(status));
    for (const auto& f : r_.wiring.findings) say("  miswired: " + f.detail);
    for (const auto& c : r_.interference)
      if (c.interference)
        say("  interference: " + t_.endpoints()[c.in_round.flow.src].id + " -> " + t_.endpoints()[c.in_round.flow.dst].id +
            " reached " + whole_percent(c.alone.ratio()) + " alone, " + whole_percent(c.in_round.ratio()) + " and " +
            whole_percent(c.again.ratio()) + " in its round");
      else if (slow_alone(c, o_.threshold))
        say("  slow path: " + t_.endpoints()[c.in_round.flow.src].id + " -> " + t_.endpoints()[c.in_round.flow.dst].id +
            " reached " + whole_percent(c.in_round.ratio()) + " in its round and " + whole_percent(c.alone.ratio()) +
            " alone, though each of its cables carried a flow at full rate");
  }

  // --- 4. collectives --------------------------------------------------------------------
  void collectives(std::string* local_failure) {
    const double left = agreed_budget_left();
    const std::string why_not = collectives_blocked();  // what no budget would change comes first
    if (!why_not.empty()) {
      skip("collectives", why_not);
      return;
    }
    if (left < kCollectivesMinSeconds) {
      r_.phases.push_back({"collectives", "incomplete", "not run: the budget is spent"});
      say("[collectives] not run: the budget is spent  INCOMPLETE");
      return;
    }
    net::TransportOptions transport = o_.transport;
    // At least 5 s, at most the budget left, never above what the user set (std::clamp would
    // be undefined with a setting under 5 s).
    auto bounded = [&](int set_ms) { return int(std::min(std::max(left * 1000.0, 5000.0), double(set_ms))); };
    transport.timeout_ms = bounded(transport.timeout_ms);
    if (transport.stall_timeout_ms > 0) transport.stall_timeout_ms = bounded(transport.stall_timeout_ms);
    std::vector<int> endpoints(r_.identities.size());
    for (size_t i = 0; i < endpoints.size(); ++i) endpoints[i] = r_.inventory.endpoint_of_rank[i];
    // Before the transport: a failed step may leave receives posted whose threads write
    // until the transport's connections close, so the buffers go after it.
    exec::BenchmarkBuffers buffers;
    exec::SocketHostTransport host_transport(group_, r_.identities[me_].address, transport);
    exec::HostBackend backend(host_transport);
    exec::BenchmarkSettings settings;
    settings.iters = 3;
    settings.warmup = 1;
    settings.target_seconds = 1e9;
    std::vector<std::pair<sched::Collective, std::string>> cases;
    // Every algorithm of the registry: its allreduce, or the first collective it has.
    for (const sched::Algorithm& a : sched::algorithms()) {
      sched::Collective c = sched::Collective::AllReduce;
      for (sched::Collective k : sched::kCollectives)
        if (!a.collectives.contains(c) && a.collectives.contains(k)) c = k;
      cases.push_back({c, std::string(a.name)});
    }
    // Plans first (every rank alike), then the runs within what is left of the budget.
    struct Planned {
      sched::Collective collective;
      std::string algo;
      sched::Plan plan;
    };
    std::vector<Planned> planned;
    for (const auto& [collective, algo] : cases) {
      sched::PlanRequest req;
      req.collective = collective;
      req.algo = algo;
      req.endpoints = endpoints;
      req.cost = o_.cost;
      req.verify = false;
      req.keep_link_detail = false;
      try {
        sched::make_plan(t_, req);  // applicable?
      } catch (const std::exception&) {
        continue;
      }
      planned.push_back({collective, algo, {}});
    }
    // From the agreed budget: every rank sizes each case alike (and so plans the same schedule).
    const double per_case = left * 0.8 / std::max<size_t>(1, planned.size()) / 5;  // warm-up + 3 + check
    bool ok = true;
    for (auto& p : planned) {
      sched::PlanRequest req;
      req.collective = p.collective;
      req.algo = p.algo;
      req.endpoints = endpoints;
      req.cost = o_.cost;
      req.verify = false;
      req.keep_link_detail = false;
      req.bytes = int64_t(4) << 20;
      for (;;) {
        p.plan = sched::make_plan(t_, req);
        if (p.plan.predicted_us <= per_case * 1e6 || req.bytes <= (64 << 10)) break;
        req.bytes /= 2;
      }
      CollectiveCheck c;
      c.algo = p.algo;
      c.collective = std::string(sched::to_string(p.collective));
      c.bytes = req.bytes;
      c.predicted_us = p.plan.predicted_us;
      c.max_link_load = p.plan.link_load.max_load;
      try {
        const auto row = exec::measure_collective(p.plan.schedule, p.algo, settings, backend, group_, buffers);
        c.measured_us = row.time_us;
        c.wrong = row.wrong;
      } catch (const std::exception& e) {
        c.error = e.what();
        *local_failure = e.what();
      }
      // Every rank learns whether a case failed anywhere and stops together: one rank
      // stopping alone would have its next allgather met by its peers' next case, and the
      // error would read as a schedule mismatch, naming the wrong rank.
      const std::vector<std::string> errors = group_.allgather(c.error);
      for (size_t r = 0; r < errors.size() && c.error.empty(); ++r)
        if (!errors[r].empty()) c.error = "rank " + std::to_string(r) + ": " + errors[r];
      ok = ok && c.error.empty() && c.wrong == 0;
      say("  " + c.collective + " " + c.algo + " " + std::to_string(c.bytes) + " B: " +
          (c.error.empty() ? std::to_string(int(c.measured_us / 1000)) + " ms measured, " +
                                 std::to_string(int(c.predicted_us / 1000)) + " ms predicted, " +
                                 std::to_string(c.wrong) + " wrong"
                           : c.error));
      r_.collectives.push_back(c);
      if (!c.error.empty()) break;  // the transport is unusable after a failure
    }
    const std::string summary = std::to_string(r_.collectives.size()) + " collectives on " +
                                std::to_string(endpoints.size()) + " endpoints, results checked";
    r_.phases.push_back({"collectives", ok ? "pass" : "fail", summary});
    say("[collectives] " + summary + (ok ? "  PASS" : "  FAIL"));
  }

  // --- report ----------------------------------------------------------------------------
  // Throws ReportError when a file cannot be written: the run then fails, saying why.
  void write_report() {
    const std::string text = report_text(t_, r_);
    if (progress_) progress_(text.substr(text.find("verdict:")));
    if (o_.report_dir.empty()) return;
    const WrittenReport w =
        write_report_files(o_.report_dir, report_json(t_, r_).dump(1) + "\n", text, report_dot(t_, r_));
    if (progress_)
      progress_("report: " + o_.report_dir + "/report.json, report.txt, " +
                (w.drawn ? "topology.png" : "topology.dot (" + w.not_drawn + ")"));
  }

  const AcceptanceOptions& o_;
  const topo::Topology& t_;
  exec::BootstrapClient& group_;
  std::function<void(const std::string&)> progress_;
  const int me_;
  Clock::time_point start_, deadline_;
  AcceptanceResult r_;
  uint64_t run_id_ = 0;
  int my_endpoint_ = -1;
  std::map<int, int> rank_of_endpoint_;
  std::unique_ptr<FlowListener> listener_;
  std::vector<FlowMeasurement> flows_;
};

}  // namespace

int run_acceptance(const AcceptanceOptions& options, exec::BootstrapClient& group,
                   const std::function<void(const std::string&)>& progress) {
  return Run(options, group, progress).run();
}

}  // namespace topocoll::accept
