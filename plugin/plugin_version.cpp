// The library's own version string, for `strings libnccl-topocoll.so | grep topocoll`.
extern "C" __attribute__((used)) const char topocoll_library_version[] = "topocoll 0.1.0";
