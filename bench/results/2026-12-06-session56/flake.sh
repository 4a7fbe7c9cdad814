#!/bin/bash
# rep count of the flaky test beside 2 busy loops; $1 = binary, $2 = label
cd /work/main
( while :; do :; done ) & b1=$!
( while :; do :; done ) & b2=$!
REPEAT_N=${N:-80} PGCREW_BIN=$1 timeout 1200 .venv/bin/python -m pytest test/integration/test_zz_repeat_tmp.py -n 2 -p xdist -q -p no:cacheprovider > /tmp/s56/flake-$2.log 2>&1
kill $b1 $b2
tail -1 /tmp/s56/flake-$2.log
