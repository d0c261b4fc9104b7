// The files users hand topocoll (topologies, host lists, NCCL's configuration file) and the
// files it writes for them (reports, hostfiles, fabric records). topocoll often runs as root,
// inside a production job (LD_PRELOAD), on paths others may control: a file read is a
// regular file of bounded size, never a pipe or a device that would block or never end; a
// file written is replaced whole, never written through a link planted at its name.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace topocoll::config {

struct UserFileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The whole of `path`, which must be a regular file of at most `max_bytes` (opened
// non-blocking, so a pipe is refused rather than waited on). Throws UserFileError naming the
// path and, for a wrong kind or size, `what_it_is` ("a topology file"): "\"p\" is a pipe, not
// a topology file (a regular file is expected)".
std::string read_user_file(const std::string& path, std::uint64_t max_bytes, const std::string& what_it_is);

// `text` as `path`: a fresh file of a unique name beside it (O_EXCL), written to the last
// byte, synced to disk and renamed over `path` (rename replaces a link, never follows it).
// A file replaced keeps its mode (and, as root, its owner); a new one gets 0666 less the
// umask. On failure nothing is left beside `path` and `path` is as it was; the error names
// the path. A `path` that is a directory, device, pipe or socket is refused, never replaced.
// As root, a `path` under a directory another user controls is refused
// (config/trusted_paths.h): that user could swap the directory for a link elsewhere.
void replace_file(const std::string& path, const std::string& text);

// Throws the UserFileError replace_file would for `path`'s kind or its directory (missing,
// not a directory, not writable), without writing: a long run checks its output name first.
void check_replaceable(const std::string& path);

// Creates `dir` and every missing directory above it, then checks that a file can be made in
// it (as root, also that no other user controls a directory on its path). Throws UserFileError naming the path and the reason: run before a long run, so an
// unwritable output directory fails at once rather than after it.
void prepare_output_dir(const std::string& dir);

}  // namespace topocoll::config
