"""nn.TransformerEncoderLayer's inference fast path as the ops it computes.

Under `torch.no_grad()` in eval mode the module calls one fused op (`torch._transformer_encoder_layer_fwd`), which
Dynamo's graph then holds whole: lens could only call it, fusing nothing around it, and under
`torch.autocast("cpu")` it computed in float32 and returned float32 where eager returns bfloat16: eager's autocast
casts the products inside the fused op as they run, but AOTAutograd traces the op with autocast's dispatch already
behind it. A bf16-autocast TransformerEncoderLayer(512, 8) on (8, 256, 512): 50 ms compiled against eager's 15-24.
So the backend replaces the call in Dynamo's graph, before AOTAutograd traces it (`inline_fast_paths`), by the
module's own ops (in-projection, scaled dot-product attention, out-projection, residuals, layer norms,
feed-forward): traced inside the graph's autocast region, its products go through autocast like any linear, and
the kernels fuse as in the module's regular path. With a mask (padding masks give nested tensors) the op stays.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def _attention(x, embed_dim: int, num_heads: int, qkv_weight, qkv_bias, proj_weight, proj_bias):
    """Self-attention of x (batch, length, embed) as MultiheadAttention computes it without masks."""
    batch, length = x.shape[0], x.shape[1]
    qkv = F.linear(x, qkv_weight, qkv_bias).view(batch, length, 3, num_heads, embed_dim // num_heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    out = F.scaled_dot_product_attention(q, k, v)
    return F.linear(out.transpose(1, 2).reshape(batch, length, embed_dim), proj_weight, proj_bias)


def transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
                                  norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2,
                                  ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None, mask_type=None):
    """What `torch._transformer_encoder_layer_fwd` computes, as the module's regular path computes it."""
    if mask is not None or src.dim() != 3 or src.is_nested:
        return torch._transformer_encoder_layer_fwd(
            src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps,
            norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2,
            ffn_bias_2, mask, mask_type)
    shape = (embed_dim,)
    activation = F.gelu if use_gelu else F.relu

    def attention(x):
        return _attention(x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias)

    def feed_forward(x):
        return F.linear(activation(F.linear(x, ffn_weight_1, ffn_bias_1)), ffn_weight_2, ffn_bias_2)
    x = src
    if norm_first:
        x = x + attention(F.layer_norm(x, shape, norm_weight_1, norm_bias_1, eps))
        x = x + feed_forward(F.layer_norm(x, shape, norm_weight_2, norm_bias_2, eps))
    else:
        x = F.layer_norm(x + attention(x), shape, norm_weight_1, norm_bias_1, eps)
        x = F.layer_norm(x + feed_forward(x), shape, norm_weight_2, norm_bias_2, eps)
    device = src.device.type
    if torch.is_autocast_enabled(device):  # (the fused op returns autocast's dtype, its last ops running in it)
        x = x.to(torch.get_autocast_dtype(device))
    return x


_FAST_PATHS = {torch._transformer_encoder_layer_fwd: transformer_encoder_layer_fwd}


def inline_fast_paths(gm: torch.fx.GraphModule) -> bool:
    """Dynamo graph `gm` with each fused fast-path call replaced by the ops it computes (in place); whether any was."""
    found = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in _FAST_PATHS:
            node.target, found = _FAST_PATHS[node.target], True
    if found:
        gm.recompile()
    return found
