// The library's own version string, for `strings libnccl-topocoll.so | grep topocoll`
// (TOPOCOLL_VERSION: project()'s version, as config/version.h gives it to the rest).
extern "C" __attribute__((used)) const char topocoll_library_version[] = "topocoll " TOPOCOLL_VERSION;
