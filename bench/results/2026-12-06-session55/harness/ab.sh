#!/bin/bash
# one run: variant bin, rounds; prints results
bin=$1; tag=$2
cd /tmp/s55/run
$bin base.ini > pgcrew-$tag.log 2>&1 &
pid=$!
for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/26532) 2>/dev/null && break; sleep 0.1; done
sleep 0.5
python3 drive.py 26532 600 3
kill -INT $pid; wait $pid
