"""The whole networks benchmarks/model_bench.py times: `transformers` models built from configs (random weights,
few layers, no hub downloads), a Conv-BN-ReLU net defined here, and torchvision's ResNet-18 where installed."""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn


@dataclass
class ZooModel:
    name: str
    build: Callable[[], tuple[nn.Module, Callable, Callable[[], tuple]]]  # -> (module, fn(*inputs), inputs())
    needs: str = ""  # the optional package it is built with
    atol: float = 1e-3
    rtol: float = 1e-3


def has_package(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


class ConvBNReLU(nn.Sequential):
    def __init__(self, cin: int, cout: int, stride: int = 1, relu: bool = True):
        layers = [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)]
        super().__init__(*layers, *([nn.ReLU()] if relu else []))


class ResidualBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(ConvBNReLU(cin, cout, stride), ConvBNReLU(cout, cout, relu=False))
        self.short = (nn.Identity() if cin == cout and stride == 1 else
                      nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

    def forward(self, x):
        return torch.relu(self.body(x) + self.short(x))


class ConvNet(nn.Module):
    """A small ResNet-like net: a strided stem, four residual stages of Conv-BN-ReLU pairs, pooling, a Linear."""

    def __init__(self, widths=(32, 64, 128, 256), classes: int = 100):
        super().__init__()
        self.stem = ConvBNReLU(3, widths[0], 2)
        stages, cin = [], widths[0]
        for i, w in enumerate(widths):
            stages.append(ResidualBlock(cin, w, 1 if i == 0 else 2))
            cin = w
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(self.stages(self.stem(x)), 1), 1))


def _randomized_bn(model: nn.Module) -> nn.Module:
    """BatchNorm statistics and affine parameters away from their identity defaults, so a wrong fold shows."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return model


def _convnet(size: int = 112) -> Callable:
    def build():
        torch.manual_seed(0)
        model = _randomized_bn(ConvNet())
        return model, model, lambda: (torch.randn(2, 3, size, size),)
    return build


def _resnet18():
    import torchvision
    torch.manual_seed(0)
    model = _randomized_bn(torchvision.models.resnet18())
    return model, model, lambda: (torch.randn(2, 3, 224, 224),)


def _text_inputs(vocab: int, batch: int, tokens: int) -> Callable[[], tuple]:
    def make():
        g = torch.Generator().manual_seed(2)
        ids = torch.randint(0, vocab, (batch, tokens), generator=g)
        return ids, torch.ones(batch, tokens, dtype=torch.long)
    return make


def _hidden_states(model: nn.Module) -> Callable:
    def run(*inputs):
        if len(inputs) == 2:
            return model(input_ids=inputs[0], attention_mask=inputs[1]).last_hidden_state
        return model(pixel_values=inputs[0]).last_hidden_state
    return run


def _transformer(model_class: str, config_class: str, inputs: Callable[[object], Callable[[], tuple]], **cfg):
    def build():
        import transformers
        torch.manual_seed(0)
        config = getattr(transformers, config_class)(**cfg)
        model = getattr(transformers, model_class)(config)
        return model, _hidden_states(model), inputs(config)
    return build


_NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def zoo() -> list[ZooModel]:
    """Every model of the bench, smallest layer counts that still show each architecture's pattern."""
    text = lambda batch, tokens: lambda c: _text_inputs(c.vocab_size, batch, tokens)  # noqa: E731
    models = [
        ZooModel("bert", _transformer("BertModel", "BertConfig", text(2, 64), num_hidden_layers=2, **_NO_DROPOUT),
                 needs="transformers"),
        ZooModel("gpt2", _transformer("GPT2Model", "GPT2Config", text(2, 64), n_layer=2, n_positions=256,
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0), needs="transformers"),
        ZooModel("distilbert", _transformer("DistilBertModel", "DistilBertConfig", text(2, 64), n_layers=2,
                                            dropout=0.0, attention_dropout=0.0), needs="transformers"),
        ZooModel("vit", _transformer("ViTModel", "ViTConfig", lambda c: lambda: (torch.randn(2, 3, 224, 224),),
                                     num_hidden_layers=2, **_NO_DROPOUT), needs="transformers"),
        ZooModel("mobilebert", _transformer("MobileBertModel", "MobileBertConfig", text(1, 128),
                                            num_hidden_layers=4, **_NO_DROPOUT), needs="transformers"),
        ZooModel("convnet", _convnet()),
        ZooModel("resnet18", _resnet18, needs="torchvision"),
    ]
    return models
