"""Reads a TensorBoard event file written by ember with TensorBoard's own loaders and prints one
line per event, floats in shortest round-trip form, for the C test to check every value and
step. EventFileLoader gives what TensorBoard shows (values migrated to its scalars and
histograms plugins); LegacyEventFileLoader gives the raw HistogramProto fields beside it.
  version STEP FILE_VERSION
  scalar STEP TAG VALUE
  histo STEP TAG MIN MAX NUM SUM SUM_SQUARES N (LEFT RIGHT COUNT) x N
Given a directory, every event file in it, in the order they were opened (the wall time of
their first event), as TensorBoard shows the runs of one log directory one after the other.
usage: tb_read.py EVENT_FILE|LOG_DIR"""
import os
import sys

from tensorboard.backend.event_processing.event_file_loader import (
    EventFileLoader, LegacyEventFileLoader)
from tensorboard.util import tensor_util


def opened_at(path):
    return next(iter(LegacyEventFileLoader(path).Load())).wall_time


def event_files(path):
    if not os.path.isdir(path):
        return [path]
    names = [os.path.join(path, n) for n in os.listdir(path) if n.startswith("events.out.")]
    return sorted(names, key=opened_at)


def print_file(path):
    for event, raw in zip(EventFileLoader(path).Load(), LegacyEventFileLoader(path).Load()):
        if event.HasField("file_version"):
            print("version", event.step, event.file_version)
            continue
        for v, r in zip(event.summary.value, raw.summary.value):
            plugin = v.metadata.plugin_data.plugin_name
            value = tensor_util.make_ndarray(v.tensor)
            if plugin == "scalars":
                print("scalar", event.step, v.tag, repr(float(value)))
            elif plugin == "histograms":
                h = r.histo
                fields = [h.min, h.max, h.num, h.sum, h.sum_squares, len(value)]
                fields += [float(x) for row in value for x in row]
                print("histo", event.step, v.tag, *map(repr, fields))
            else:
                print("unknown", event.step, v.tag, plugin)


for f in event_files(sys.argv[1]):
    print_file(f)
