# SPDX-License-Identifier: BSD-3-Clause
# ddp_sanitize.m4 - --enable-sanitizers: build everything (library code and tests) with
# AddressSanitizer and UndefinedBehaviorSanitizer, failing on the first UB report.
AC_DEFUN([DDP_SANITIZERS], [
  AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers], [build with -fsanitize=address,undefined (for make check)])],
    [ddp_sanitizers="$enableval"], [ddp_sanitizers=no])
  SANITIZE_CFLAGS=""
  AS_IF([test "x$ddp_sanitizers" = xyes], [
    SANITIZE_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
    ddp_save_CFLAGS="$CFLAGS"; CFLAGS="$CFLAGS $SANITIZE_CFLAGS"
    AC_MSG_CHECKING([whether $CC supports ASan+UBSan])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])], [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no]); AC_MSG_ERROR([--enable-sanitizers: $CC cannot link with $SANITIZE_CFLAGS])])
    CFLAGS="$ddp_save_CFLAGS"])
  AC_SUBST([SANITIZE_CFLAGS])
  AM_CONDITIONAL([SANITIZERS], [test "x$ddp_sanitizers" = xyes])
])
