"""Whole networks through lens against eager (1e-3): benchmarks/model_zoo.py's architectures at tiny sizes
(transformers configs with random weights, the Conv-BN-ReLU net), inference under no_grad with freezing, and a
training step's gradients. The full-size zoo is timed by benchmarks/model_bench.py, never here."""
from __future__ import annotations

import math
import pathlib
import sys

import pytest
import torch

from compiler.frontend.dynamo_backend import lens_backend

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
from model_zoo import ConvNet, _randomized_bn  # noqa: E402

transformers = pytest.importorskip("transformers")

_TINY = dict(hidden_size=32, num_attention_heads=2, intermediate_size=64, num_hidden_layers=1, vocab_size=100,
             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
_CONFIGS = {
    "bert": ("BertModel", "BertConfig", dict(_TINY, max_position_embeddings=64)),
    "gpt2": ("GPT2Model", "GPT2Config", dict(n_embd=32, n_head=2, n_layer=1, n_positions=64, vocab_size=100,
                                             resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)),
    "vit": ("ViTModel", "ViTConfig", dict(_TINY, image_size=32, patch_size=8)),
    "mobilebert": ("MobileBertModel", "MobileBertConfig",
                   dict(_TINY, embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16,
                        num_feedforward_networks=2, max_position_embeddings=64)),
}


def _model(name: str):
    model_class, config_class, cfg = _CONFIGS[name]
    torch.manual_seed(0)
    return getattr(transformers, model_class)(getattr(transformers, config_class)(**cfg))


def _inputs(name: str):
    g = torch.Generator().manual_seed(2)
    if name == "vit":
        return {"pixel_values": torch.randn(2, 3, 32, 32, generator=g)}
    return {"input_ids": torch.randint(0, 100, (2, 16), generator=g),
            "attention_mask": torch.ones(2, 16, dtype=torch.long)}


@pytest.mark.parametrize("name", sorted(_CONFIGS))
def test_transformer_inference_equals_eager(name):
    torch._dynamo.reset()
    model, inputs = _model(name).eval(), _inputs(name)
    compiled = torch.compile(model, backend=lens_backend)
    with torch.no_grad():
        expected = model(**inputs).last_hidden_state
        torch.testing.assert_close(compiled(**inputs).last_hidden_state, expected, rtol=1e-3, atol=1e-3)


def test_conv_net_inference_equals_eager_and_follows_a_weight_change():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _randomized_bn(ConvNet(widths=(8, 16, 16, 32), classes=10)).eval()
    x = torch.randn(2, 3, 32, 32)
    compiled = torch.compile(model, backend=lens_backend)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-3)
        model.stages[1].body[0][1].running_mean.add_(0.5)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-3)


def test_training_step_gradients_equal_eager():
    torch._dynamo.reset()
    model, inputs = _model("bert").train(), _inputs("bert")

    def grads(fn):
        model.zero_grad(set_to_none=True)
        fn(**inputs).last_hidden_state.square().mean().backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    expected, got = grads(model), grads(torch.compile(model, backend=lens_backend))
    assert expected.keys() <= got.keys()
    for name in got.keys() - expected.keys():  # the unused pooler: AOTAutograd gives zeros where eager gives None
        assert not got[name].any(), name
    torch.testing.assert_close({n: got[n] for n in expected}, expected, rtol=1e-3, atol=1e-3)


def test_gpt2_gelu_cubes_by_multiplication_as_eager_does():
    torch._dynamo.reset()

    def gelu(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    x = torch.randn(64, 96) * 3
    torch.testing.assert_close(torch.compile(gelu, backend=lens_backend)(x), gelu(x))
    for exponent in (2, 3):  # bit for bit (an add after them could be contracted into an FMA)
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(lambda t: t ** exponent, backend=lens_backend)(x), x ** exponent,
                                   rtol=0, atol=0)
