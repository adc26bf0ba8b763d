"""Checks a Chrome Trace Event Format file written by ember's profiler the way a trace viewer
reads it: JSON with a traceEvents list; every complete ("X") event has a name, category, pid,
tid, numeric ts and dur >= 0; each track (tid) used is named by thread_name metadata; the events
of a track nest (each lies inside, or after, the one that encloses it). Prints, per track,
"track NAME: N events" and, per (track, name), "event NAME|TRACK: N", then "ok".
usage: trace_check.py TRACE.json"""
import collections
import json
import sys

with open(sys.argv[1]) as f:
    trace = json.load(f)
events = trace["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in events
         if e["ph"] == "M" and e["name"] == "thread_name"}
complete = [e for e in events if e["ph"] == "X"]
by_tid = collections.defaultdict(list)
for e in complete:
    for key in ("name", "cat", "pid", "tid", "ts", "dur"):
        assert key in e, f"event without {key}: {e}"
    assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0, e
    assert e["tid"] in names, f"track {e['tid']} has no thread_name"
    by_tid[e["tid"]].append(e)
for tid, evs in by_tid.items():
    evs.sort(key=lambda e: (e["ts"], -e["dur"]))
    open_ends = []
    for e in evs:  # times are microseconds with three decimals: compare to half a nanosecond
        while open_ends and open_ends[-1] <= e["ts"] + 5e-4:
            open_ends.pop()
        end = e["ts"] + e["dur"]
        if open_ends:
            assert end <= open_ends[-1] + 5e-4, \
                f"{e['name']} at {e['ts']} overlaps its parent on track {names[tid]}"
        open_ends.append(end)
    print(f"track {names[tid]}: {len(evs)} events")
counts = collections.Counter(f"{e['name']}|{names[e['tid']]}" for e in complete)
for key, n in sorted(counts.items()):
    print(f"event {key}: {n}")
print("ok")
