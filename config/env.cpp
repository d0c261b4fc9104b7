#include "config/env.h"

#include <atomic>
#include <climits>
#include <cstdlib>
#include <set>
#include <stdexcept>

#include "config/algorithm_names.h"
#include "config/nccl_conf.h"
#include "config/value_grammar.h"
#include "config/warnings.h"

namespace topocoll::config {
namespace {

constexpr int64_t kUnbounded = INT64_MAX;

// Table rows by grammar, so each row reads as name, range, default, meaning.
constexpr EnvVariable boolean(std::string_view name, std::string_view fallback, std::string_view doc) {
  return {.name = name, .grammar = Grammar::Bool, .default_value = fallback, .doc = doc};
}
constexpr EnvVariable count(std::string_view name, int64_t min, int64_t max, std::string_view fallback,
                            std::string_view unset_means, std::string_view doc, Owner owner = Owner::Topocoll,
                            bool bad_is_error = false) {
  return {.name = name, .owner = owner, .grammar = Grammar::Count, .default_value = fallback,
          .unset_means = unset_means, .doc = doc, .min = min, .max = max, .bad_is_error = bad_is_error};
}
constexpr EnvVariable size(std::string_view name, int64_t min, int64_t max, std::string_view fallback,
                           std::string_view unset_means, std::string_view doc, bool zero_is_off = false) {
  return {.name = name, .grammar = Grammar::Size, .default_value = fallback, .unset_means = unset_means,
          .doc = doc, .min = min, .max = max, .zero_is_off = zero_is_off};
}
constexpr EnvVariable number(std::string_view name, double min, double max, std::string_view fallback,
                             std::string_view unset_means, std::string_view doc, bool bad_is_error = false) {
  return {.name = name, .grammar = Grammar::Number, .default_value = fallback, .unset_means = unset_means,
          .doc = doc, .min_number = min, .max_number = max, .bad_is_error = bad_is_error};
}
constexpr EnvVariable choice(std::string_view name, std::span<const std::string_view> choices,
                             std::string_view fallback, std::string_view doc) {
  return {.name = name, .grammar = Grammar::Choice, .default_value = fallback, .doc = doc, .choices = choices};
}
constexpr EnvVariable text(std::string_view name, std::string_view fallback, std::string_view unset_means,
                           std::string_view doc, Owner owner = Owner::Topocoll) {
  return {.name = name, .owner = owner, .grammar = Grammar::Text, .default_value = fallback,
          .unset_means = unset_means, .doc = doc};
}

constexpr std::string_view kRingCommModes[] = {"init", "lazy", "off"};

// A launcher's rank or size: refused when bad (guessing would join the wrong rank).
// A root-facing setting (EnvVariable::environment_only).
constexpr EnvVariable environment_only(EnvVariable v) {
  v.environment_only = true;
  return v;
}

constexpr EnvVariable launcher_rank(std::string_view name, std::string_view doc) {
  return count(name, 0, INT_MAX, "", "the next launcher variable", doc, Owner::Launcher, true);
}
constexpr EnvVariable launcher_size(std::string_view name, std::string_view doc) {
  return count(name, 1, INT_MAX, "", "the next launcher variable", doc, Owner::Launcher, true);
}
constexpr EnvVariable launcher_local_rank(std::string_view name) {
  return count(name, 0, 4095, "", "the next launcher variable, else GPU 0",
               "the GPU `topocoll accept` stands for when --gpu is not given (the first one set)",
               Owner::Launcher);
}

const std::vector<EnvVariable>& table() {
  static const std::vector<EnvVariable> variables = {
      // Which network, which host (every face).
      text("TOPOCOLL_TOPO_FILE", "", "no topology: the faces forward, change nothing, use the host's interfaces",
           "the topology JSON (docs/topology.md) every face and the CLI's ranks use"),
      text("TOPOCOLL_HOSTNAME", "", "NCCL_HOSTID, else gethostname()",
           "this host's name in the topology (docs/usage.md, \"Which host am I\")"),
      // Interposer.
      boolean("TOPOCOLL_ENABLE", "1", "0 turns the interposer off: every call goes to NCCL, no init exchange"),
      choice("TOPOCOLL_ALGO", algorithm_names(), "auto",
             "auto (the cost model decides per call), nccl, nccl-topo-ring, or an algorithm of `topocoll "
             "algorithms` forced for every call (ring: rank order; ring-topo: topology order)"),
      size("TOPOCOLL_MIN_BYTES", 0, kUnbounded, "0", "",
           "calls smaller than this go to NCCL (nccl-tests' size: an allreduce's vector, the whole "
           "buffer of all ranks for reduce-scatter and allgather)"),
      size("TOPOCOLL_MAX_BYTES", 0, kUnbounded, "", "unlimited", "calls larger than this go to NCCL"),
      count("TOPOCOLL_STEP_OVERHEAD_US", 0, 1000000, "8", "",
            "microseconds charged per schedule step when auto compares routes"),
      number("TOPOCOLL_AUTO_MARGIN", 1, 100, "1.3", "",
             "in auto, how many times faster than NCCL's best a route must be predicted to take a call"),
      size("TOPOCOLL_SCRATCH_MAX_BYTES", 0, kUnbounded, "2G", "",
           "most device scratch one communicator's calls of one batch may take; larger calls go to NCCL"),
      size("TOPOCOLL_PLAN_CACHE_BYTES", 0, kUnbounded, "256M", "",
           "most memory one communicator's cached plans may hold (least recently used out first)"),
      choice("TOPOCOLL_RING_COMM", kRingCommModes, "init",
             "when the topology-ordered communicator is split: at init, at first use (lazy), or never"),
      count("TOPOCOLL_INIT_TIMEOUT_S", 0, 7LL * 24 * 3600, "600", "",
            "seconds a new communicator's init exchange waits for its peers (0 = no limit); past it the "
            "communicator falls back to NCCL and ncclCommGetAsyncError reports ncclSystemError"),
      count("TOPOCOLL_VOTE_TIMEOUT_S", 0, 7LL * 24 * 3600, "1800", "",
            "seconds a served call's vote (scratch growth, a split made at first use) waits for its peers "
            "(0 = no limit); past it the call fails and ncclCommGetAsyncError reports ncclSystemError"),
      boolean("TOPOCOLL_STEP_TIMES", "0",
              "1 logs each schedule collective's step times (CUDA events) at INFO, subsystem TUNING"),
      // Pipelining of large steps (exec/pipeline.h).
      size("TOPOCOLL_PIPELINE_CHUNK_BYTES", 64 << 10, 1 << 30, "", "4M on the NCCL backend, 0 (off) on the host backend",
           "large steps are cut into pieces of at least this size, each reduce overlapping the next transfer; same on every rank",
           true),
      count("TOPOCOLL_PIPELINE_MAX_CHUNKS", 2, 64, "8", "", "most pieces one message of a pipelined step is cut into"),
      // Tuner.
      boolean("TOPOCOLL_TUNER", "1", "0 turns the tuner face off: NCCL's cost tables are left as NCCL makes them"),
      text("TOPOCOLL_TUNER_HOSTS", "", "the tuner acts only on a communicator over every host of the topology",
           "the job's hosts in rank order, comma-separated: the tuner also acts on a communicator over exactly those"),
      // Net plugin and the socket transport under it and under the CLI's ranks.
      text("TOPOCOLL_NET_IFNAME", "", "NCCL_SOCKET_IFNAME, else NCCL's order: ib*, else all but docker*, lo*, virbr*",
           "the net plugin's interfaces without a topology (NCCL_SOCKET_IFNAME's syntax)"),
      text("TOPOCOLL_NET_PLANE_ADDRS", "", "each NIC by the interface or RDMA device of its name",
           "nic=ip list: the address each topology NIC of this host binds"),
      count("TOPOCOLL_NET_SOCKETS_PER_CONN", 1, 16, "",
            "in the net plugin without progress threads 1, or one per TOPOCOLL_NET_LANE_MARKS mark; else 4",
            "TCP sockets per connection"),
      count("TOPOCOLL_NET_THREADS", 0, 16, "", "0 in the net plugin (NCCL's proxy moves every byte); 2 in bench and accept",
            "progress threads per connection (at most the sockets; 0 = none, the net plugin only)"),
      count("TOPOCOLL_NET_TIMEOUT_MS", 1, 24LL * 3600 * 1000, "60000", "",
            "connect and handshake timeout in milliseconds; in bench and accept also how long an accept waits "
            "for a connection (the net plugin's waits as long as NCCL asks)"),
      count("TOPOCOLL_NET_STALL_TIMEOUT_MS", 0, 24LL * 3600 * 1000, "",
            "never in the net plugin (as NCCL's own transports); TOPOCOLL_NET_TIMEOUT_MS in bench and accept",
            "a message in flight that moves no byte for this many milliseconds fails its request (0 = never)"),
      size("TOPOCOLL_NET_CHUNK_BYTES", 4 << 10, 64 << 20, "512K", "",
           "striping unit of a message over the sockets (the net plugin on one socket: 2M when unset)"),
      size("TOPOCOLL_NET_MIN_STRIPE_BYTES", 1, 64 << 20, "64K", "",
           "a message below chunk x sockets spreads evenly in pieces of at least this (1 = every socket); "
           "one of at most this size is one piece, moved by the calling thread"),
      size("TOPOCOLL_NET_EAGER_BYTES", 0, 1 << 20, "1M", "",
           "host backend: messages up to this size take the eager channel (0 = never)"),
      boolean("TOPOCOLL_NET_RENDEZVOUS", "1",
              "host backend: every message above 64 KiB, eager or not, starts when the receiver's "
              "clear-to-send arrives (0 = at once)"),
      {.name = "TOPOCOLL_NET_LANE_MARKS", .grammar = Grammar::Marks, .unset_means = "no marks",
       .doc = "socket i of a connection carries SO_MARK mark i mod n, for policy routing per lane"},
      // Processes of `topocoll bench` / `accept` (exec/rank_environment.h).
      count("TOPOCOLL_RANK", 0, INT_MAX, "", "the launcher's (OMPI_COMM_WORLD_RANK, PMI_RANK, ...)",
            "this process's rank in a multi-process run", Owner::Topocoll, true),
      count("TOPOCOLL_NRANKS", 1, INT_MAX, "", "the launcher's (OMPI_COMM_WORLD_SIZE, PMI_SIZE, ...)",
            "how many ranks the run has", Owner::Topocoll, true),
      text("TOPOCOLL_BOOTSTRAP", "", "MASTER_ADDR:MASTER_PORT", "host:port of the rendezvous root"),
      boolean("TOPOCOLL_BOOTSTRAP_SERVED", "0",
              "1: the launcher serves the rendezvous itself; rank 0 does not host it"),
      // Emulated fabric (docs/fabric.md).
      // These four decide what root trusts, runs or builds: the environment's alone.
      environment_only(text("TOPOCOLL_TRUSTED_UIDS", "", "only root, this user and SUDO_UID",
                            "as root: comma-separated uids whose directories root may write under (as git's "
                            "safe.directory: a container's root and a checkout mounted from the host); never for "
                            "programs it runs")),
      environment_only(
          text("TOPOCOLL_FABRIC_STATE_DIR", "/run/topocoll/fabric", "", "where `topocoll fabric` keeps its records")),
      environment_only(number("TOPOCOLL_FABRIC_MEMORY_LIMIT_MIB", 1, 1e12, "", "half the memory available",
                              "most kernel memory (MiB) a fabric may take", true)),
      environment_only(text("TOPOCOLL_FABRIC_IPROUTE2", "", "PATH, /usr/sbin, /sbin, /usr/bin, /bin, then BUILD_DIR/deps",
                            "where the fabric's `ip` and `tc` are: their directory, or a prefix iproute2's .debs were "
                            "unpacked into")),

      // Other programs' variables topocoll reads.
      text("NCCL_HOSTID", "", "", "names this host for the topology, after TOPOCOLL_HOSTNAME", Owner::Nccl),
      text("NCCL_SOCKET_IFNAME", "", "", "the net plugin's interfaces without a topology, after TOPOCOLL_NET_IFNAME",
           Owner::Nccl),
      text("NCCL_COMM_ID", "", "",
           "without ib* and NCCL_SOCKET_IFNAME, the net plugin takes the interface in its address's subnet, as NCCL does",
           Owner::Nccl),
      text("NCCL_TOPO_FILE", "", "", "the net plugin names a device apart from a <net> of that file with its name",
           Owner::Nccl),
      text("NCCL_ALGO", "", "", "when set, the tuner changes nothing", Owner::Nccl),
      text("NCCL_PROTO", "", "", "when set, the tuner changes nothing", Owner::Nccl),
      text("NCCL_COMM_BLOCKING", "", "", "0: communicators without a config are non-blocking (left to NCCL)",
           Owner::Nccl),
      text("NCCL_CHECK_POINTERS", "", "",
           "1: a call whose buffer is not device memory of its GPU goes to NCCL, which refuses it", Owner::Nccl),
      text("NCCL_COMM_SPLIT_SHARE_RESOURCES", "", "",
           "1: splits share their parent's abort flag, so a topology-ordered split not used is destroyed, not "
           "aborted",
           Owner::Nccl),
      text("NCCL_DEBUG", "", "", "what the interposer prints on stderr, as NCCL filters its own lines", Owner::Nccl),
      text("NCCL_DEBUG_SUBSYS", "", "", "which subsystems' INFO lines the interposer prints", Owner::Nccl),
      text("NCCL_CONF_FILE", "", "~/.nccl.conf",
           "NCCL's configuration file, read before /etc/nccl.conf for NCCL_* and TOPOCOLL_* variables the "
           "environment leaves unset (config/nccl_conf.h)",
           Owner::Nccl),
      text("CUDA_VISIBLE_DEVICES", "", "", "maps a process's CUDA device to the host's GPU index", Owner::Cuda),
      launcher_local_rank("LOCAL_RANK"),
      launcher_local_rank("OMPI_COMM_WORLD_LOCAL_RANK"),
      launcher_local_rank("SLURM_LOCALID"),
      launcher_local_rank("MPI_LOCALRANKID"),
      launcher_rank("OMPI_COMM_WORLD_RANK", "the rank, after TOPOCOLL_RANK"),
      launcher_rank("PMI_RANK", "the rank, after the above"),
      launcher_rank("PMIX_RANK", "the rank, after the above"),
      launcher_rank("SLURM_PROCID", "the rank, after the above"),
      launcher_rank("RANK", "the rank, after the above (torchrun)"),
      launcher_size("OMPI_COMM_WORLD_SIZE", "the number of ranks, after TOPOCOLL_NRANKS"),
      launcher_size("PMI_SIZE", "the number of ranks, after the above"),
      launcher_size("SLURM_NTASKS", "the number of ranks, after the above"),
      launcher_size("WORLD_SIZE", "the number of ranks, after the above (torchrun)"),
      text("MASTER_ADDR", "", "", "the rendezvous root's host when TOPOCOLL_BOOTSTRAP is unset (torchrun)",
           Owner::Launcher),
      text("MASTER_PORT", "29500", "", "the rendezvous root's port with MASTER_ADDR", Owner::Launcher),
      text("PATH", "", "", "where `ip`, `tc` and Graphviz's `dot` are looked for", Owner::System),
      text("SUDO_UID", "", "", "as root under sudo: the user who ran it, whose directories root may also write in",
           Owner::System),
      text("TMPDIR", "", "/tmp", "where converters (Graphviz, rsvg-convert) work, in a private directory; as root "
           "only one no other user controls", Owner::System),
  };
  return variables;
}

std::string default_text(const EnvVariable& v) {
  if (!v.default_value.empty()) return std::string(v.default_value);
  return "the default (" + std::string(v.unset_means.empty() ? "unset" : v.unset_means) + ")";
}

template <typename T>
T value_of(const Env& e, std::string_view name) {
  const EnvValue& v = e.setting(name).value;
  if (const T* t = std::get_if<T>(&v)) return *t;
  return T{};
}

}  // namespace

std::string_view to_string(Owner owner) {
  switch (owner) {
    case Owner::Topocoll: return "topocoll";
    case Owner::Nccl: return "NCCL";
    case Owner::Cuda: return "CUDA";
    case Owner::Launcher: return "launcher";
    case Owner::System: return "system";
  }
  return "?";
}

std::span<const EnvVariable> env_variables() { return table(); }

const EnvVariable* find_env_variable(std::string_view name) {
  for (const EnvVariable& v : table())
    if (v.name == name) return &v;
  return nullptr;
}

ParsedEnvValue parse_env_value(const EnvVariable& v, std::string_view text) {
  auto from = [](auto&& parsed) -> ParsedEnvValue {
    if (!parsed) return {std::monostate{}, std::move(parsed.expected)};
    return {EnvValue(std::move(*parsed.value)), ""};
  };
  switch (v.grammar) {
    case Grammar::Bool: return from(parse_bool(text));
    case Grammar::Count: return from(parse_count(text, v.min, v.max));
    case Grammar::Size: return from(parse_size(text, v.min, v.max, v.zero_is_off));
    case Grammar::Number: return from(parse_number(text, v.min_number, v.max_number));
    case Grammar::Choice: return from(parse_choice(text, v.choices));
    case Grammar::Marks: return from(parse_marks(text));
    case Grammar::Text: {
      const std::string_view t = trim(text);
      if (t.empty()) return {std::monostate{}, "expected a value"};
      return {EnvValue(std::string(t)), ""};
    }
  }
  return {std::monostate{}, "expected a value"};
}

const EnvSetting& Env::setting(std::string_view name) const {
  for (const EnvSetting& s : settings)
    if (s.variable->name == name) return s;
  throw std::out_of_range("no environment variable " + std::string(name) + " in config/env.cpp's table");
}

const EnvSetting* Env::first_set(std::initializer_list<std::string_view> names) const {
  for (std::string_view name : names)
    if (const EnvSetting& s = setting(name); s.is_set()) return &s;
  return nullptr;
}

Env read_env_from(const EnvSource& source) {
  Env e;
  for (const EnvVariable& v : table()) {
    EnvSetting s;
    s.variable = &v;
    if (std::optional<std::string> raw = source(v.name))
      if (const std::string_view t = trim(*raw); !t.empty()) s.text = std::string(t);
    if (!v.default_value.empty()) s.value = parse_env_value(v, v.default_value).value;
    if (s.text) {
      ParsedEnvValue parsed = parse_env_value(v, *s.text);
      if (!std::holds_alternative<std::monostate>(parsed.value)) {
        s.value = std::move(parsed.value);
      } else {
        s.problem = std::string(v.name) + "=" + quoted_value(*s.text) + ": " + parsed.expected;
        if (v.bad_is_error) {
          s.value = std::monostate{};
        } else {
          s.problem += "; using " + default_text(v);
          e.warnings.push_back(s.problem);
        }
      }
    }
    e.settings.push_back(std::move(s));
  }

  e.topo_file = value_of<std::string>(e, "TOPOCOLL_TOPO_FILE");
  e.hostname = value_of<std::string>(e, "TOPOCOLL_HOSTNAME");
  e.nccl_hostid = value_of<std::string>(e, "NCCL_HOSTID");
  e.enable = value_of<bool>(e, "TOPOCOLL_ENABLE");
  e.algo = value_of<std::string>(e, "TOPOCOLL_ALGO");
  e.min_bytes = value_of<int64_t>(e, "TOPOCOLL_MIN_BYTES");
  const EnvValue& max = e.setting("TOPOCOLL_MAX_BYTES").value;
  e.max_bytes = std::holds_alternative<int64_t>(max) ? std::get<int64_t>(max) : INT64_MAX;
  if (e.min_bytes > e.max_bytes) {
    e.warnings.push_back("TOPOCOLL_MIN_BYTES (" + format_size(e.min_bytes) + ") is larger than TOPOCOLL_MAX_BYTES (" +
                         format_size(e.max_bytes) + "); using neither (0 and unlimited)");
    e.min_bytes = 0;
    e.max_bytes = INT64_MAX;
  }
  e.step_overhead_us = value_of<int64_t>(e, "TOPOCOLL_STEP_OVERHEAD_US");
  e.auto_margin = value_of<double>(e, "TOPOCOLL_AUTO_MARGIN");
  e.scratch_max_bytes = value_of<int64_t>(e, "TOPOCOLL_SCRATCH_MAX_BYTES");
  e.plan_cache_bytes = value_of<int64_t>(e, "TOPOCOLL_PLAN_CACHE_BYTES");
  e.ring_comm = value_of<std::string>(e, "TOPOCOLL_RING_COMM");
  e.step_times = value_of<bool>(e, "TOPOCOLL_STEP_TIMES");
  e.init_timeout_s = value_of<int64_t>(e, "TOPOCOLL_INIT_TIMEOUT_S");
  e.vote_timeout_s = value_of<int64_t>(e, "TOPOCOLL_VOTE_TIMEOUT_S");
  e.nccl_comm_blocking = value_of<std::string>(e, "NCCL_COMM_BLOCKING");
  e.nccl_comm_split_share_resources = value_of<std::string>(e, "NCCL_COMM_SPLIT_SHARE_RESOURCES");
  e.nccl_check_pointers = value_of<std::string>(e, "NCCL_CHECK_POINTERS");
  e.cuda_visible_devices = value_of<std::string>(e, "CUDA_VISIBLE_DEVICES");
  if (const EnvValue& chunk = e.setting("TOPOCOLL_PIPELINE_CHUNK_BYTES").value;
      std::holds_alternative<int64_t>(chunk))
    e.pipeline_chunk_bytes = std::get<int64_t>(chunk);
  e.pipeline_max_chunks = int(value_of<int64_t>(e, "TOPOCOLL_PIPELINE_MAX_CHUNKS"));
  e.tuner = value_of<bool>(e, "TOPOCOLL_TUNER");
  e.tuner_hosts = value_of<std::string>(e, "TOPOCOLL_TUNER_HOSTS");
  e.nccl_algo = value_of<std::string>(e, "NCCL_ALGO");
  e.nccl_proto = value_of<std::string>(e, "NCCL_PROTO");
  e.net_ifname = value_of<std::string>(e, "TOPOCOLL_NET_IFNAME");
  e.nccl_socket_ifname = value_of<std::string>(e, "NCCL_SOCKET_IFNAME");
  e.nccl_comm_id = value_of<std::string>(e, "NCCL_COMM_ID");
  e.nccl_topo_file = value_of<std::string>(e, "NCCL_TOPO_FILE");
  e.net_plane_addrs = value_of<std::string>(e, "TOPOCOLL_NET_PLANE_ADDRS");
  if (const EnvValue& sockets = e.setting("TOPOCOLL_NET_SOCKETS_PER_CONN").value; std::holds_alternative<int64_t>(sockets))
    e.net_sockets_per_conn = int(std::get<int64_t>(sockets));
  if (const EnvValue& threads = e.setting("TOPOCOLL_NET_THREADS").value; std::holds_alternative<int64_t>(threads))
    e.net_threads = int(std::get<int64_t>(threads));
  e.net_timeout_ms = int(value_of<int64_t>(e, "TOPOCOLL_NET_TIMEOUT_MS"));
  if (const EnvValue& stall = e.setting("TOPOCOLL_NET_STALL_TIMEOUT_MS").value;
      std::holds_alternative<int64_t>(stall))
    e.net_stall_timeout_ms = int(std::get<int64_t>(stall));
  e.net_chunk_bytes = value_of<int64_t>(e, "TOPOCOLL_NET_CHUNK_BYTES");
  e.net_chunk_bytes_set = e.setting("TOPOCOLL_NET_CHUNK_BYTES").is_set();
  e.net_min_stripe_bytes = value_of<int64_t>(e, "TOPOCOLL_NET_MIN_STRIPE_BYTES");
  e.net_eager_bytes = value_of<int64_t>(e, "TOPOCOLL_NET_EAGER_BYTES");
  e.net_rendezvous = value_of<bool>(e, "TOPOCOLL_NET_RENDEZVOUS");
  e.net_lane_marks = value_of<std::vector<uint32_t>>(e, "TOPOCOLL_NET_LANE_MARKS");
  e.bootstrap = value_of<std::string>(e, "TOPOCOLL_BOOTSTRAP");
  e.bootstrap_served = value_of<bool>(e, "TOPOCOLL_BOOTSTRAP_SERVED");
  e.master_addr = value_of<std::string>(e, "MASTER_ADDR");
  e.master_port = value_of<std::string>(e, "MASTER_PORT");
  e.fabric_state_dir = value_of<std::string>(e, "TOPOCOLL_FABRIC_STATE_DIR");
  e.fabric_iproute2 = value_of<std::string>(e, "TOPOCOLL_FABRIC_IPROUTE2");
  e.nccl_debug = value_of<std::string>(e, "NCCL_DEBUG");
  e.nccl_debug_subsys = value_of<std::string>(e, "NCCL_DEBUG_SUBSYS");
  e.path = value_of<std::string>(e, "PATH");
  e.sudo_uid = value_of<std::string>(e, "SUDO_UID");
  e.tmpdir = value_of<std::string>(e, "TMPDIR");
  e.trusted_uids = value_of<std::string>(e, "TOPOCOLL_TRUSTED_UIDS");
  return e;
}

Env read_env(const std::map<std::string, std::string, std::less<>>& values) {
  return read_env_from([&values](std::string_view name) -> std::optional<std::string> {
    const auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  });
}

const Env& env() {
  // What the environment does not set, NCCL's configuration files may (config/nccl_conf.h):
  // NCCL applies them only at its own init, which a face may run before.
  static const Env process = [] {
    std::set<std::string> ignored_from_conf;
    Env e = read_env_from([&ignored_from_conf](std::string_view name) -> std::optional<std::string> {
      if (const char* value = std::getenv(std::string(name).c_str())) return std::string(value);
      // Only NCCL's and topocoll's own: CUDA, the launchers and the system read theirs
      // before NCCL's init could set them (CUDA_VISIBLE_DEVICES from there would name
      // another GPU than CUDA uses).
      if (!name.starts_with("NCCL_") && !name.starts_with("TOPOCOLL_")) return std::nullopt;
      const NcclConf& conf = process_nccl_conf();
      const auto it = conf.find(name);
      if (it == conf.end()) return std::nullopt;
      if (const EnvVariable* v = find_env_variable(name); v && v->environment_only) {
        ignored_from_conf.insert(std::string(name));
        return std::nullopt;
      }
      return it->second;
    });
    for (const std::string& name : ignored_from_conf)
      e.warnings.push_back(name + " in NCCL's configuration files is ignored: it decides what root trusts or runs, "
                                  "so only the environment sets it");
    for (EnvSetting& s : e.settings) {
      s.from_nccl_conf = s.is_set() && !std::getenv(std::string(s.variable->name).c_str());
      // A bad value the environment does not show says where it is.
      if (s.from_nccl_conf && !s.problem.empty())
        for (std::string& w : e.warnings)
          if (w == s.problem) w += " (from NCCL's configuration files)";
    }
    return e;
  }();
  // After the read, not inside it: the sink may log, and logging reads env() (plugin/log.h).
  static std::atomic<bool> reported{false};
  if (!reported.exchange(true))
    for (const std::string& w : process.warnings) warn_once(w);
  return process;
}

}  // namespace topocoll::config
