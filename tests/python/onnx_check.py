"""Checks an ONNX file written by ember with the real tools: onnx.checker (full check) passes,
and onnxruntime's output for a saved input matches ember's saved output.
usage: onnx_check.py MODEL INPUT.bin SHAPE EXPECTED.bin TOL [--absent OP | --present OP]
(SHAPE like 5x1x28x28; the .bin files hold raw f32, the input raw i64 where the model's input is
int64 (token ids); --absent: OP must not be in the graph; --present: OP must be)"""
import sys

import numpy as np
import onnx
import onnxruntime as ort

model_path, input_path, shape, expected_path, tol = sys.argv[1:6]
model = onnx.load(model_path)
onnx.checker.check_model(model, full_check=True)
int64_input = model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64
x = np.fromfile(input_path, dtype=np.int64 if int64_input else np.float32).reshape([int(d) for d in shape.split("x")])
sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
(y,) = sess.run(None, {sess.get_inputs()[0].name: x})
expected = np.fromfile(expected_path, dtype=np.float32).reshape(y.shape)
diff = float(np.max(np.abs(y - expected)))
ops = sorted({n.op_type for n in model.graph.node})
print(f"onnx_check: opset {model.opset_import[0].version}, ops {ops}, output {list(y.shape)}, "
      f"max |ort - ember| = {diff:.3g}")
flag, op = sys.argv[6:8] if len(sys.argv) > 7 else (None, None)
if flag == "--absent" and op in ops:
    print(f"onnx_check: {op} should have been folded away")
    sys.exit(1)
if flag == "--present" and op not in ops:
    print(f"onnx_check: the graph should hold a {op} node")
    sys.exit(1)
sys.exit(0 if diff <= float(tol) else 1)
