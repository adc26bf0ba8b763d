"""Reads a TensorBoard log directory as TensorBoard shows it: through the EventAccumulator its
backend builds a run with, which drops the events that a restart marks as orphaned (a
SessionLog START event, as PyTorch's SummaryWriter(purge_step=...) writes, hides every event
read before it with a step at or past the START's). Prints every scalar point kept, each tag's
in step order:
  scalar STEP TAG VALUE
usage: tb_shown.py LOG_DIR"""
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util import tb_logging

tb_logging.get_logger().setLevel("ERROR")  # its note of each purge would join the output

acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
acc.Reload()
for tag in sorted(acc.Tags()["scalars"]):
    for point in acc.Scalars(tag):
        print("scalar", point.step, tag, repr(point.value))
