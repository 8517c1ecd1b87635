#!/bin/sh
# The README's table of environment variables is the one hcomm_info makes
# from the configuration table: this fails when they drift apart.
set -eu
generated=$("$top_builddir/tools/hcomm_info" --env-markdown)
readme=$(sed -n '/<!-- env-table-begin -->/,/<!-- env-table-end -->/p' \
    "$top_srcdir/README.md" | sed '1d;$d')
if [ "$generated" != "$readme" ]; then
    echo "README.md's variable table differs from hcomm_info --env-markdown:"
    printf '%s\n' "$generated" > /tmp/hcomm_env_generated.$$
    printf '%s\n' "$readme" | diff - /tmp/hcomm_env_generated.$$ || true
    rm -f /tmp/hcomm_env_generated.$$
    echo "1 passed, 1 failed" | sed 's/1 passed/0 passed/'
    exit 1
fi
echo "readme_env_table: 1 passed, 0 failed"
