"""Summarise py-spy raw (collapsed) stacks: self time and inclusive time per frame, loop thread separately."""

import collections
import sys
from pathlib import Path

self_t, incl, threads = collections.Counter(), collections.Counter(), collections.Counter()
total = 0
for line in Path(sys.argv[1]).read_text().splitlines():
    stack, _, count = line.rstrip().rpartition(" ")
    n = int(count)
    frames = stack.split(";")
    thread = frames[0]
    threads[thread] += n
    total += n
    self_t[frames[-1]] += n
    for f in set(frames[1:]):
        incl[(thread.split(" ")[0] if "MainThread" in thread else "worker/other", f)] += n
print(f"samples: {total}")
print("\nsamples per thread:")
for t, n in threads.most_common(12):
    print(f"  {n:6d}  {t}")
print("\nself time (top 25 frames):")
for f, n in self_t.most_common(25):
    print(f"  {100 * n / total:5.1f}%  {f}")
print("\ninclusive, main (dispatcher loop) thread, top 30:")
main = [(f, n) for (t, f), n in incl.items() if t != "worker/other"]
for f, n in sorted(main, key=lambda x: -x[1])[:30]:
    print(f"  {100 * n / total:5.1f}%  {f}")
