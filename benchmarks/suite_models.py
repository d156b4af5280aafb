"""The models of benchmarks/suite_bench.py: PyTorch's own CPU lists (timm, HuggingFace) built with random weights, and
"blocks", plain torch.nn stand-ins of the conv nets' block types for environments without timm (CI)."""
from __future__ import annotations

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# the lists as upstream has them; we run batch 1 (HF: 1 x SEQ_LEN tokens)
TIMM_CPU = ("adv_inception_v3 beit_base_patch16_224 botnet26t_256 cait_m36_384 coat_lite_mini convit_base "
            "convmixer_768_32 convnext_base crossvit_9_240 cspdarknet53 deit_base_distilled_patch16_224 dm_nfnet_f0 "
            "dpn107 eca_botnext26ts_256 eca_halonext26ts fbnetc_100 fbnetv3_b gernet_l ghostnet_100 "
            "gluon_inception_v3 gmixer_24_224 gmlp_s16_224 hrnet_w18 inception_v3 jx_nest_base lcnet_050 "
            "mixer_b16_224 mixnet_l mnasnet_100 mobilenetv2_100 mobilenetv3_large_100 mobilevit_s nfnet_l0 "
            "pnasnet5large poolformer_m36 repvgg_a2 res2net101_26w_4s res2net50_14w_8s res2next50 resnest101e "
            "rexnet_100 sebotnet33ts_256 selecsls42b spnasnet_100 swin_base_patch4_window7_224 "
            "swsl_resnext101_32x16d tf_efficientnet_b0 tf_mixnet_l tnt_s_patch16_224 twins_pcpvt_base "
            "visformer_small vit_base_patch16_224 volo_d1_224 xcit_large_24_p8_224").split()
HF_CPU = ("AlbertForMaskedLM AllenaiLongformerBase BartForCausalLM BertForMaskedLM BigBird BlenderbotForCausalLM "
          "DebertaV2ForMaskedLM DistilBertForMaskedLM DistillGPT2 ElectraForCausalLM GoogleFnet "
          "GPT2ForSequenceClassification LayoutLMForMaskedLM M2M100ForConditionalGeneration MBartForCausalLM "
          "MegatronBertForCausalLM MobileBertForMaskedLM MT5ForConditionalGeneration OPTForCausalLM "
          "PegasusForCausalLM PLBartForCausalLM RobertaForCausalLM T5ForConditionalGeneration T5Small "
          "TrOCRForCausalLM XGLMForCausalLM XLNetLMHeadModel YituTechConvBert").split()
BLOCKS = ["mobilenet_blocks"]
SUITES = {"timm": TIMM_CPU, "hf": HF_CPU, "blocks": BLOCKS}
# upstream's names that are no transformers class: (class, config class, config overrides)
HF_ALIASES = {
    "AllenaiLongformerBase": ("LongformerForMaskedLM", "LongformerConfig", {}),
    "BigBird": ("BigBirdForMaskedLM", "BigBirdConfig", {"attention_type": "original_full"}),
    "DistillGPT2": ("GPT2LMHeadModel", "GPT2Config", {"n_layer": 6}),
    "GoogleFnet": ("FNetForMaskedLM", "FNetConfig", {}),
    "T5Small": ("T5ForConditionalGeneration", "T5Config", {}),
    "YituTechConvBert": ("ConvBertForMaskedLM", "ConvBertConfig", {}),
}
SEQ_LEN = 128
_TINY_HF = (("num_hidden_layers", 2), ("num_layers", 2), ("n_layer", 2), ("encoder_layers", 2), ("decoder_layers", 2),
            ("num_decoder_layers", 2), ("hidden_size", 64), ("d_model", 64), ("n_embd", 64), ("dim", 64), ("n_layers", 2),
            ("hidden_dim", 128), ("intermediate_size", 128), ("d_ff", 128), ("num_attention_heads", 2),
            ("n_heads", 2), ("n_head", 2), ("encoder_attention_heads", 2), ("decoder_attention_heads", 2),
            ("num_heads", 2), ("vocab_size", 1000))


def _install_torchvision_schemas() -> None:
    sys.path.insert(0, HERE)
    from torchvision_schemas import install
    install()


class _InvertedResidual(torch.nn.Module):
    """MobileNetV3's block: 1x1 expand, depthwise 3x3, squeeze-excitation (hardsigmoid gate), 1x1 project, residual."""

    def __init__(self, c: int, expand: int, stride: int) -> None:
        super().__init__()
        nn, h = torch.nn, c * expand
        self.expand = nn.Sequential(nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(h, h, 3, stride, 1, groups=h, bias=False), nn.BatchNorm2d(h), nn.Hardswish())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(h, h // 4, 1), nn.ReLU(), nn.Conv2d(h // 4, h, 1),
                                nn.Hardsigmoid())
        self.project = nn.Sequential(nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))
        self.residual = stride == 1

    def forward(self, x):
        y = self.dw(self.expand(x))
        y = self.project(y * self.se(y))
        return x + y if self.residual else y


def _mobilenet_blocks() -> torch.nn.Module:
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish(),
                         _InvertedResidual(16, 3, 1), _InvertedResidual(16, 4, 2), _InvertedResidual(16, 3, 1),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(16, 10))


def build(suite: str, name: str, tiny: bool) -> tuple[torch.nn.Module, tuple | dict]:
    """(model in eval mode, example inputs) with random weights, batch 1."""
    torch.manual_seed(0)
    if suite == "blocks":
        if name not in BLOCKS:
            raise ValueError(f"no stand-in model {name!r} (have: {', '.join(BLOCKS)})")
        return _mobilenet_blocks().eval(), (torch.randn(1, 3, 32 if tiny else 112, 32 if tiny else 112),)
    _install_torchvision_schemas()  # (transformers imports torchvision too, wherever it is installed)
    if suite == "timm":
        import timm
        model = timm.create_model(name, pretrained=False, **({"num_classes": 10} if tiny else {}))
        size = model.pretrained_cfg.get("input_size", (3, 224, 224)) if hasattr(model, "pretrained_cfg") else \
            (3, 224, 224)
        return model.eval(), (torch.randn(1, size[0], *((64, 64) if tiny else size[1:])),)
    import transformers
    cls_name, config_name, overrides = HF_ALIASES.get(name, (name, None, {}))
    cls = getattr(transformers, cls_name)
    config = getattr(transformers, config_name)() if config_name else cls.config_class()
    for k, v in {**overrides, **(dict(_TINY_HF) if tiny else {})}.items():
        if k in overrides or hasattr(config, k):
            setattr(config, k, v)
    model = cls(config).eval()
    ids = torch.randint(0, getattr(config, "vocab_size", 1000), (1, 16 if tiny else SEQ_LEN))
    inputs = {"input_ids": ids}
    if getattr(config, "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = ids
    return model, inputs


def call(model, inputs):
    return model(**inputs) if isinstance(inputs, dict) else model(*inputs)


def tensors(out) -> list[torch.Tensor]:
    """A model output's tensors, flattened in order (HF ModelOutputs, tuples, nested caches)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict) or hasattr(out, "to_tuple"):
        out = out.to_tuple() if hasattr(out, "to_tuple") else tuple(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in tensors(o)]
    return []


def as_double(inputs):
    """The example inputs with floating tensors in float64 (the harness's float64 reference run)."""
    cast = (lambda v: v.double() if v.is_floating_point() else v)
    return {k: cast(v) for k, v in inputs.items()} if isinstance(inputs, dict) else tuple(cast(v) for v in inputs)


def without_dropout(model: torch.nn.Module) -> torch.nn.Module:
    """Every dropout probability set to 0 (nn.Dropout's `p`, the float `dropout`-like attributes HF modules pass to
    F.dropout, timm's DropPath), so that a training step is one function every backend computes the same."""
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
        for attr in ("dropout", "attention_dropout", "activation_dropout", "drop_prob", "dropout_rate"):
            if isinstance(getattr(module, attr, None), float):
                setattr(module, attr, 0.0)
    return model
