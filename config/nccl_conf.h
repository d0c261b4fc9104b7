// NCCL's configuration files, read as NCCL reads them (2.28 src/misc/param.cc, initEnv):
// NCCL_CONF_FILE if set, else ~/.nccl.conf (the home directory of the real user), then
// /etc/nccl.conf. Each line NAME=VALUE sets NAME unless it is set already (NCCL calls
// setenv without overwrite), so the environment wins over the files, the user's file over
// /etc/nccl.conf and, within a file, the first line over later ones; a line starting with
// '#' or without '=' is skipped, and nothing is trimmed.
//
// NCCL applies the files to the environment at its own init. A topocoll face that reads the
// environment before that (the interposer runs before NCCL's first ncclCommInitRank) would
// miss what a cluster put there (NCCL_SOCKET_IFNAME, NCCL_HOSTID, TOPOCOLL_* too), and
// disagree with NCCL and with its other faces: config/env.h looks here for the NCCL_* and
// TOPOCOLL_* variables the environment does not set.
#pragma once

#include <functional>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <cstdint>
#include <string_view>
#include <vector>

namespace topocoll::config {

using NcclConf = std::map<std::string, std::string, std::less<>>;

// The files NCCL reads, in its order: `conf_file` (NCCL_CONF_FILE) when set and not empty,
// else `home`/.nccl.conf when `home` is known; then /etc/nccl.conf.
std::vector<std::string> nccl_conf_paths(const std::optional<std::string>& conf_file,
                                         const std::optional<std::string>& home);

// Adds one file's lines to `into`, keeping what it holds already.
void add_nccl_conf(std::istream& file, NcclConf& into);

// The files' settings in NCCL's order. A missing file is skipped, as NCCL skips it; one that
// is not a regular file of at most kMaxNcclConfBytes (a pipe would block, /dev/zero never
// end) is skipped with one warning naming it.
inline constexpr std::uint64_t kMaxNcclConfBytes = std::uint64_t(1) << 20;
NcclConf read_nccl_conf(const std::vector<std::string>& paths);

// This process's: the paths from its NCCL_CONF_FILE and its real user's home directory.
// config/env.h consults it for NCCL_* and TOPOCOLL_* variables only.
const NcclConf& process_nccl_conf();

}  // namespace topocoll::config
