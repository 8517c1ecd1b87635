# HCOMM_CHECK_CUDA: --with-cuda[=DIR] (default: /usr/local/cuda when
# present). Found CUDA is reported; device buffers are not used yet.
AC_DEFUN([HCOMM_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [CUDA toolkit (default: /usr/local/cuda if present)])],
    [], [with_cuda=check])
  hcomm_have_cuda=no
  AS_IF([test "x$with_cuda" != xno], [
    hcomm_cuda_dir=$with_cuda
    AS_IF([test "x$with_cuda" = xyes || test "x$with_cuda" = xcheck],
      [hcomm_cuda_dir=/usr/local/cuda])
    AS_IF([test -f "$hcomm_cuda_dir/include/cuda_runtime.h"],
      [hcomm_have_cuda=yes; NVCC="$hcomm_cuda_dir/bin/nvcc"],
      [AS_IF([test "x$with_cuda" != xcheck],
        [AC_MSG_ERROR([--with-cuda given but $hcomm_cuda_dir/include/cuda_runtime.h not found])])])
  ])
  AC_MSG_CHECKING([for CUDA])
  AC_MSG_RESULT([$hcomm_have_cuda])
  AC_SUBST([NVCC])
])
