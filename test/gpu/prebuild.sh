#!/bin/bash
# Builds here, on the CPU machine, what run_gpu.sh would build on the GPU
# machine, and packs it (.gpu-prebuilt.tar.xz, which git ignores) for the
# device tool's carry: a GPU call then spends its minutes on tests, not on
# the build (about 4 of them there). The build is the same one: run_gpu.sh's
# build stage, against .devdeps' UCX with CUDA. The GPU machine must see the
# checkout at this same path, as the libtool wrappers and run paths name it;
# run_gpu.sh checks that and builds there otherwise.
#
#   test/gpu/prebuild.sh [make targets]    (default: the whole build)
#   carry: .devdeps .gpu-prebuilt.tar.xz
set -eu
cd "$(dirname "$0")/../.."
src=$PWD
export GPU_BUILD_TARGETS="$*" GPU_MAKE_JOBS=${GPU_MAKE_JOBS:-$(nproc)}
OUT=$(mktemp -d) test/gpu/run_gpu.sh build
echo "$src" >build-gpu/.built-in
# what runs there: programs, libraries, wrappers; not the objects
# (a dictionary that holds a whole program: the programs each carry the
# same CUDA kernels, which xz's default 8 MiB window did not see repeat,
# 42 MB against 8)
XZ_OPT=${XZ_OPT:---lzma2=preset=6,dict=192MiB} \
    tar --exclude='*.o' --exclude='*.a' --exclude='.deps' --exclude='*.lo' \
    -cJf .gpu-prebuilt.tar.xz build-gpu
ls -l .gpu-prebuilt.tar.xz
