// Jobs on a live fabric (ctest label `fabric`; root with network namespaces, as CI is):
// rank-exec puts a program into its endpoint's namespace under its host's name with NCCL's
// variables; `fabric run` starts a job whose ranks meet at rank 0's management address;
// mpirun-launched MPI ranks still meet their daemon from inside the namespaces. Also where
// `ip` and `tc` come from — an unpacked prefix with its libraries, tools hidden — and that
// the fabric needs no netem, and names the feature when a qdisc it does need is missing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "fabric/fabric_lock.h"
#include "tests/common/fabric_fixture.h"
#include "tests/common/scratch_dir.h"

namespace topocoll::fabric {
namespace {

using testing_support::FabricUp;
using testing_support::ScratchDir;
using testing_support::kCli;
using testing_support::kExamples;
using testing_support::shell_run;
namespace fs = std::filesystem;

// "net:[4026532567]" as /proc/<pid>/ns/net shows a namespace: the inode of /run/netns/<name>.
std::string netns_id(const std::string& name) {
  struct stat st {};
  if (::stat(("/run/netns/" + name).c_str(), &st) != 0) return "missing " + name;
  return "net:[" + std::to_string(st.st_ino) + "]";
}

void write_script(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
  fs::permissions(path, fs::perms::owner_all);
}

// Lines "KEY=VALUE" of a program's output.
std::map<std::string, std::string> values_in(const std::string& output) {
  std::map<std::string, std::string> out;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);)
    if (const size_t eq = line.find('='); eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  return out;
}

constexpr const char* kShowRank =
    " -- sh -c 'echo HOST=$(hostname); echo NETNS=$(readlink /proc/self/ns/net); "
    "echo IFNAME=$NCCL_SOCKET_IFNAME; echo HOSTID=$NCCL_HOSTID; echo TOPO=$TOPOCOLL_TOPO_FILE; "
    "echo LOCAL=$LOCAL_RANK; echo MASTER=$MASTER_ADDR:$MASTER_PORT; echo PRELOAD=$LD_PRELOAD; "
    "echo DEBUG=${NCCL_DEBUG:-unset}'";

TEST(FabricJob, RankExecRunsTheProgramInItsEndpointsNamespaceUnderItsHostName) {
  REQUIRE_FABRIC();
  FabricUp f("tljob", "bigraph-32.json", "10");
  ASSERT_TRUE(f.ok()) << f.output();
  // Rank 2 of 4 spread over the switches: endpoint s16.g0 (one per switch, file order).
  const auto r = shell_run("OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_RANK=2 " + kCli +
                           " fabric rank-exec --name tljob --placement spread --preload /opt/libnccl-topocoll.so"
                           " --rank0-env NCCL_DEBUG=INFO" + kShowRank);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto v = values_in(r.output);
  EXPECT_EQ(v.at("HOST"), "s16");
  EXPECT_EQ(v.at("NETNS"), netns_id("tf-tljob-s16"));
  EXPECT_EQ(v.at("IFNAME"), "=nic0");
  EXPECT_EQ(v.at("HOSTID"), "s16");
  EXPECT_EQ(v.at("LOCAL"), "0");
  EXPECT_EQ(v.at("PRELOAD"), "/opt/libnccl-topocoll.so");
  EXPECT_EQ(v.at("DEBUG"), "unset");  // rank 0's only
  EXPECT_EQ(v.at("MASTER"), "172.16.0.2:29500");  // rank 0 is s0: its management address
  // The topology file is the fabric's at its rates: 10 Mbit/s cables are 0.01 Gb/s.
  std::ifstream topo(v.at("TOPO"));
  std::stringstream text;
  text << topo.rdbuf();
  EXPECT_NE(text.str().find("\"link_gbps\": 0.01"), std::string::npos) << v.at("TOPO");
  // The job's file goes with the fabric.
  const std::string topo_file = v.at("TOPO");

  // Without a launcher's rank it says where a rank comes from.
  const auto lost = shell_run(kCli + " fabric rank-exec --name tljob -- true");
  EXPECT_NE(lost.status, 0);
  EXPECT_NE(lost.output.find("no launcher told this process its rank"), std::string::npos) << lost.output;
  const auto bad = shell_run("TOPOCOLL_RANK=0 TOPOCOLL_NRANKS=2 " + kCli +
                             " fabric rank-exec --name tljob -- /nonexistent/program");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("cannot run /nonexistent/program"), std::string::npos) << bad.output;

  // NAP: the address sits on lo under its label, and that is the interface NCCL is given.
  FabricUp nap("tljobnap", "nap-4x8.json", "20");
  ASSERT_TRUE(nap.ok()) << nap.output();
  const auto n = shell_run("TOPOCOLL_RANK=1 TOPOCOLL_NRANKS=2 " + kCli +
                           " fabric rank-exec --name tljobnap -- sh -c 'echo IFNAME=$NCCL_SOCKET_IFNAME; "
                           "echo ADDRS=$(ip -4 -o addr show label lo-nic0)'");
  ASSERT_EQ(n.status, 0) << n.output;
  const auto nv = values_in(n.output);
  EXPECT_EQ(nv.at("IFNAME"), "=lo-nic0");
  EXPECT_NE(nv.at("ADDRS").find("10.1.0.2/32"), std::string::npos) << n.output;
  // A rank's loopback relay keeps no hold on the fabric (the rank takes its entry lock before
  // starting it): `down` ends such a running job at once, instead of failing after its wait
  // for processes entering.
  const auto relaying = shell_run("(TOPOCOLL_RANK=0 TOPOCOLL_NRANKS=1 " + kCli +
                                  " fabric rank-exec --name tljobnap --relay-port 1 -- sleep 30 > /dev/null 2>&1 &); "
                                  "for i in $(seq 50); do [ -n \"$(ip netns pids tf-tljobnap-p0.h0)\" ] && exit 0; "
                                  "sleep 0.1; done; exit 1");
  ASSERT_EQ(relaying.status, 0) << "the rank never ran inside: " << relaying.output;
  const auto nap_down = shell_run(kCli + " fabric down --name tljobnap");
  EXPECT_EQ(nap_down.status, 0) << nap_down.output;

  // No `down` between a process's opening a namespace and its entering it (it would run on in
  // a namespace no name reaches): while `down` holds the fabric, entering is refused ...
  {
    const FabricLock down_running("tljob", "down");
    const std::string holder = "`fabric down` of fabric tljob is running (pid " + std::to_string(::getpid()) +
                               "): its namespaces cannot be entered now";
    const auto exec = shell_run(kCli + " fabric exec --name tljob s0.g0 -- true");
    EXPECT_NE(exec.status, 0);
    EXPECT_NE(exec.output.find(holder), std::string::npos) << exec.output;
    const auto rank = shell_run("TOPOCOLL_RANK=0 TOPOCOLL_NRANKS=2 " + kCli + " fabric rank-exec --name tljob -- true");
    EXPECT_NE(rank.status, 0);
    EXPECT_NE(rank.output.find(holder), std::string::npos) << rank.output;
  }
  // ... and `down` waits for a process entering now.
  auto entering = std::make_unique<FabricEntryLock>("tljob");
  std::thread entered([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    entering.reset();
  });
  const auto down = shell_run(kCli + " fabric down --name tljob");
  entered.join();
  EXPECT_EQ(down.status, 0) << down.output;
  EXPECT_FALSE(fs::exists(topo_file));
}

// Every rank started by `run`, in its namespace and order, meets rank 0 at MASTER_ADDR over
// the management network (torch's env:// rendezvous does the same).
TEST(FabricJob, RunStartsEveryRankAndTheyMeetAtRankZero) {
  REQUIRE_FABRIC();
  FabricUp f("tlrun", "bigraph-32.json", "10");
  ASSERT_TRUE(f.ok()) << f.output();
  const ScratchDir scratch("fabric_run");
  const std::string& dir = scratch.path();
  write_script(dir + "/meet.py", R"(import os, socket, time
rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
where = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
me = socket.gethostname()
if rank == 0:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", where[1]))
    s.listen(size)
    hosts = {0: me}
    for _ in range(size - 1):
        c, _ = s.accept()
        r, h = c.recv(100).decode().split()
        hosts[int(r)] = h
    print("ORDER=" + ",".join(hosts[r] for r in range(size)), flush=True)
else:
    for _ in range(200):
        try:
            c = socket.create_connection(where, timeout=1)
            break
        except OSError:
            time.sleep(0.05)
    c.sendall(("%d %s" % (rank, me)).encode())
)");
  const std::string hostfile = dir + "/hosts";
  const auto r = shell_run("timeout 60 " + kCli + " fabric run --name tlrun --ranks 4 --placement topology-order "
                           "--hostfile " + hostfile + " -- python3 " + dir + "/meet.py");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ORDER=s0,s2,s1,s3"), std::string::npos) << r.output;
  std::ifstream in(hostfile);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "s0 slots=1\ns2 slots=1\ns1 slots=1\ns3 slots=1\n");
  // Programs that take their rank as an argument (interposer_gpu_check --rank R).
  const auto args = shell_run("timeout 60 " + kCli + " fabric run --name tlrun --ranks 2 --rank-args -- "
                              "echo 'ARG{rank}=rank {rank} of {nranks} on {host} as {endpoint}'");
  ASSERT_EQ(args.status, 0) << args.output;
  EXPECT_NE(args.output.find("ARG1=rank 1 of 2 on s1 as s1.g0"), std::string::npos) << args.output;
  // The first failing rank's exit code is the job's.
  const auto failed = shell_run("timeout 60 " + kCli + " fabric run --name tlrun --ranks 3 -- sh -c 'exit $((RANK == 1 ? 3 : 0))'");
  EXPECT_EQ(failed.status, 3) << failed.output;
  // A job that hangs ends at its time limit and reads as timed out (timeout(1)'s 124).
  const auto hung = shell_run("timeout 60 " + kCli + " fabric run --name tlrun --ranks 2 --time-limit 1 -- sleep 100");
  EXPECT_EQ(hung.status, 124) << hung.output;
  EXPECT_NE(hung.output.find("time limit of 1 s passed"), std::string::npos) << hung.output;
}

// nccl-tests' way: mpirun starts the ranks, each enters its namespace after launch; Open MPI
// still reaches its daemon (PMIx over loopback, relayed) and its shared-memory transport.
TEST(FabricJob, MpirunRanksEnteringNamespacesStillRunMpi) {
  REQUIRE_FABRIC();
  if (shell_run("command -v mpirun && command -v mpicc").status != 0)
    GTEST_SKIP() << "mpirun or mpicc not installed (apt-get install openmpi-bin libopenmpi-dev)";
  const ScratchDir scratch("fabric_mpi");
  const std::string& dir = scratch.path();
  std::ofstream(dir + "/probe.c") << R"(#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  char host[256], ns[64] = "";
  gethostname(host, sizeof host);
  ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  if (n > 0) ns[n] = 0;
  printf("RANK%d=%d %s %s %d\n", rank, size, host, ns, sum);
  MPI_Finalize();
  return 0;
}
)";
  ASSERT_EQ(shell_run("mpicc -o " + dir + "/probe " + dir + "/probe.c").status, 0);
  FabricUp f("tlmpi", "bigraph-32.json", "10");
  ASSERT_TRUE(f.ok()) << f.output();
  const auto r = shell_run("timeout 120 mpirun --allow-run-as-root --oversubscribe -np 4 --mca pml ob1 --mca btl self,vader " +
                           kCli + " fabric rank-exec --name tlmpi --placement spread -- " + dir + "/probe");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto v = values_in(r.output);
  const char* hosts[] = {"s0", "s8", "s16", "s24"};
  for (int rank = 0; rank < 4; ++rank) {
    const auto it = v.find("RANK" + std::to_string(rank));
    ASSERT_NE(it, v.end()) << r.output;
    EXPECT_EQ(it->second, "4 " + std::string(hosts[rank]) + " " + netns_id(std::string("tf-tlmpi-") + hosts[rank]) + " 6")
        << r.output;
  }
  // The relays end with their ranks.
  usleep(300000);
  EXPECT_NE(shell_run("pgrep -f 'rank-exec --name tlmp[i]'").status, 0) << "a relay outlived its rank";
}

// An iproute2 unpacked from its .debs into a directory (dpkg -x): found through the setting,
// run with that directory's libraries (this stand-in refuses to start without them).
TEST(FabricJob, Iproute2FromAnUnpackedPrefixRunsWithItsLibraries) {
  REQUIRE_FABRIC();
  const std::string ip = shell_run("command -v ip || echo /usr/sbin/ip").output;
  const std::string tc = shell_run("command -v tc || echo /usr/sbin/tc").output;
  const ScratchDir scratch("iproute2_prefix");
  const std::string& prefix = scratch.path();
  const std::string libs = prefix + "/usr/lib/" + shell_run("uname -m | tr -d '\\n'").output + "-linux-gnu";
  auto stand_in = [&](const std::string& real) {
    return "#!/bin/sh\ncase \":$LD_LIBRARY_PATH:\" in *\":" + libs + ":\"*) ;; *) echo \"$0: error while loading "
           "shared libraries: libmnl.so.0: cannot open shared object file\" >&2; exit 127;; esac\nexec " +
           real.substr(0, real.find('\n')) + " \"$@\"\n";
  };
  write_script(prefix + "/bin/ip", stand_in(ip));
  write_script(prefix + "/sbin/tc", stand_in(tc));
  fs::create_symlink("/bin/ip", prefix + "/sbin/ip");  // as in the .deb: absolute
  // Without its libraries it is found but does not run, and `up` says so.
  const std::string up = " fabric up " + kExamples + "bigraph-32.json --name tlpfx --rate-mbit 10";
  const auto broken = shell_run("TOPOCOLL_FABRIC_IPROUTE2=" + prefix + " " + kCli + up);
  EXPECT_NE(broken.status, 0);
  EXPECT_NE(broken.output.find("`ip` at " + prefix + "/bin/ip does not run"), std::string::npos) << broken.output;
  EXPECT_NE(broken.output.find("no library directory was found beside it"), std::string::npos) << broken.output;
  fs::create_directories(libs);
  const auto ok = shell_run("TOPOCOLL_FABRIC_IPROUTE2=" + prefix + " " + kCli + up);
  EXPECT_EQ(ok.status, 0) << ok.output;
  const auto down = shell_run("TOPOCOLL_FABRIC_IPROUTE2=" + prefix + " " + kCli + " fabric down --name tlpfx");
  EXPECT_EQ(down.status, 0) << down.output;
  // A directory without them is the only place looked when set.
  const ScratchDir empty_dir("iproute2_empty");
  const auto empty = shell_run("TOPOCOLL_FABRIC_IPROUTE2=" + empty_dir.path() + " " + kCli + up);
  EXPECT_NE(empty.status, 0);
  EXPECT_NE(empty.output.find("is not in TOPOCOLL_FABRIC_IPROUTE2="), std::string::npos) << empty.output;
}

// Tools hidden from every place the fabric looks (in a mount namespace of the test's own):
// `up` names the program, the places and the ways to provide it.
TEST(FabricJob, HiddenToolsAreNamedWithWhereTheFabricLooked) {
  REQUIRE_FABRIC();
  if (shell_run("command -v unshare && command -v mount").status != 0) GTEST_SKIP() << "no unshare or mount";
  const std::string real_tc = shell_run("readlink -f \"$(command -v tc || echo /usr/sbin/tc)\" | tr -d '\\n'").output;
  const auto r = shell_run("unshare --mount --propagation private sh -c 'mount --bind /dev/null " + real_tc +
                           " && PATH=/usr/bin:/bin exec " + kCli + " fabric up " + kExamples +
                           "bigraph-32.json --name tlhide'");
  EXPECT_NE(r.status, 0);
  for (const char* part : {"`tc` (iproute2) is not installed: looked in PATH (/usr/bin:/bin)", "/usr/sbin, /sbin",
                           "TOPOCOLL_FABRIC_IPROUTE2 is unset", "apt-get install iproute2", "dpkg -x"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  EXPECT_FALSE(fs::exists(fabric_record_path("tlhide")));
}

// The machine the GPU record runs on has no sch_netem: nothing the fabric does asks for it.
// A qdisc it does use that the kernel lacks is named with the feature that needs it.
TEST(FabricJob, NoQdiscButTbfAndPfifoIsNeededAndAMissingOneIsNamed) {
  REQUIRE_FABRIC();
  const std::string real_tc = shell_run("(command -v tc || echo /usr/sbin/tc) | tr -d '\\n'").output;
  const ScratchDir scratch("fake_tc");
  const std::string& bin = scratch.path();
  const std::string log = bin + "/calls.log";
  auto refusing = [&](const std::string& qdisc) {
    return "#!/bin/sh\necho \"$*\" >> " + log + "\nif [ \"$1\" = -batch ] || [ \"$3\" = -batch ]; then\n"
           "  input=$(cat); echo \"$input\" >> " + log + "\n"
           "  case \"$input\" in *\" " + qdisc + " \"*) echo 'Error: Specified qdisc kind is unknown.' >&2; exit 2;; esac\n"
           "  printf '%s\\n' \"$input\" | exec " + real_tc + " \"$@\"\nfi\n"
           "case \" $* \" in *\" " + qdisc + " \"*) echo 'Error: Specified qdisc kind is unknown.' >&2; exit 2;; esac\n"
           "exec " + real_tc + " \"$@\"\n";
  };
  write_script(bin + "/tc", refusing("netem"));
  const std::string with_fake = "PATH=" + bin + ":$PATH " + kCli;
  shell_run(kCli + " fabric down --force --name tlqdisc");
  ASSERT_EQ(shell_run(with_fake + " fabric up " + kExamples + "bigraph-32.json --name tlqdisc --rate-mbit 10").status, 0);
  EXPECT_EQ(shell_run(with_fake + " fabric degrade --name tlqdisc U0-L1 --rate-mbit 5").status, 0);
  EXPECT_EQ(shell_run(with_fake + " fabric cut --name tlqdisc s9.g0-L1").status, 0);
  EXPECT_EQ(shell_run(with_fake + " fabric restore --name tlqdisc").status, 0);
  std::ifstream in(log);
  std::stringstream calls;
  calls << in.rdbuf();
  EXPECT_NE(calls.str().find("tbf"), std::string::npos) << "the stand-in saw no call";
  EXPECT_EQ(calls.str().find("netem"), std::string::npos);
  // A kernel without pfifo: cutting a cable says what it needs.
  write_script(bin + "/tc", refusing("pfifo"));
  const auto cut = shell_run(with_fake + " fabric cut --name tlqdisc s9.g0-L1");
  EXPECT_NE(cut.status, 0);
  EXPECT_NE(cut.output.find("cutting a cable (dropping everything at its ends) needs the `pfifo` qdisc, which this "
                            "kernel (or its tc) does not have"),
            std::string::npos)
      << cut.output;
  shell_run(kCli + " fabric down --name tlqdisc");
}

}  // namespace
}  // namespace topocoll::fabric
