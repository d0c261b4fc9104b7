# topocoll on an NVIDIA CUDA devel image (CUDA toolkit + NCCL). The steps are those of
# .ci/run: tools/bootstrap.sh installs the Debian/Ubuntu packages and builds, tools/test.sh
# runs the CPU tests (GPU tests too when the container is started with a GPU).
#
#   docker build -t topocoll .
#   docker run --rm topocoll                      # CPU tests
#   docker run --rm --gpus all topocoll           # CPU + GPU tests
#   docker run --rm topocoll bash tools/demo.sh   # the main job, on loopback
#   docker run --rm --cap-add NET_ADMIN --cap-add SYS_ADMIN topocoll bash tools/demo.sh
#                                                 # the main job on the emulated fabric
#                                                 # (namespaces, routers, shaped links)
# Ubuntu 24.04: CMake 3.28 (the build needs 3.24). .dockerignore keeps build outputs out.
FROM nvidia/cuda:13.0.0-devel-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src/topocoll
COPY . .
# Same package list and build as CI.
RUN bash tools/bootstrap.sh && rm -rf /var/lib/apt/lists/*
ENV PATH=/src/topocoll/build/tools:$PATH \
    LD_LIBRARY_PATH=/src/topocoll/build/plugin:$LD_LIBRARY_PATH
CMD ["bash", "tools/test.sh"]
