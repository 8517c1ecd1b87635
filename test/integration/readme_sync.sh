#!/bin/sh
# The README shows what the code is: its table of environment variables is
# the one hcomm_info makes from the configuration table, and its C example is
# examples/hello_allreduce.c, which make check builds and runs; its Python
# example is examples/ddp_train.py.
set -u
section() { # the lines between two HTML comment markers of README.md
    sed -n "/<!-- $1-begin -->/,/<!-- $1-end -->/p" "$top_srcdir/README.md" |
        sed '1d;$d'
}
passed=0 failed=0
compare() { # name, expected, actual
    if [ "$2" = "$3" ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "README.md's $1 is out of date; it should read:"
        printf '%s\n' "$2"
    fi
}
compare "variable table" "$("$top_builddir/tools/hcomm_info" --env-markdown)" \
    "$(section env-table)"
compare "C example" "$(printf '```c\n'; cat "$top_srcdir/examples/hello_allreduce.c"; printf '```')" \
    "$(section example)"
compare "DDP example" "$(printf '```python\n'; cat "$top_srcdir/examples/ddp_train.py"; printf '```')" \
    "$(section ddp-example)"
echo "readme_sync: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
