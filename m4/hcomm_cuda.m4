# HCOMM_CHECK_CUDA: --with-cuda[=DIR] (default: /usr/local/cuda when
# present) and --with-cuda-arch=LIST (compute capabilities, default 90).
# With CUDA, the reduction kernels are built with nvcc for each architecture
# (plus PTX of the newest, for later GPUs) and the CUDA runtime is linked
# statically, so that libhcomm.so loads on machines without a driver and
# treats every buffer as host memory there.
AC_DEFUN([HCOMM_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [CUDA toolkit (default: /usr/local/cuda if present)])],
    [], [with_cuda=check])
  AC_ARG_WITH([cuda-arch],
    [AS_HELP_STRING([--with-cuda-arch=LIST], [GPU architectures to build for, e.g. "80 90" (default: 90)])],
    [], [with_cuda_arch=90])
  hcomm_have_cuda=no
  CUDA_CPPFLAGS=
  CUDA_LIBS=
  NVCC_GENCODE=
  AS_IF([test "x$with_cuda" != xno], [
    hcomm_cuda_dir=$with_cuda
    AS_IF([test "x$with_cuda" = xyes || test "x$with_cuda" = xcheck],
      [hcomm_cuda_dir=/usr/local/cuda])
    hcomm_cuda_libdir=$hcomm_cuda_dir/lib64
    AS_IF([test -f "$hcomm_cuda_libdir/libcudart_static.a"], [],
      [hcomm_cuda_libdir=$hcomm_cuda_dir/lib])
    AS_IF([test -f "$hcomm_cuda_dir/include/cuda_runtime_api.h" &&
           test -x "$hcomm_cuda_dir/bin/nvcc" &&
           test -f "$hcomm_cuda_libdir/libcudart_static.a"],
      [hcomm_have_cuda=yes; NVCC="$hcomm_cuda_dir/bin/nvcc"],
      [AS_IF([test "x$with_cuda" != xcheck],
        [AC_MSG_ERROR([--with-cuda given but nvcc, cuda_runtime_api.h or libcudart_static.a not found in $hcomm_cuda_dir])])])
  ])
  AS_IF([test "x$hcomm_have_cuda" = xyes], [
    for hcomm_arch in $with_cuda_arch; do
      NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$hcomm_arch,code=sm_$hcomm_arch"
      hcomm_last_arch=$hcomm_arch
    done
    NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$hcomm_last_arch,code=compute_$hcomm_last_arch"
    AC_MSG_CHECKING([whether nvcc builds for $with_cuda_arch])
    printf '__global__ void k(int *p) { *p = 1; }\n' > conftest.cu
    AS_IF([$NVCC $NVCC_GENCODE -c conftest.cu -o conftest.o >&AS_MESSAGE_LOG_FD 2>&1],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no]); AC_MSG_ERROR([nvcc cannot build for $with_cuda_arch (see config.log)])])
    rm -f conftest.cu conftest.o
    CUDA_CPPFLAGS="-I$hcomm_cuda_dir/include"
    CUDA_LIBS="$hcomm_cuda_libdir/libcudart_static.a -ldl -lrt -lpthread"
    AC_DEFINE([HAVE_CUDA], [1], [Define to 1 when built with CUDA])
    AC_DEFINE_UNQUOTED([HCOMM_CUDA_ARCH], ["$with_cuda_arch"],
      [GPU architectures the kernels are built for])
  ])
  AC_MSG_CHECKING([for CUDA])
  AC_MSG_RESULT([$hcomm_have_cuda])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$hcomm_have_cuda" = xyes])
  AC_SUBST([NVCC])
  AC_SUBST([NVCC_GENCODE])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LIBS])
])
