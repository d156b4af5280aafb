"""PyTorch's own CPU benchmark suites under lens (issue 49): models of `benchmarks/dynamo/timm_models_list_cpu.txt` and
`huggingface_models_list_cpu.txt` (pytorch/pytorch), random weights, fp32 inference under no_grad, each model in a
process of its own with a timeout; eager, Inductor (default), Inductor with `freezing = True` (upstream's CPU
inference setting) and lens compiled and then timed interleaved in that process.

Per model: the first call of each backend (compile time), the median of the timed calls, accuracy as PyTorch's
harness judges it (`torch._dynamo.utils.same` with a float64 reference: the backend's RMSE against a float64 eager
run at most 3x eager's own float32 RMSE, plus tol/10), lens's time split by a profiler pass into convolution/GEMM
calls, its other ATen calls and the rest of the compiled region (its generated kernels and their Python), and how
many graphs lens ran eagerly. `--cpu-time` times each call by the calling thread's CPU time (with `--threads 1`:
robust on a shared machine, where wall time is noise); else wall time.

Usage: python benchmarks/suite_bench.py [--suite timm|hf|all] [--models a,b] [--threads 2] [--reps 20]
       [--timeout 900] [--backends eager,inductor,inductor_freezing,lens] [--cpu-time] [--tiny] [--json out.jsonl]
timm needs torchvision's op schemas where PyPI's torchvision cannot load beside a CPU torch
(benchmarks/torchvision_schemas.py, installed before timm is imported). `--tiny` shrinks every model (CI's
correctness subset: tests/benchmarks/test_suite_bench.py).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
# the lists as upstream has them (name, its training batch size there); we run batch 1 (HF: 1 x SEQ_LEN tokens)
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
BACKENDS = ("eager", "inductor", "inductor_freezing", "lens")
_GEMM_CONV = ("conv", "mm", "linear", "bmm", "baddbmm", "matmul", "_convolution_pointwise", "mkl_")


@dataclass
class ModelResult:
    suite: str
    name: str
    status: str = "ok"  # ok | build failed | timeout | crashed | <backend> raised
    error: str = ""
    first_call_s: dict[str, float] = field(default_factory=dict)
    median_ms: dict[str, float] = field(default_factory=dict)
    accurate: dict[str, bool] = field(default_factory=dict)
    lens_split_ms: dict[str, float] = field(default_factory=dict)  # gemm/conv calls, other ATen, compiled region
    lens_eager_graphs: int = 0


def _install_torchvision_schemas() -> None:
    sys.path.insert(0, HERE)
    from torchvision_schemas import install
    install()


def _tiny_timm_kwargs(name: str) -> dict:
    return {"num_classes": 10}


def build(suite: str, name: str, tiny: bool):
    """(model in eval mode, example inputs) with random weights, batch 1."""
    import torch
    torch.manual_seed(0)
    _install_torchvision_schemas()  # (transformers imports torchvision too, wherever it is installed)
    if suite == "timm":
        import timm
        model = timm.create_model(name, pretrained=False, **(_tiny_timm_kwargs(name) if tiny else {}))
        size = model.pretrained_cfg.get("input_size", (3, 224, 224)) if hasattr(model, "pretrained_cfg") else \
            (3, 224, 224)
        if tiny:
            size = (size[0], 64, 64)
        return model.eval(), (torch.randn(1, *size),)
    import transformers
    cls_name, config_name, overrides = HF_ALIASES.get(name, (name, None, {}))
    cls = getattr(transformers, cls_name)
    config = getattr(transformers, config_name)() if config_name else cls.config_class()
    for k, v in overrides.items():
        setattr(config, k, v)
    if tiny:
        for attr, value in (("num_hidden_layers", 2), ("num_layers", 2), ("n_layer", 2), ("encoder_layers", 2),
                            ("decoder_layers", 2), ("num_decoder_layers", 2), ("hidden_size", 64), ("d_model", 64),
                            ("n_embd", 64), ("intermediate_size", 128), ("d_ff", 128), ("num_attention_heads", 2),
                            ("n_head", 2), ("encoder_attention_heads", 2), ("decoder_attention_heads", 2),
                            ("num_heads", 2), ("vocab_size", 1000)):
            if hasattr(config, attr):
                setattr(config, attr, value)
    model = cls(config).eval()
    vocab = getattr(config, "vocab_size", 1000)
    seq = 16 if tiny else SEQ_LEN
    ids = torch.randint(0, vocab, (1, seq))
    inputs = {"input_ids": ids}
    if getattr(config, "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = ids
    return model, inputs


def _call(model, inputs):
    return model(**inputs) if isinstance(inputs, dict) else model(*inputs)


def _tensors(out):
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict) or hasattr(out, "to_tuple"):
        out = out.to_tuple() if hasattr(out, "to_tuple") else tuple(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return []


def _accurate(ref, res, fp64) -> bool:
    """PyTorch's harness rule (torch._dynamo.utils.same with fp64_ref, multiplier 3, tol 1e-4)."""
    from torch._dynamo.utils import same
    return bool(same(ref, res, fp64_ref=fp64, tol=1e-4, cos_similarity=False))  # (its multiplier: 3.0)


def _compile(backend: str, model):
    import torch
    import torch._inductor.config as inductor_config
    if backend == "eager":
        return model
    inductor_config.freezing = backend == "inductor_freezing"
    return torch.compile(model, backend="lens" if backend == "lens" else "inductor")


def _lens_split(fn, inputs, reps: int = 5) -> dict[str, float]:
    """ms per call: GEMM/convolution calls, other ATen calls (self time), and the rest of the compiled region."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(reps):
            _call(fn, inputs)
    gemm = other = region = 0.0
    for e in prof.key_averages():
        self_ms = e.self_cpu_time_total / 1e3 / reps
        if e.key.startswith("Torch-Compiled Region") or e.key.startswith("## Call CompiledFxGraph"):
            region += self_ms
        elif e.key.startswith(("aten::", "mkldnn::", "lens::", "mkl::")):
            if any(k in e.key for k in _GEMM_CONV):
                gemm += self_ms
            else:
                other += self_ms
    return {"gemm_conv": round(gemm, 3), "other_aten": round(other, 3), "generated": round(region, 3)}


def run_one(suite: str, name: str, backends: list[str], reps: int, cpu_time: bool, tiny: bool) -> ModelResult:
    import copy

    import torch
    from compiler import pipeline
    result = ModelResult(suite, name)
    try:
        model, inputs = build(suite, name, tiny)
    except Exception as e:  # noqa: BLE001 (a model this environment cannot build: reported, not timed)
        result.status, result.error = "build failed", f"{type(e).__name__}: {e}"[:300]
        return result
    clock = time.thread_time if cpu_time else time.perf_counter
    with torch.no_grad():
        ref = _call(model, inputs)
        fp64_model = copy.deepcopy(model).double()
        fp64_inputs = {k: (v.double() if v.is_floating_point() else v) for k, v in inputs.items()} \
            if isinstance(inputs, dict) else tuple(v.double() for v in inputs)
        fp64 = _call(fp64_model, fp64_inputs)
        del fp64_model
        fns, eager_before = {}, len(pipeline.EAGER)
        for backend in backends:
            torch._dynamo.reset()
            try:
                fn = _compile(backend, model)
                start = time.perf_counter()
                out = _call(fn, inputs)
                result.first_call_s[backend] = round(time.perf_counter() - start, 3)
                result.accurate[backend] = _accurate(_tensors(ref), _tensors(out), _tensors(fp64)) \
                    if backend != "eager" else True
                fns[backend] = fn
            except Exception as e:  # noqa: BLE001 (a backend that raises: the model's status says which)
                result.status, result.error = f"{backend} raised", f"{type(e).__name__}: {e}"[:300]
        result.lens_eager_graphs = len(pipeline.EAGER) - eager_before
        times: dict[str, list[float]] = {b: [] for b in fns}
        for _ in range(reps):
            for backend, fn in fns.items():
                start = clock()
                _call(fn, inputs)
                times[backend].append(clock() - start)
        result.median_ms = {b: round(statistics.median(t) * 1e3, 3) for b, t in times.items()}
        if "lens" in fns:
            result.lens_split_ms = _lens_split(fns["lens"], inputs)
    return result


def run_isolated(suite: str, name: str, args) -> ModelResult:
    """One model in a process of its own (a crash or a hang costs that model only)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one", name, "--suite", suite, "--reps", str(args.reps),
           "--threads", str(args.threads), "--backends", ",".join(args.backends)]
    cmd += ["--cpu-time"] if args.cpu_time else []
    cmd += ["--tiny"] if args.tiny else []
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return ModelResult(suite, name, status="timeout", error=f"over {args.timeout} s")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return ModelResult(**json.loads(line[len("RESULT "):]))
    return ModelResult(suite, name, status="crashed", error=f"exit {proc.returncode}: {proc.stderr[-300:]}")


def _geomean(values: list[float]) -> float:
    import math
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def table(results: list[ModelResult]) -> str:
    """A markdown table: per model the medians, lens / Inductor-with-freezing and lens / eager, accuracy, first calls,
    lens's split; then the geomean of lens / Inductor-with-freezing per suite over the models timed."""
    lines = ["| suite | model | eager ms | Inductor ms | Ind.+freezing ms | lens ms | lens/Ind.+fr. | lens/eager | "
             "accurate (lens) | first call lens / Ind.+fr. s | lens GEMM+conv / other ATen / generated ms | status |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios: dict[str, list[float]] = {}
    for r in results:
        m = r.median_ms
        ratio = m["lens"] / m["inductor_freezing"] if "lens" in m and "inductor_freezing" in m else None
        vs_eager = m["lens"] / m["eager"] if "lens" in m and "eager" in m else None
        if ratio is not None and r.accurate.get("lens"):
            ratios.setdefault(r.suite, []).append(ratio)
        split = r.lens_split_ms
        lines.append("| " + " | ".join([
            r.suite, r.name, *(f"{m[b]:.2f}" if b in m else "-" for b in BACKENDS),
            f"{ratio:.2f}" if ratio else "-", f"{vs_eager:.2f}" if vs_eager else "-",
            str(r.accurate.get("lens", "-")),
            f"{r.first_call_s.get('lens', float('nan')):.1f} / {r.first_call_s.get('inductor_freezing', float('nan')):.1f}",
            f"{split['gemm_conv']:.2f} / {split['other_aten']:.2f} / {split['generated']:.2f}" if split else "-",
            r.status + (f" ({r.lens_eager_graphs} graphs eager)" if r.lens_eager_graphs else "")]) + " |")
    for suite, values in ratios.items():
        lines.append(f"\ngeomean lens / Inductor-with-freezing, {suite}: {_geomean(values):.2f} over {len(values)} models")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=("timm", "hf", "all"), default="all")
    parser.add_argument("--models", default="", help="comma-separated names (default: the suite's whole list)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--cpu-time", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--json", default="")
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.backends = [b for b in args.backends.split(",") if b]
    if args.one:
        import torch
        torch.set_num_threads(args.threads)
        result = run_one(args.suite, args.one, args.backends, args.reps, args.cpu_time, args.tiny)
        print("RESULT " + json.dumps(asdict(result)), flush=True)
        return 0
    suites = ("timm", "hf") if args.suite == "all" else (args.suite,)
    wanted = [m for m in args.models.split(",") if m]
    results = []
    for suite in suites:
        names = TIMM_CPU if suite == "timm" else HF_CPU
        for name in (wanted and [m for m in wanted if m in names or suite == args.suite]) or names:
            result = run_isolated(suite, name, args)
            print(json.dumps(asdict(result)), flush=True)
            results.append(result)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(asdict(result)) + "\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
