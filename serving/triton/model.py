"""cgr behind Triton Inference Server: the Python backend's model for any ONNX model cgr imports.

Triton starts one process (a Python backend stub) per model instance (the config's
instance_group count, per device for KIND_GPU); this model builds one cgr.BucketedEngine and
one context there, so instances run side by side without sharing a context. Triton's dynamic
batcher hands execute() the requests it grouped (at most max_batch_size samples in all, the
largest bucket); they are stacked into one batch, which runs on the smallest bucket that holds
it (cgr pads it with copies of the last sample), and the rows go back to their requests.

Parameters (config.pbtxt `parameters`, string values; tritonctl.py render writes them):
  onnx_model        the ONNX file, relative to the version folder (1/) or absolute
  buckets           batch sizes with one engine each, e.g. "1,2,4,8"
  mode              executor mode: dag (default), eager, stream-graph (cuda)
  threads           CPU threads of this instance's engine (0: one per hardware thread)
  exits             exit policy: off (default), all or early
  threshold         the confidence at which an exit fires (default 0.9)
  exit_outputs      JSON list of [onnx_output, speculate_until] pairs: the outputs that are
                    exit heads, in backbone order
  input_shapes      JSON {input: [dims]} for inputs with symbolic dims besides the batch
  cgr_python_path   a folder to put first on sys.path before `import cgr` (the build tree's
                    python/ folder, or empty when cgr is installed for this interpreter)
The device follows the instance kind: KIND_CPU builds a CPU engine, KIND_GPU a CUDA engine
on the instance's GPU (CUDA_VISIBLE_DEVICES set to it before cgr touches CUDA).

Outputs. Without exits (exits off, or no exit_outputs) the model's outputs, as cgr computes
them. With exits, the network must have one output besides the heads (the final logits), each
head the same shape, and each sample gets:
  logits                the logits of the head that answered it
  answered_by           BYTES: that head's name, or "final"
  <exit>_confidence     each head's confidence (largest softmax probability); NaN where the
                        head does not run for this sample alone (policy early: after the
                        head that answered)
A sample's answer does not depend on the requests Triton batched it with. cgr decides an exit
for the whole batch (it fires when every sample is confident), so under policy early the
answer of each sample is taken per row: the first head whose confidence reaches the threshold
(every head up to the one that fired for the batch has run), else the final output: what
cgr answers for that sample alone. Under policy all the final output answers every sample,
as in cgr.
"""

import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

ANSWER = "logits"
ANSWERED_BY = "answered_by"
CONFIDENCE_SUFFIX = "_confidence"


def _parameters(model_config):
    return {key: value.get("string_value", "") for key, value in
            model_config.get("parameters", {}).items()}


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        self.name = args["model_name"]
        self.instance = args["model_instance_name"]
        params = _parameters(self.model_config)

        def param(key, default=None):
            value = params.get(key, "")
            if value == "":
                if default is None:
                    raise pb_utils.TritonModelException(
                        f"model {self.name}: config.pbtxt has no parameter '{key}'")
                return default
            return value

        kind = args.get("model_instance_kind", "CPU")
        if kind == "GPU":
            # Before cgr loads: the CUDA runtime reads it when it initialises.
            os.environ["CUDA_VISIBLE_DEVICES"] = str(args["model_instance_device_id"])
            device = "cuda"
        elif kind == "CPU":
            device = "cpu"
        else:
            raise pb_utils.TritonModelException(
                f"model {self.name}: instance kind {kind} is not supported (KIND_CPU, KIND_GPU)")

        python_path = params.get("cgr_python_path", "")
        if python_path and python_path not in sys.path:
            sys.path.insert(0, python_path)
        try:
            import cgr
        except ImportError as e:
            raise pb_utils.TritonModelException(
                f"model {self.name}: cannot import the cgr package ({e}); sys.path starts with "
                f"{sys.path[:3]} (parameter cgr_python_path: '{python_path}')") from e
        self.cgr = cgr

        version_folder = os.path.join(args["model_repository"], args["model_version"])
        onnx_model = param("onnx_model")
        if not os.path.isabs(onnx_model):
            onnx_model = os.path.join(version_folder, onnx_model)
        try:
            buckets = [int(b) for b in param("buckets").split(",")]
            threshold = float(param("threshold", "0.9"))
            threads = int(param("threads", "0"))
            exit_outputs = [tuple(pair) for pair in json.loads(param("exit_outputs", "[]"))]
            input_shapes = json.loads(param("input_shapes", "{}"))
        except (ValueError, TypeError) as e:
            raise pb_utils.TritonModelException(
                f"model {self.name}: a parameter does not parse: {e}") from e
        self.exit_policy = param("exits", "off")
        max_batch = int(self.model_config.get("max_batch_size", 0))
        if max_batch != max(buckets):
            raise pb_utils.TritonModelException(
                f"model {self.name}: max_batch_size is {max_batch} but the largest bucket is "
                f"{max(buckets)} (buckets {buckets}): Triton's batches must fit a bucket")

        try:
            self.engine = cgr.BucketedEngine.from_onnx(
                onnx_model, buckets=buckets, device=device, mode=param("mode", "dag"),
                exits=self.exit_policy, threshold=threshold, threads=threads,
                input_shapes=input_shapes, exit_outputs=exit_outputs)
            self.context = self.engine.create_context()
        except cgr.Error as e:
            raise pb_utils.TritonModelException(f"model {self.name}: {e}") from e
        self.threshold = np.float32(self.engine.threshold)  # cgr compares in float32
        self.inputs = [spec.name for spec in self.engine.inputs]
        self.exit_names = list(self.engine.exit_names)
        # engine.outputs lists the heads too (unless exits are off).
        self.network_outputs = [spec.name for spec in self.engine.outputs
                                if spec.name not in self.exit_names]
        if self.exit_names:
            if len(self.network_outputs) != 1:
                raise pb_utils.TritonModelException(
                    f"model {self.name}: with exit heads the network must have one output "
                    f"besides them (the final logits); it has {self.network_outputs}")
            self.final = self.network_outputs[0]
            served = [ANSWER, ANSWERED_BY] + [e + CONFIDENCE_SUFFIX for e in self.exit_names]
        else:
            served = self.network_outputs
        configured = [o["name"] for o in self.model_config.get("output", [])]
        if sorted(configured) != sorted(served):
            raise pb_utils.TritonModelException(
                f"model {self.name}: config.pbtxt declares outputs {configured}, but this model "
                f"serves {served} (render the repository again: serving/triton/tritonctl.py)")
        pb_utils.Logger.log_info(
            f"cgr: {self.instance}: {onnx_model} on {device}, buckets {buckets}, exits "
            f"{self.exit_policy} {self.exit_names}, threshold {threshold}, threads {threads}")

    def execute(self, requests):
        arrays = []
        for request in requests:
            tensors = [pb_utils.get_input_tensor_by_name(request, name) for name in self.inputs]
            missing = [name for name, t in zip(self.inputs, tensors) if t is None]
            if missing:  # Triton checks requests against the config: not expected
                error = pb_utils.TritonError(f"model {self.name}: a request lacks inputs {missing}")
                return [pb_utils.InferenceResponse(error=error) for _ in requests]
            arrays.append([t.as_numpy() for t in tensors])
        sizes = [a[0].shape[0] for a in arrays]
        batch = {}
        for k, name in enumerate(self.inputs):
            parts = [np.asarray(a[k], dtype=np.float32) for a in arrays]
            batch[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
        try:
            result = self.context.infer(batch)
            outputs = self._served(result, sum(sizes))
        except self.cgr.Error as e:
            error = pb_utils.TritonError(f"model {self.name}: {e}")
            return [pb_utils.InferenceResponse(error=error) for _ in requests]

        responses = []
        first = 0
        for n in sizes:
            tensors = [pb_utils.Tensor(name, value[first:first + n]) for name, value in outputs.items()]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            first += n
        return responses

    def _served(self, result, n):
        """{served output: array of n rows} for one batch's cgr result."""
        if not self.exit_names:
            return {name: result.outputs[name] for name in self.network_outputs}
        heads = len(self.exit_names)
        answered = np.full(n, heads)  # index of the answering head; heads: the final output
        confidence = np.full((heads, n), np.nan, dtype=np.float32)
        for k, report in enumerate(result.exits):
            if not report.ran:
                continue
            confidence[k] = np.asarray(report.confidence, dtype=np.float32)
            if self.exit_policy == "early":
                fires = (confidence[k] >= self.threshold) & (answered == heads)
                answered[fires] = k
        if self.exit_policy == "early":
            # What a sample alone would see: the heads after the one that answered do not run.
            for k in range(heads):
                confidence[k][answered < k] = np.nan
        logits = None
        for k, name in enumerate(self.exit_names + [self.final]):
            rows = answered == k
            if not rows.any():
                continue
            if name not in result.outputs:
                raise self.cgr.Error(
                    f"{name} answered {int(rows.sum())} samples but its logits are not in the "
                    f"result (outputs: {sorted(result.outputs)})")
            values = result.outputs[name]
            if logits is None:
                logits = np.empty((n,) + values.shape[1:], dtype=np.float32)
            elif values.shape[1:] != logits.shape[1:]:
                raise self.cgr.Error(
                    f"exit head {name} has logits of shape {values.shape[1:]}, another head "
                    f"{logits.shape[1:]}: served heads need one shape")
            logits[rows] = values[rows]
        names = self.exit_names + ["final"]
        served = {ANSWER: logits,
                  ANSWERED_BY: np.array([[names[k].encode()] for k in answered], dtype=np.object_)}
        for k, name in enumerate(self.exit_names):
            served[name + CONFIDENCE_SUFFIX] = confidence[k].reshape(n, 1)
        return served

    def finalize(self):
        self.context = None
        self.engine = None
