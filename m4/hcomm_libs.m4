# HCOMM_CHECK_OPTIONAL_LIB(NAME, HEADER, LIB, FUNCTION, HELP, [PROLOGUE])
# --with-NAME[=DIR] / --without-NAME; by default used when found. Defines
# HAVE_<NAME>, the conditional HAVE_<NAME>, and <NAME>_CPPFLAGS/_LDFLAGS/_LIBS.
AC_DEFUN([HCOMM_CHECK_OPTIONAL_LIB], [
  m4_pushdef([UP], m4_toupper([$1]))
  AC_ARG_WITH([$1], [AS_HELP_STRING([--with-$1@<:@=DIR@:>@], [$5])],
    [], [with_$1=check])
  hcomm_have_$1=no
  UP[]_CPPFLAGS=
  UP[]_LDFLAGS=
  UP[]_LIBS=
  AS_IF([test "x$with_$1" != xno], [
    AS_IF([test "x$with_$1" != xyes && test "x$with_$1" != xcheck], [
      UP[]_CPPFLAGS="-isystem $with_$1/include"
      UP[]_LDFLAGS="-L$with_$1/lib -L$with_$1/lib64 -Wl,-rpath,$with_$1/lib -Wl,-rpath,$with_$1/lib64"])
    hcomm_save_CPPFLAGS=$CPPFLAGS
    hcomm_save_LDFLAGS=$LDFLAGS
    CPPFLAGS="$CPPFLAGS $UP[]_CPPFLAGS"
    LDFLAGS="$LDFLAGS $UP[]_LDFLAGS"
    AC_CHECK_HEADER([$2],
      [AC_CHECK_LIB([$3], [$4], [hcomm_have_$1=yes; UP[]_LIBS="-l$3"])],
      [], [m4_default([$6], [AC_INCLUDES_DEFAULT])])
    CPPFLAGS=$hcomm_save_CPPFLAGS
    LDFLAGS=$hcomm_save_LDFLAGS
    AS_IF([test "x$hcomm_have_$1" = xno && test "x$with_$1" != xcheck],
      [AC_MSG_ERROR([--with-$1 was given but $2 / lib$3 were not found])])
  ])
  AS_IF([test "x$hcomm_have_$1" = xyes],
    [AC_DEFINE([HAVE_]UP, [1], [Define to 1 when $1 is used])])
  AM_CONDITIONAL([HAVE_]UP, [test "x$hcomm_have_$1" = xyes])
  AC_SUBST(UP[]_CPPFLAGS)
  AC_SUBST(UP[]_LDFLAGS)
  AC_SUBST(UP[]_LIBS)
  m4_popdef([UP])
])
