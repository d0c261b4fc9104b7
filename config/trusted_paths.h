// Where root may write and what it may run. A directory another user controls lets that user
// rename what lies in it and put a link in its place, so a file root writes under it, a
// directory root keeps records in, or a program root runs from it is that user's choice, not
// root's. Used by the files written for users (user_files.h), the fabric's records, the
// private directory of converters and the lookup of the programs topocoll starts.
#pragma once

#include <sys/types.h>

#include <string>

namespace topocoll::config {

// Why `dir` is not safe ("" = it is): a directory the path passes through, resolved as the
// kernel resolves it (every link followed where it is met, ".." taken after it), belongs to
// a user trusted_owner does not trust, or is writable by group or others without the
// sticky bit (/tmp is safe above the last component). `sticky_end`: whether the last
// directory may itself be sticky and writable by all (files named by us in /tmp: yes; a
// directory whose every name matters, such as the fabric's records: no). `at_risk` ends the
// reason: "who could change the fabric records". Components that do not exist yet are not
// looked at (whoever makes them owns them). A relative `dir` is taken from the working
// directory, whose own path is checked too.
std::string unsafe_directory(const std::string& dir, bool sticky_end, const std::string& at_risk);

// Whether root's files may lie under a directory `uid` owns: root, this process's user, as
// root under sudo the user who ran it (SUDO_UID), and the users TOPOCOLL_TRUSTED_UIDS lists.
bool trusted_owner(uid_t uid);

// Whether this process writes as root (effective uid 0), where unsafe_directory applies to
// every file it writes for users.
bool writes_as_root();

// Whether programs (or their libraries) root runs may come from `dir`: unsafe_directory's
// rule, with only root and this user trusted.
bool trusted_program_directory(const std::string& dir);

// `path` when it is a regular executable file root may run, resolved (as root: its real
// file, owned by root or this user, writable by no other, in a directory no other user
// controls; SUDO_UID and TOPOCOLL_TRUSTED_UIDS do not count here); "" otherwise.
std::string trusted_program(const std::string& path);

// The executable `name` (a bare name) is found as: the first regular, executable file of that
// name in the absolute directories of `search_path` (':'-separated; empty and relative
// entries, "." among them, are skipped: they are the working directory, often /tmp). As
// root, directories unsafe_directory refuses are skipped too. A `name` with a '/' is taken
// as given when executable. The path returned is trusted_program's. "" when there is none.
std::string find_executable(const std::string& name, const std::string& search_path);

// The directory a path names its last component in, by its text: "/" for "/x" and "/",
// "." for a bare name.
std::string parent_directory(const std::string& path);

}  // namespace topocoll::config
