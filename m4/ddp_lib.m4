# SPDX-License-Identifier: BSD-3-Clause
# ddp_lib.m4 - one macro for every optional or required library: --with-X[=DIR] with
# auto-detection (pkg-config first, then the compiler's default paths, then DIR).
#
# DDP_CHECK_LIB(NAME, VAR, HEADER, LIB, FUNCTION, PKGS, DEFAULT, DESCRIPTION, [EXTRA-LIBS])
#   PKGS is a space-separated list of pkg-config names tried in order.
#   DEFAULT is "auto" (use when found), "yes" (required) or "no" (only when asked for).
#   Sets VAR_CFLAGS, VAR_LIBS, ddp_have_VAR (yes/no), ddp_where_VAR (for the summary),
#   AM_CONDITIONAL HAVE_VAR and AC_DEFINE HAVE_VAR.
AC_DEFUN([DDP_CHECK_LIB], [
  AC_ARG_WITH([$1],
    [AS_HELP_STRING([--with-$1@<:@=DIR@:>@], [$8 (default: $7)])],
    [ddp_with_$2="$withval"], [ddp_with_$2="$7"])
  ddp_have_$2=no
  ddp_where_$2=""
  $2_CFLAGS=""
  $2_LIBS=""
  AS_IF([test "x$ddp_with_$2" != xno], [
    ddp_save_CPPFLAGS="$CPPFLAGS"; ddp_save_LIBS="$LIBS"; ddp_save_LDFLAGS="$LDFLAGS"
    ddp_cands=""
    AS_CASE(["$ddp_with_$2"],
      [yes|auto], [
        ddp_pkg=""
        for ddp_p in $6; do
          AS_IF([test -z "$ddp_pkg" && $PKG_CONFIG --exists "$ddp_p" 2>/dev/null], [ddp_pkg="$ddp_p"])
        done
        AS_IF([test -n "$ddp_pkg"], [ddp_cands="pkgconfig"])
        ddp_cands="$ddp_cands system"],
      [ddp_cands="dir"])
    for ddp_c in $ddp_cands; do
      AS_CASE([$ddp_c],
        [pkgconfig], [ddp_cf=`$PKG_CONFIG --cflags "$ddp_pkg"`; ddp_lf=`$PKG_CONFIG --libs "$ddp_pkg"`;
                      ddp_where="pkg-config $ddp_pkg"],
        [system],    [ddp_cf=""; ddp_lf="-l$4"; ddp_where="system paths"],
        [dir],       [ddp_cf="-I$ddp_with_$2/include"
                      ddp_lf="-L$ddp_with_$2/lib -L$ddp_with_$2/lib64 -Wl,-rpath,$ddp_with_$2/lib -Wl,-rpath,$ddp_with_$2/lib64 -l$4"
                      ddp_where="$ddp_with_$2"])
      CPPFLAGS="$ddp_save_CPPFLAGS $ddp_cf"
      LIBS="$ddp_lf $9 $ddp_save_LIBS"
      ddp_ok=no
      AC_CHECK_HEADER([$3], [
        AC_MSG_CHECKING([for $5 in $ddp_lf])
        AC_LINK_IFELSE([AC_LANG_CALL([], [$5])], [ddp_ok=yes], [ddp_ok=no])
        AC_MSG_RESULT([$ddp_ok])])
      AS_UNSET([ac_cv_header_]AS_TR_SH([$3]))
      AS_IF([test $ddp_ok = yes], [
        ddp_have_$2=yes; ddp_where_$2="$ddp_where"
        $2_CFLAGS="$ddp_cf"; $2_LIBS="$ddp_lf $9"
        break])
    done
    CPPFLAGS="$ddp_save_CPPFLAGS"; LIBS="$ddp_save_LIBS"; LDFLAGS="$ddp_save_LDFLAGS"
    AS_IF([test $ddp_have_$2 = no && test "x$ddp_with_$2" != xauto],
      [AC_MSG_ERROR([$8 was requested (--with-$1=$ddp_with_$2) but $3 / lib$4 was not found or does not link. Install it or pass --with-$1=DIR (the prefix holding include/ and lib/).])])
  ])
  AC_SUBST([$2_CFLAGS])
  AC_SUBST([$2_LIBS])
  AM_CONDITIONAL([HAVE_$2], [test $ddp_have_$2 = yes])
  AS_IF([test $ddp_have_$2 = yes], [AC_DEFINE([HAVE_$2], [1], [Define if $8 is available.])])
])
